"""Bidirectional self-attention sublayer of the Transformer encoder."""

import keras

from kerasseq.layers.base_attention import BaseAttention
from kerasseq.layers.multi_head_attention import padding_to_attention_mask


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
        d_model, num_heads, dropout, key_dim, norm_first, layer_norm_epsilon,
            **kwargs: as `BaseAttention` (`key_dim` defaults to
            `d_model // num_heads`).

    Call arguments:
        x: `(batch_size, source_length, d_model)`.
        encoder_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real tokens. If omitted, the Keras mask carried by `x` is
            used.
        return_attention_scores, training: as `BaseAttention`.
        mask: filled by Keras from `x`'s mask; pass `encoder_padding_mask`.

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

    def call(self, x, encoder_padding_mask=None, return_attention_scores=False,
             training=None, mask=None):
        padding_mask = mask if encoder_padding_mask is None else encoder_padding_mask
        attention_mask = padding_to_attention_mask(padding_mask)  # (batch_size, 1, source_length)
        h = self.layer_norm(x) if self.norm_first else x  # pre-norm: LN(x) into the attention
        attention, scores = self.attention(h, h, attention_mask=attention_mask,
                                           return_attention_scores=True, training=training)
        y = x + self.dropout_layer(attention, training=training)  # residual
        y = y if self.norm_first else self.layer_norm(y)  # post-norm: LN(x + Dropout(MHA(x)))
        return (y, scores) if return_attention_scores else y
