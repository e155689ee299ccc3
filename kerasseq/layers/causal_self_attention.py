"""Masked (causal) self-attention sublayer of the Transformer decoder."""

import keras
from keras import ops

from kerasseq.layers.base_attention import BaseAttention
from kerasseq.layers.multi_head_attention import merge_masks, padding_to_attention_mask


def causal_attention_mask(query_length, key_length, query_offset=0):
    """Boolean mask letting query position `i` see key positions `j <= i`.

    Query `i` (0-based) sits at absolute position `query_offset + i`, which is
    how a single decoding step at position `t` sees the cached keys `0..t`.

    Args:
        query_length: number of queries (int or scalar tensor).
        key_length: number of keys (int or scalar tensor).
        query_offset: absolute position of the first query (int or scalar
            int tensor).

    Returns:
        Boolean `(1, query_length, key_length)`.

    Example:

    >>> ops.convert_to_numpy(causal_attention_mask(3, 3))[0].astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(query_offset, "int32")
    key_positions = ops.arange(key_length, dtype="int32")
    mask = ops.expand_dims(query_positions, 1) >= ops.expand_dims(key_positions, 0)
    return ops.expand_dims(mask, 0)  # (1, query_length, key_length)


@keras.saving.register_keras_serializable(package="kerasseq")
class CausalSelfAttention(BaseAttention):
    """Masked self-attention: position `t` attends to target positions `<= t` only.

    `y = LayerNorm(x + Dropout(MultiHead(x, x, x; M)))` where
    `M_ij = 0` if `j <= i` and `-inf` otherwise ("Masked Multi-Head Attention",
    Vaswani et al., 2017, section 3.2.3); target padding is masked as keys on
    top of the causal mask. With `norm_first=True` the LayerNorm moves onto
    the attention input. The causal mask is applied on every path (with
    dropout, in training mode, with or without attention scores).

    Args:
        d_model, num_heads, dropout, key_dim, norm_first, layer_norm_epsilon,
            **kwargs: as `BaseAttention` (`key_dim` defaults to
            `d_model // num_heads`).

    Call arguments and returns: as `GlobalSelfAttention`, on the target
    sequence: `x` is `(batch_size, target_length, d_model)`, its padding mask
    `decoder_padding_mask` `(batch_size, target_length)` (default: the Keras
    mask of `x`), and the attention weights
    `(batch_size, num_heads, target_length, target_length)` are zero above
    the diagonal.

    Incremental decoding: `build_cache(batch_size=..., max_length=...)` gives
    a zero cache `(key_cache, value_cache)`, each `(batch_size, max_length,
    num_heads, key_dim)`; `call_step(x_step, step_index, cache)` returns
    `(outputs, cache, attention_scores)`.

    Example:

    >>> layer = CausalSelfAttention(d_model=16, num_heads=4)
    >>> x = keras.random.normal((2, 3, 16))
    >>> outputs, scores = layer(x, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores.shape)
    ((2, 3, 16), (2, 4, 3, 3))
    >>> (ops.convert_to_numpy(scores[0, 0]) > 0).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """

    def call(self, x, decoder_padding_mask=None, return_attention_scores=False,
             training=None, mask=None):
        padding_mask = mask if decoder_padding_mask is None else decoder_padding_mask
        target_length = ops.shape(x)[1]
        attention_mask = merge_masks(causal_attention_mask(target_length, target_length),
                                     padding_to_attention_mask(padding_mask))
        # M: (batch_size or 1, target_length, target_length), key j <= query i and real
        h = self.layer_norm(x) if self.norm_first else x  # pre-norm: LN(x) into the attention
        attention, scores = self.attention(h, h, attention_mask=attention_mask,
                                           return_attention_scores=True, training=training)
        y = x + self.dropout_layer(attention, training=training)  # residual
        y = y if self.norm_first else self.layer_norm(y)  # post-norm: LN(x + Dropout(MHA(x; M)))
        return (y, scores) if return_attention_scores else y

    # ------------------------------------------------------ incremental decoding
    def build_cache(self, batch_size=None, max_length=None, context=None):
        """Zero key/value cache: two `(batch_size, max_length, num_heads, key_dim)`."""
        if context is not None:
            raise ValueError("CausalSelfAttention attends no encoder outputs: its cache is "
                             "build_cache(batch_size=..., max_length=...), without context.")
        return self.attention.build_cache(batch_size=batch_size, max_length=max_length)

    def call_step(self, x_step, step_index, cache, *, encoder_padding_mask=None, training=False):
        """Runs the positions starting at `step_index` against the cached prefix.

        The one `call_step` interface: `TransformerDecoderBlock.call_step`.

        Args:
            x_step: `(batch_size, step_length, d_model)`, usually `step_length=1`.
            step_index: absolute position of `x_step[:, 0]` (int or scalar int
                tensor); its keys/values are written there into the cache.
            cache: `(key_cache, value_cache)`, each `(batch_size, max_length,
                num_heads, key_dim)`.
            encoder_padding_mask: must be `None` (self-attention sees no encoder).
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, cache, attention_scores)`: `(batch_size, step_length,
            d_model)`, equal to the rows of the full causal call at those
            positions, the updated cache, and the weights `(batch_size,
            num_heads, step_length, max_length)`.
        """
        if step_index is None:
            raise ValueError("CausalSelfAttention.call_step needs step_index, the position whose "
                             "keys/values are written into the cache. Received: step_index=None")
        if encoder_padding_mask is not None:
            raise ValueError("CausalSelfAttention attends no encoder outputs: "
                             "encoder_padding_mask must be None.")
        attention_mask = causal_attention_mask(ops.shape(x_step)[1], ops.shape(cache[0])[1],
                                               query_offset=step_index)  # (1, step, max_length)
        h = self.layer_norm(x_step) if self.norm_first else x_step
        attention, cache, scores = self.attention.call_step(
            h, step_index, cache, attention_mask=attention_mask, training=training)
        y = x_step + self.dropout_layer(attention, training=training)
        return (y if self.norm_first else self.layer_norm(y)), cache, scores
