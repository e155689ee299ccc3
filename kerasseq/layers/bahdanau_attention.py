"""Additive attention (Bahdanau, Cho & Bengio 2014)."""

import keras

from kerasseq._validation import check_positive_int
from kerasseq.layers._attention_math import additive_score
from kerasseq.layers.recurrent_attention import RecurrentAttention


@keras.saving.register_keras_serializable(package="kerasseq")
class BahdanauAttention(RecurrentAttention):
    """Additive attention with the previous decoder state as the query.

    For decoder step t, with previous state s_{t-1} and encoder outputs h_i:

        e_{t,i} = v^T tanh(W_1 s_{t-1} + W_2 h_i)
        α_{t,i} = exp(e_{t,i}) / Σ_j exp(e_{t,j})         (over real positions)
        ctx_t   = Σ_i α_{t,i} h_i

    (Bahdanau, Cho & Bengio 2014, "Neural Machine Translation by Jointly
    Learning to Align and Translate".) `W_2 h_i` does not depend on t, so it is
    computed once per source sentence (`precompute_keys`) and reused at every
    decoder step.

    Args:
        units: int, size of the hidden layer of the scoring MLP.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    The call (its arguments and returns), the softmax, the context and the
    masks are `RecurrentAttention`'s, the base it shares with
    `LuongAttention`; this class adds the score. Its `query` is the previous
    decoder state s_{t-1}, and its `keys` are W_2 h_i `(batch_size,
    source_length, units)`.

    Example:

    >>> attention = BahdanauAttention(units=8)
    >>> context, weights = attention(np.zeros((2, 4)), np.ones((2, 5, 6)))
    >>> context.shape, weights.shape
    (TensorShape([2, 6]), TensorShape([2, 5]))
    """

    query_uses_previous_state = True

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        dtype = self.dtype_policy
        self.query_dense = keras.layers.Dense(units, use_bias=False, dtype=dtype, name="query_dense")
        self.key_dense = keras.layers.Dense(units, use_bias=True, dtype=dtype, name="key_dense")
        self.score_dense = keras.layers.Dense(1, use_bias=False, dtype=dtype, name="score_dense")

    def build(self, query_shape, values_shape, encoder_padding_mask_shape=None,
              keys_shape=None, values_mask_shape=None):
        self.query_dense.build(query_shape)
        self.key_dense.build(values_shape)
        self.score_dense.build(tuple(values_shape[:-1]) + (self.units,))

    def precompute_keys(self, values):
        """W_2 h_i for every source position: `(batch_size, source_length, units)`."""
        return self.key_dense(values)

    def score(self, query, keys):
        """Unnormalised scores e_{t,i}: `(batch_size, source_length)`."""
        return additive_score(self.query_dense(query), keys, self.score_dense)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
