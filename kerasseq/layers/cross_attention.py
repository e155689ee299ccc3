"""Encoder-decoder (cross) attention sublayer of the Transformer decoder."""

import keras
import tensorflow as tf

from kerasseq.layers.base_attention import BaseAttention
from kerasseq.layers.multi_head_attention import padding_to_attention_mask


@keras.saving.register_keras_serializable(package="kerasseq")
class CrossAttention(BaseAttention):
    """Target positions attend over the encoder outputs (the "context").

    `y = LayerNorm(x + Dropout(MultiHead(Q=x, K=c, V=c)))`: queries come from
    the decoder, keys and values from the encoder outputs c (Vaswani et al.,
    2017, "Attention Is All You Need", section 3.2.3, encoder-decoder
    attention). Source padding is masked as keys. With `norm_first=True` the
    LayerNorm is applied to `x` only (the context is already normalised by
    the encoder).

    The attention weights of the last eager call are kept in
    `last_attention_scores` `(batch_size, num_heads, target_length,
    source_length)` for plotting (they are not kept inside `tf.function`).

    Args:
        d_model, num_heads, dropout, key_dim, norm_first, layer_norm_epsilon,
            **kwargs: as `BaseAttention` (`key_dim` defaults to
            `d_model // num_heads`).

    Call arguments:
        x: `(batch_size, target_length, d_model)`.
        context: encoder outputs `(batch_size, source_length, context_dim)`.
        encoder_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real source tokens. When omitted, the Keras mask carried
            by `context` is used.
        return_attention_scores, training: as `BaseAttention`.
        context_mask: the slot Keras fills with the mask carried by `context`
            (Keras' `<argument>_mask` convention); pass `encoder_padding_mask`.

    Returns:
        `(batch_size, target_length, d_model)`, and with
        `return_attention_scores=True` also
        `(batch_size, num_heads, target_length, source_length)`.

    Incremental decoding: `build_cache(context=context)` projects the
    context once into `(key_cache, value_cache)`, each `(batch_size,
    source_length, num_heads, key_dim)`; `call_step(x_step, None, cache,
    encoder_padding_mask=...)` reuses it and returns `(outputs, cache,
    attention_scores)`.

    Example:

    >>> layer = CrossAttention(d_model=16, num_heads=4)
    >>> x, context = keras.random.normal((2, 5, 16)), keras.random.normal((2, 9, 16))
    >>> outputs, scores = layer(x, context, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores.shape)
    ((2, 5, 16), (2, 4, 5, 9))
    """

    attends_context = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_attention_scores = None

    def build(self, x_shape, context_shape):
        self.build_sublayers(x_shape, context_shape)

    def call(self, x, context, encoder_padding_mask=None, return_attention_scores=False,
             training=None, context_mask=None):
        padding_mask = context_mask if encoder_padding_mask is None else encoder_padding_mask
        attention_mask = padding_to_attention_mask(padding_mask)  # (batch_size, 1, source_length)
        h = self.layer_norm(x) if self.norm_first else x  # pre-norm: LN(x) into the attention
        attention, scores = self.attention(h, context, attention_mask=attention_mask,
                                           return_attention_scores=True, training=training)
        y = x + self.dropout_layer(attention, training=training)  # residual
        y = y if self.norm_first else self.layer_norm(y)  # post-norm: LN(x + Dropout(MHA(x, c, c)))
        if tf.executing_eagerly():
            self.last_attention_scores = scores  # for plotting
        return (y, scores) if return_attention_scores else y

    # ------------------------------------------------------ incremental decoding
    def build_cache(self, batch_size=None, max_length=None, context=None):
        """The encoder outputs `context` projected once: two `(batch_size,
        source_length, num_heads, key_dim)`."""
        if context is None or batch_size is not None or max_length is not None:
            raise ValueError("CrossAttention's cache is the projected encoder outputs: "
                             "build_cache(context=encoder_outputs), without batch_size "
                             "or max_length.")
        return self.attention.build_cache(context=context)

    def call_step(self, x_step, step_index, cache, *, encoder_padding_mask=None, training=False):
        """Cross-attention for decoding steps over the cache of `build_cache`.

        The one `call_step` interface: `TransformerDecoderBlock.call_step`.
        The cache is static (cross-attention has no position), so
        `step_index` must be `None`. A beam search whose hypotheses share
        their source's cache reshapes the queries itself
        (`TransformerSeq2Seq.decode_step`).

        Args:
            x_step: `(batch_size, step_length, d_model)`.
            step_index: `None`.
            cache: `(key_cache, value_cache)`, each `(batch_size,
                source_length, num_heads, key_dim)`.
            encoder_padding_mask: optional boolean `(batch_size, source_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, cache, attention_scores)`: `(batch_size, step_length,
            d_model)`, the cache unchanged, and `(batch_size, num_heads,
            step_length, source_length)`.
        """
        if step_index is not None:
            raise ValueError("CrossAttention attends a static cache (the projected encoder "
                             f"outputs): step_index must be None. Received: {step_index!r}")
        h = self.layer_norm(x_step) if self.norm_first else x_step
        attention, cache, scores = self.attention.call_step(
            h, None, cache, attention_mask=padding_to_attention_mask(encoder_padding_mask),
            training=training)
        y = x_step + self.dropout_layer(attention, training=training)
        return (y if self.norm_first else self.layer_norm(y)), cache, scores
