"""Multiplicative and concat attention scores (Luong, Pham & Manning 2015)."""

import keras
from keras import ops

from kerasseq._validation import check_choice, check_positive_int
from kerasseq.layers.recurrent_attention import RecurrentAttention

SCORES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="kerasseq")
class LuongAttention(RecurrentAttention):
    """Global attention with the *current* decoder state as the query.

    Luong et al. (2015) compare three score functions between the decoder
    state s_t and each encoder output h_i:

        dot:     e_{t,i} = s_t^T h_i
        general: e_{t,i} = s_t^T W h_i
        concat:  e_{t,i} = v^T tanh(W [s_t; h_i] + b) = v^T tanh(W_q s_t + W_k h_i + b)

    followed, as in `BahdanauAttention` (both extend `RecurrentAttention`,
    which owns `call`), by a softmax over the real source positions and the
    context ctx_t = Σ_i α_{t,i} h_i. In `GRUDecoder` a Luong
    attention is queried with the state *after* the GRU update (s_t), while a
    Bahdanau attention is queried with s_{t-1} before it.

    Args:
        score: "dot", "general" or "concat".
        units: int, hidden size of the "concat" scoring MLP (ignored otherwise).
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments and returns: as `RecurrentAttention`; for "dot" the
    value_dim of `values` must equal the query_dim of `query`.

    Example:

    >>> attention = LuongAttention(score="dot")
    >>> s = np.array([[0.7, 0.8]])
    >>> h = np.array([[[0.1, 0.2], [0.8, 0.9], [0.5, 0.4], [0.3, 0.1]]])
    >>> scores = attention.score(s, attention.precompute_keys(h))
    >>> np.round(ops.convert_to_numpy(scores), 2)
    array([[0.23, 1.28, 0.67, 0.29]])
    """

    query_uses_previous_state = False

    def __init__(self, score="dot", units=None, **kwargs):
        super().__init__(**kwargs)
        self.score_name = check_choice("score", score, SCORES)
        # "concat" needs units; the other scores accept (and ignore) them.
        self.units = (None if units is None and score != "concat"
                      else check_positive_int("units", units))
        self.key_dense = None
        self.query_dense = None
        self.score_dense = None

    def build(self, query_shape, values_shape, encoder_padding_mask_shape=None,
              keys_shape=None, values_mask_shape=None):
        query_dim, value_dim = query_shape[-1], values_shape[-1]
        if self.score_name == "dot" and query_dim != value_dim:
            raise ValueError(
                "LuongAttention(score='dot') needs query and values of the same "
                f"size. Received: query_dim={query_dim}, value_dim={value_dim}; use "
                "score='general' to learn a map between different sizes."
            )
        dtype = self.dtype_policy
        if self.score_name == "general":
            self.key_dense = keras.layers.Dense(query_dim, use_bias=False, dtype=dtype,
                                                name="key_dense")
            self.key_dense.build(values_shape)
        if self.score_name == "concat":
            self.query_dense = keras.layers.Dense(self.units, use_bias=False, dtype=dtype,
                                                  name="query_dense")
            self.key_dense = keras.layers.Dense(self.units, use_bias=True, dtype=dtype,
                                                name="key_dense")
            self.score_dense = keras.layers.Dense(1, use_bias=False, dtype=dtype, name="score_dense")
            self.query_dense.build(query_shape)
            self.key_dense.build(values_shape)
            self.score_dense.build(tuple(values_shape[:-1]) + (self.units,))

    def precompute_keys(self, values):
        """The part of the score that depends only on the source: h_i (dot),
        W h_i (general), W_k h_i + b (concat)."""
        return values if self.key_dense is None else self.key_dense(values)

    def score(self, query, keys):
        """e_{t,i} for the chosen score: `(batch_size, source_length)`.

        `query` is s_t, `keys` is `precompute_keys(h)`.
        """
        if self.score_name == "concat":  # v^T tanh(W_q s_t + W_k h_i + b), as Bahdanau's
            Wq_s = ops.expand_dims(self.query_dense(query), 1)  # (batch_size, 1, units)
            v = ops.cast(self.score_dense.kernel[:, 0], keys.dtype)  # (units,)
            return ops.sum(v * ops.tanh(Wq_s + keys), axis=-1)
        return ops.einsum("bd,bsd->bs", query, keys)  # dot: s_t^T h_i; general: s_t^T (W h_i)

    def get_config(self):
        config = super().get_config()
        config.update(score=self.score_name, units=self.units)
        return config
