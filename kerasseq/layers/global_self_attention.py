"""Bidirectional self-attention sublayer of the Transformer encoder."""

import keras

from kerasseq.layers._deprecation import renamed_argument
from kerasseq.layers.multi_head_attention import (
    BaseAttention,
    padding_to_attention_mask,
)


@keras.saving.register_keras_serializable(package="kerasseq")
class GlobalSelfAttention(BaseAttention):
    """Self-attention where every position sees every (non-padding) position.

    `y = LayerNorm(x + Dropout(MultiHead(x, x, x)))` (post-norm, Vaswani et
    al., 2017, "Attention Is All You Need", section 3.2.3, encoder
    self-attention); with `norm_first=True`,
    `y = x + Dropout(MultiHead(LN(x), LN(x), LN(x)))`. Padding positions are
    hidden as keys; their own outputs are computed but meaningless (nothing
    downstream reads them).

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        num_heads: number of attention heads.
        dropout: dropout rate (attention weights and attention output).
        key_dim: per-head size; defaults to `d_model // num_heads`.
        norm_first: pre-norm if True, post-norm if False (default).
        layer_norm_epsilon: epsilon of the LayerNormalization.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: `(batch_size, source_length, d_model)`.
        encoder_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real tokens. If omitted, the Keras mask carried by `x` is
            used.
        return_attention_scores: if True, also return the attention weights.
        training: Python bool or `None` (dropout).
        mask: filled by Keras from `x`'s mask; pass `encoder_padding_mask`.
        padding_mask: deprecated name of `encoder_padding_mask`.

    Returns:
        `(batch_size, source_length, d_model)`, and with
        `return_attention_scores=True` also
        `(batch_size, num_heads, source_length, source_length)`.

    Example:

    >>> layer = GlobalSelfAttention(d_model=16, num_heads=4)
    >>> x = keras.random.normal((2, 7, 16))
    >>> tuple(layer(x).shape)
    (2, 7, 16)
    """

    def build(self, x_shape):
        self._build_sublayers(x_shape, x_shape)

    def call(
        self,
        x,
        encoder_padding_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
        padding_mask=None,
    ):
        encoder_padding_mask = renamed_argument(
            "GlobalSelfAttention", "padding_mask", padding_mask,
            "encoder_padding_mask", encoder_padding_mask,
        )
        if encoder_padding_mask is None:
            encoder_padding_mask = mask
        attention_mask = padding_to_attention_mask(encoder_padding_mask)
        # (batch_size, 1, source_length)
        outputs, attention_scores = self._attend_add_and_norm(x, attention_mask, training)
        return (outputs, attention_scores) if return_attention_scores else outputs
