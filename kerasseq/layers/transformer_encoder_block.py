"""One Transformer encoder block: self-attention then feed-forward."""

import keras

from kerasseq.layers.base_attention import resolve_key_dim
from kerasseq.layers.feed_forward import FeedForward
from kerasseq.layers.global_self_attention import GlobalSelfAttention


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerEncoderBlock(keras.layers.Layer):
    """Transformer encoder block: global self-attention, then a feed-forward network.

    Post-norm (Vaswani et al., 2017, "Attention Is All You Need", section 3.1):
    `z = LayerNorm(x + MultiHead(x, x, x))`, `y = LayerNorm(z + FFN(z))`, with
    dropout on each sublayer output. `norm_first=True` gives the pre-norm
    variant (then the stack needs a final LayerNorm, which the model adds).
    Weights map one-to-one onto `keras_hub.layers.TransformerEncoder`.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        num_heads: number of attention heads (`d_model` must be divisible by it).
        dff: width of the feed-forward hidden layer.
        dropout: dropout rate used throughout the block.
        norm_first: pre-norm if True, post-norm (the paper) if False.
        layer_norm_epsilon: epsilon of the LayerNormalizations.
        **kwargs: standard `keras.layers.Layer` arguments.

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

    def __init__(self, d_model, num_heads, dff, dropout=0.0, norm_first=False,
                 layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dff, self.dropout = d_model, num_heads, dff, dropout
        self.key_dim = resolve_key_dim(d_model, num_heads)
        self.norm_first, self.layer_norm_epsilon = norm_first, layer_norm_epsilon
        self.supports_masking = True
        sublayer_args = dict(d_model=d_model, dropout=dropout, norm_first=norm_first,
                             layer_norm_epsilon=layer_norm_epsilon, dtype=self.dtype_policy)
        self.self_attention = GlobalSelfAttention(num_heads=num_heads, name="self_attention",
                                                  **sublayer_args)
        self.feed_forward = FeedForward(dff=dff, name="feed_forward", **sublayer_args)

    def build(self, x_shape):
        self.self_attention.build(x_shape)
        self.feed_forward.build(x_shape)

    def call(self, x, encoder_padding_mask=None, training=None, mask=None):
        padding_mask = mask if encoder_padding_mask is None else encoder_padding_mask
        # post-norm z = LN(x + Dropout(MHA(x))); pre-norm z = x + Dropout(MHA(LN(x)))
        z = self.self_attention(x, encoder_padding_mask=padding_mask, training=training)
        # post-norm y = LN(z + Dropout(FFN(z))); pre-norm y = z + Dropout(FFN(LN(z)))
        return self.feed_forward(z, training=training)

    def compute_output_shape(self, x_shape):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout=self.dropout, norm_first=self.norm_first,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config
