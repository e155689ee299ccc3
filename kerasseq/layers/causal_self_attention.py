"""Masked (causal) self-attention sublayer of the Transformer decoder."""

import keras
from keras import ops

from kerasseq.layers.multi_head_attention import (
    BaseAttention,
    merge_masks,
    padding_to_attention_mask,
)


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
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(
        query_offset, "int32"
    )
    key_positions = ops.arange(key_length, dtype="int32")
    mask = ops.expand_dims(query_positions, 1) >= ops.expand_dims(key_positions, 0)
    # (query_length, key_length)
    return ops.expand_dims(mask, 0)


@keras.saving.register_keras_serializable(package="kerasseq")
class CausalSelfAttention(BaseAttention):
    """Masked self-attention: position `t` attends to target positions `<= t` only.

    `y = LayerNorm(x + Dropout(MultiHead(x, x, x; M)))` where
    `M_ij = 0` if `j <= i` and `-inf` otherwise ("Masked Multi-Head Attention",
    Vaswani et al., 2017, section 3.2.3); target padding is masked as keys on
    top of the causal mask. With `norm_first=True` the LayerNorm moves onto
    the attention input. The causal mask is applied on every path: with
    dropout, in training mode and when attention scores are returned (a Keras
    regression, keras-team/keras#23038, once dropped it in those cases; the
    tests check it).

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

    Incremental decoding: `build_cache(batch_size, max_length)` gives a zero
    cache `(key_cache, value_cache)`, each `(batch_size, max_length,
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
        decoder_padding_mask = mask if decoder_padding_mask is None else decoder_padding_mask
        target_length = ops.shape(x)[1]
        attention_mask = merge_masks(
            causal_attention_mask(target_length, target_length),
            padding_to_attention_mask(decoder_padding_mask),
        )
        # (batch_size or 1, target_length, target_length)
        outputs, attention_scores = self._attend_add_and_norm(x, attention_mask, training)
        return (outputs, attention_scores) if return_attention_scores else outputs

    def build_cache(self, batch_size, max_length):
        """Zero key/value cache: tuple of two `(batch_size, max_length, num_heads, key_dim)`."""
        shape = (batch_size, max_length, self.num_heads, self.key_dim)
        zeros = ops.zeros(shape, dtype=self.compute_dtype)
        return zeros, zeros

    def call_step(
        self, x_step, step_index, cache, *, encoder_padding_mask=None, training=False
    ):
        """Runs the positions starting at `step_index` against the cached prefix.

        The one `call_step` interface: `TransformerDecoderBlock.call_step`.

        Args:
            x_step: `(batch_size, step_length, d_model)`, usually `step_length=1`.
            step_index: absolute position of `x_step[:, 0]` (int or scalar int
                tensor); its keys/values are written there into the cache.
            cache: tuple `(key_cache, value_cache)`, each
                `(batch_size, max_length, num_heads, key_dim)`.
            encoder_padding_mask: must be `None` (self-attention sees no
                encoder); an error otherwise.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, cache, attention_scores)`: outputs `(batch_size,
            step_length, d_model)` equal to the rows of the full causal call at
            those positions, the updated cache, and the self-attention weights
            `(batch_size, num_heads, step_length, max_length)`.
        """
        if step_index is None:
            raise ValueError(
                "CausalSelfAttention.call_step needs step_index, the position whose "
                "keys/values are written into the cache. Received: step_index=None"
            )
        if encoder_padding_mask is not None:
            raise ValueError(
                "CausalSelfAttention attends no encoder outputs: encoder_padding_mask "
                "must be None."
            )
        max_length = ops.shape(cache[0])[1]
        attention_mask = causal_attention_mask(
            ops.shape(x_step)[1], max_length, query_offset=step_index
        )
        # (1, step_length, max_length)
        attention_output, cache, attention_scores = self.attention.call_step(
            self._pre_norm(x_step),
            step_index,
            cache,
            attention_mask=attention_mask,
            training=training,
        )
        outputs = self._add_and_norm(x_step, attention_output, training)
        return outputs, cache, attention_scores
