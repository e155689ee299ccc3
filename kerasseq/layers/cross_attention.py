"""Encoder-decoder (cross) attention sublayer of the Transformer decoder."""

import keras
from keras import ops

from kerasseq.layers.multi_head_attention import (
    BaseAttention,
    _executing_eagerly,
    padding_to_attention_mask,
)


@keras.saving.register_keras_serializable(package="kerasseq")
class CrossAttention(BaseAttention):
    """Target positions attend over the encoder outputs (the "context").

    `y = LayerNorm(x + Dropout(MultiHead(Q=x, K=h, V=h)))`: queries come from
    the decoder, keys and values from the encoder outputs h (Vaswani et al.,
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

    Incremental decoding: `build_cache(context)` projects the context once
    into `(key_cache, value_cache)`, each `(batch_size, source_length,
    num_heads, key_dim)`; `call_step(x_step, None, cache,
    encoder_padding_mask=...)` reuses it and returns `(outputs, cache,
    attention_scores)`.

    Example:

    >>> layer = CrossAttention(d_model=16, num_heads=4)
    >>> x, context = keras.random.normal((2, 5, 16)), keras.random.normal((2, 9, 16))
    >>> outputs, scores = layer(x, context, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores.shape)
    ((2, 5, 16), (2, 4, 5, 9))
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_attention_scores = None

    def build(self, x_shape, context_shape):
        self._build_attention(x_shape, context_shape)

    def call(
        self,
        x,
        context,
        encoder_padding_mask=None,
        return_attention_scores=False,
        training=None,
        context_mask=None,
    ):
        encoder_padding_mask = (
            context_mask if encoder_padding_mask is None else encoder_padding_mask
        )
        attention_mask = padding_to_attention_mask(encoder_padding_mask)
        # (batch_size, 1, source_length)
        outputs, attention_scores = self._attend_add_and_norm(
            x, attention_mask, training, context=context
        )
        self._remember(attention_scores)
        return (outputs, attention_scores) if return_attention_scores else outputs

    def build_cache(self, context):
        """Projects the encoder outputs once: `(key_cache, value_cache)`.

        Args:
            context: `(batch_size, source_length, context_dim)`.

        Returns:
            Tuple of two `(batch_size, source_length, num_heads, key_dim)`.
        """
        return self.attention.build_cache(context)

    def call_step(
        self, x_step, step_index, cache, *, encoder_padding_mask=None, training=False
    ):
        """Cross-attention for decoding steps, reusing the projected encoder outputs.

        The one `call_step` interface: `TransformerDecoderBlock.call_step`.
        Cross-attention has no position: its cache is static, so
        `step_index` must be `None`.

        Shared source memory. The cache may have fewer rows than `x_step`:
        `batch_size = source_rows * group` where the `group` adjacent rows of
        `x_step` decode the same source (the hypotheses of a beam search, see
        `kerasseq.decoding.beam_search(shared_state=...)`). The queries of a
        group are then attended together, as one query sequence of
        `group * step_length` positions against their source's keys:
        cross-attention has no causal mask, so every position's result is the
        same as with keys tiled to `batch_size` rows, without reading `group`
        copies of them. With `group = 1` this is the plain step.

        Args:
            x_step: `(batch_size, step_length, d_model)`.
            step_index: `None`.
            cache: `(key_cache, value_cache)` from `build_cache`, each
                `(source_rows, source_length, num_heads, key_dim)`,
                `source_rows` dividing `batch_size`.
            encoder_padding_mask: optional boolean `(batch_size,
                source_length)` or `(source_rows, source_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, cache, attention_scores)`: `(batch_size, step_length,
            d_model)`, the cache unchanged, and `(batch_size, num_heads,
            step_length, source_length)`.
        """
        if step_index is not None:
            raise ValueError(
                "CrossAttention attends a static cache (the projected encoder outputs): "
                f"step_index must be None. Received: step_index={step_index!r}"
            )
        key_cache, value_cache = cache
        rows, step_length, d_model = ops.shape(x_step)
        source_rows, source_length = ops.shape(key_cache)[0], ops.shape(key_cache)[1]
        normed = ops.reshape(self._pre_norm(x_step), (source_rows, -1, d_model))
        # (source_rows, group * step_length, d_model)
        if encoder_padding_mask is not None:
            encoder_padding_mask = ops.reshape(
                encoder_padding_mask, (source_rows, -1, source_length)
            )[:, 0]
            # (source_rows, source_length): the rows of a group share their source
        attention_output, _, attention_scores = self.attention.call_step(
            normed,
            None,
            (key_cache, value_cache),
            attention_mask=padding_to_attention_mask(encoder_padding_mask),
            training=training,
        )
        # (source_rows, group * step_length, d_model),
        # (source_rows, num_heads, group * step_length, source_length)
        attention_output = ops.reshape(attention_output, (rows, step_length, d_model))
        num_heads = ops.shape(attention_scores)[1]
        attention_scores = ops.reshape(
            attention_scores, (source_rows, num_heads, -1, step_length, source_length)
        )  # (source_rows, num_heads, group, step_length, source_length)
        attention_scores = ops.reshape(
            ops.transpose(attention_scores, (0, 2, 1, 3, 4)),
            (rows, num_heads, step_length, source_length),
        )  # (batch_size, num_heads, step_length, source_length)
        outputs = self._add_and_norm(x_step, attention_output, training)
        return outputs, (key_cache, value_cache), attention_scores

    def _remember(self, attention_scores):
        if _executing_eagerly():
            self.last_attention_scores = attention_scores
