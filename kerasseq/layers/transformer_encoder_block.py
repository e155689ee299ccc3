"""One Transformer encoder block: self-attention then feed-forward."""

import keras

from kerasseq.layers._transformer_block import TransformerBlock
from kerasseq.layers.global_self_attention import GlobalSelfAttention


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerEncoderBlock(TransformerBlock):
    """Transformer encoder block: global self-attention, then a feed-forward network.

    Post-norm (Vaswani et al., 2017, "Attention Is All You Need", section 3.1):
    `z = LayerNorm(x + MultiHead(x, x, x))`, `y = LayerNorm(z + FFN(z))`, with
    dropout on each sublayer output. `norm_first=True` gives the pre-norm
    variant (then the stack needs a final LayerNorm, which the model adds).
    Weights map one-to-one onto `keras_hub.layers.TransformerEncoder`.

    Args:
        d_model, num_heads, dff, dropout, norm_first, layer_norm_epsilon,
            **kwargs: as `TransformerBlock` (`dff`: the feed-forward width).

    Call arguments:
        x: `(batch_size, source_length, d_model)`.
        encoder_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real tokens; defaults to the Keras mask carried by `x`.
            (keras-hub's `TransformerEncoder` calls it `padding_mask`; kerasseq
            names a mask by the sequence it covers, the same in every layer.)
        training: Python bool or `None` (dropout).
        mask: filled by Keras from `x`'s mask; pass `encoder_padding_mask`.

    Returns:
        `(batch_size, source_length, d_model)`; the input's Keras mask is
        propagated.

    Example:

    >>> block = TransformerEncoderBlock(d_model=16, num_heads=4, dff=32)
    >>> tuple(block(keras.random.normal((2, 6, 16))).shape)
    (2, 6, 16)
    """

    def _create_attention_sublayers(self, **sublayer_args):
        self.self_attention = GlobalSelfAttention(name="self_attention", **sublayer_args)

    def build(self, x_shape):
        self.self_attention.build(x_shape)
        self.feed_forward.build(x_shape)
        self.built = True

    def call(self, x, encoder_padding_mask=None, training=None, mask=None):
        encoder_padding_mask = mask if encoder_padding_mask is None else encoder_padding_mask
        x = self.self_attention(
            x, encoder_padding_mask=encoder_padding_mask, training=training
        )
        return self.feed_forward(x, training=training)
