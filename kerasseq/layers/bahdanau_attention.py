"""Additive attention (Bahdanau, Cho & Bengio 2014)."""

import keras
from keras import ops

from kerasseq._validation import check_positive_int
from kerasseq.layers.recurrent_attention import RecurrentAttention


@keras.saving.register_keras_serializable(package="kerasseq")
class BahdanauAttention(RecurrentAttention):
    """Additive attention with the previous decoder state as the query.

    For decoder step t, with previous state s_{t-1} and encoder outputs h_i:

        e_{t,i} = v^T tanh(W_1 s_{t-1} + W_2 h_i + b)
        α_{t,i} = exp(e_{t,i}) / Σ_j exp(e_{t,j})         (over real positions)
        ctx_t   = Σ_i α_{t,i} h_i

    (Bahdanau, Cho & Bengio 2014, "Neural Machine Translation by Jointly
    Learning to Align and Translate".) W_1, W_2 `(…, units)`, the bias b
    `(units,)` and v `(units,)` are learned: W_1 is `query_dense`'s kernel,
    W_2 and b are `key_dense`'s kernel and bias, v is `score_dense`'s kernel.
    `W_2 h_i + b` does not depend on t, so it is computed once per source
    sentence (`precompute_keys`) and reused at every decoder step.

    Args:
        units: int, size of the hidden layer of the scoring MLP.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    The call (its arguments and returns), the softmax, the context and the
    masks are `RecurrentAttention`'s, the base it shares with
    `LuongAttention`; this class adds the score. Its `query` is the previous
    decoder state s_{t-1}, and its `keys` are W_2 h_i + b `(batch_size,
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
        """W_2 h_i + b for every source position: `(batch_size, source_length, units)`."""
        return self.key_dense(values)

    def score(self, query, keys):
        """e_{t,i} = v^T tanh(W_1 s_{t-1} + W_2 h_i + b): `(batch_size, source_length)`.

        `query` is s_{t-1}, `keys` is `precompute_keys(h)` = W_2 h_i + b.
        """
        W1_s = ops.expand_dims(self.query_dense(query), 1)  # (batch_size, 1, units)
        v = ops.cast(self.score_dense.kernel[:, 0], keys.dtype)  # (units,)
        # v^T x written as Σ_u v_u x_u: calling the Dense on the rank-3 tanh runs
        # `tf.tensordot`, whose gradient inside the decoder's `tf.scan` XLA cannot
        # compile (`jit_compile=True` training); the numbers are the same.
        return ops.sum(v * ops.tanh(W1_s + keys), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
