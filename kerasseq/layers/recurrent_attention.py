"""The shared base of the recurrent decoder's attentions (Bahdanau, Luong)."""

import keras
from keras import ops

# Masked scores are filled with this value *after* the scores are cast to
# float32, so it is finite whatever the compute dtype (float16 included).
MASK_VALUE = -1e9


@keras.saving.register_keras_serializable(package="kerasseq")
class RecurrentAttention(keras.layers.Layer):
    """Attention of one decoder state over the encoder outputs: the shared `call`.

    For a query q (a decoder state) and encoder outputs h_i:

        e_i   = score(q, keys_i)            keys = precompute_keys(h), once per sentence
        α_i   = exp(e_i) / Σ_j exp(e_j)     (over real positions)
        ctx   = Σ_i α_i h_i

    Subclasses choose the score and what part of it depends only on the
    source (as `keras.layers.AdditiveAttention` extends
    `keras.layers.Attention` by its score): `BahdanauAttention` (additive,
    queried with s_{t-1}) and `LuongAttention` (dot, general, concat,
    queried with s_t). A subclass implements `build`, `score(query, keys)`
    and, if it transforms the encoder outputs, `precompute_keys(values)`, and
    sets `query_uses_previous_state` (read by `GRUDecoder`).

    The softmax is computed in float32 whatever the compute dtype. Padded
    source positions get weight 0; a source with no real position gives zero
    weights and a zero context (never NaN, never uniform).

    Call arguments:
        query: `(batch_size, query_dim)`: a decoder state.
        values: `(batch_size, source_length, value_dim)`: encoder outputs h_i.
        encoder_padding_mask: optional bool `(batch_size, source_length)`,
            True = real token. Without it, the Keras mask carried by `values`
            is used.
        keys: optional `precompute_keys(values)`, to skip recomputing it.
        values_mask: the slot Keras fills with the mask carried by `values`.

    Returns:
        `(context, attention_weights)`: `(batch_size, value_dim)` and
        `(batch_size, source_length)`.
    """

    query_uses_previous_state = False

    def precompute_keys(self, values):
        """The part of the score that depends only on the source; `values` itself here."""
        return values

    def score(self, query, keys):
        """Unnormalised scores e_i: `(batch_size, source_length)`."""
        raise NotImplementedError(f"{type(self).__name__} must implement score(query, keys).")

    def call(self, query, values, encoder_padding_mask=None, keys=None, values_mask=None):
        # Keras fills `values_mask` with the mask that travels on `values`
        # (e.g. from `Embedding(mask_zero=True)`), as AdditiveAttention does.
        mask = values_mask if encoder_padding_mask is None else encoder_padding_mask
        mask = ops.ones(ops.shape(values)[:2], "bool") if mask is None else ops.cast(mask, "bool")
        e = ops.cast(self.score(query, self.precompute_keys(values) if keys is None else keys),
                     "float32")  # (batch_size, source_length)
        e = ops.where(mask, e, MASK_VALUE)
        exp_e = ops.exp(e - ops.max(e, axis=-1, keepdims=True))  # max-shifted: same α, no overflow
        alpha = ops.where(mask, exp_e / ops.sum(exp_e, axis=-1, keepdims=True), 0.0)
        alpha = ops.cast(alpha, values.dtype)  # α_i, 0 at padding (and for an empty source)
        context = ops.einsum("bs,bsd->bd", alpha, values)  # ctx = Σ_i α_i h_i
        return context, alpha

    def compute_mask(self, *args, **kwargs):
        # The source mask is consumed here (context and weights are per
        # query, not per source position): nothing to pass on, no warning.
        return None

    def compute_output_shape(self, query_shape, values_shape, encoder_padding_mask_shape=None,
                             keys_shape=None, values_mask_shape=None):
        return (values_shape[0], values_shape[-1]), tuple(values_shape[:2])
