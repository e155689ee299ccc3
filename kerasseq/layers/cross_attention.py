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
        d_model: model width, the last dimension of `x` and of the output.
        num_heads: number of attention heads.
        dropout: dropout rate (attention weights and attention output).
        key_dim: per-head size; defaults to `d_model // num_heads`.
        norm_first: pre-norm if True, post-norm if False (default).
        layer_norm_epsilon: epsilon of the LayerNormalization.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: `(batch_size, target_length, d_model)`.
        context: encoder outputs `(batch_size, source_length, context_dim)`.
        context_mask: optional boolean `(batch_size, source_length)`, True on
            real source tokens. When omitted, Keras fills it from the mask
            carried by `context`.
        return_attention_scores: if True, also return the attention weights.
        training: Python bool or `None` (dropout).
        padding_mask: optional boolean `(batch_size, target_length)`, True on
            real target positions. Unused (queries need no mask); accepted so
            that callers may pass every sublayer the same arguments.

    Returns:
        `(batch_size, target_length, d_model)`, and with
        `return_attention_scores=True` also
        `(batch_size, num_heads, target_length, source_length)`.

    Incremental decoding: `compute_cache(context)` projects the context once
    into `(cross_key, cross_value)`, each `(batch_size, source_length,
    num_heads, key_dim)`; `call_step` reuses them.

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
        self._build_sublayers(x_shape, context_shape)

    def call(
        self,
        x,
        context,
        context_mask=None,
        return_attention_scores=False,
        training=None,
        padding_mask=None,
    ):
        attention_mask = padding_to_attention_mask(context_mask)
        # (batch_size, 1, source_length)
        del padding_mask  # unused, see the docstring
        outputs, attention_scores = self._attend_add_and_norm(
            x, attention_mask, training, context=context
        )
        self._remember(attention_scores)
        return (outputs, attention_scores) if return_attention_scores else outputs

    def compute_cache(self, context):
        """Projects the encoder outputs once: `(cross_key, cross_value)`.

        Args:
            context: `(batch_size, source_length, context_dim)`.

        Returns:
            Tuple of two `(batch_size, source_length, num_heads, key_dim)`.
        """
        return self.attention.compute_key_value(context)

    def call_step(
        self, x_step, cross_key, cross_value, context_mask=None, training=False
    ):
        """Cross-attention for decoding steps, reusing precomputed keys/values.

        Shared source memory. `cross_key` / `cross_value` may have fewer rows
        than `x_step`: `batch_size = source_rows * group` where the `group`
        adjacent rows of `x_step` decode the same source (the hypotheses of a
        beam search, see `kerasseq.decoding.beam_search(shared_state=...)`).
        The queries of a group are then attended together, as one query
        sequence of `group * step_length` positions against their source's
        keys: cross-attention has no causal mask, so every position's result
        is the same as with keys tiled to `batch_size` rows, without reading
        `group` copies of them. With `group = 1` this is the plain step.

        Args:
            x_step: `(batch_size, step_length, d_model)`.
            cross_key: `(source_rows, source_length, num_heads, key_dim)`,
                `source_rows` dividing `batch_size`.
            cross_value: `(source_rows, source_length, num_heads, key_dim)`.
            context_mask: optional boolean `(batch_size, source_length)` or
                `(source_rows, source_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, attention_scores)`: `(batch_size, step_length, d_model)`
            and `(batch_size, num_heads, step_length, source_length)`.
        """
        rows, step_length, d_model = ops.shape(x_step)
        source_rows, source_length = ops.shape(cross_key)[0], ops.shape(cross_key)[1]
        normed = ops.reshape(self._pre_norm(x_step), (source_rows, -1, d_model))
        # (source_rows, group * step_length, d_model)
        if context_mask is not None:
            context_mask = ops.reshape(context_mask, (source_rows, -1, source_length))[:, 0]
            # (source_rows, source_length): the rows of a group share their source
        attention_output, attention_scores, _ = self.attention(
            normed,
            normed,
            attention_mask=padding_to_attention_mask(context_mask),
            cache=(cross_key, cross_value),
            return_attention_scores=True,
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
        return outputs, attention_scores

    def _remember(self, attention_scores):
        if _executing_eagerly():
            self.last_attention_scores = attention_scores
