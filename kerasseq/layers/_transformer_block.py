"""What the Transformer encoder and decoder blocks share: arguments, sublayers, config."""

from kerasseq.layers._transformer_layer import TransformerLayer
from kerasseq.layers.feed_forward import FeedForward
from kerasseq.layers.multi_head_attention import resolve_key_dim


class TransformerBlock(TransformerLayer):
    """Attention sublayer(s) then a `FeedForward`, each with dropout, residual and LayerNorm.

    The base of `TransformerEncoderBlock` and `TransformerDecoderBlock`: it
    creates the subclass's attention sublayers (`_create_attention_sublayers`)
    and then the `feed_forward` sublayer, all with the block's width, dropout
    and norm placement. `key_dim = d_model // num_heads`.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        num_heads: number of attention heads (`d_model` must be divisible by it).
        dff: width of the feed-forward hidden layer.
        dropout: dropout rate used throughout the block.
        norm_first, layer_norm_epsilon, **kwargs: as `TransformerLayer`.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dff,
        dropout=0.0,
        norm_first=False,
        layer_norm_epsilon=1e-5,
        **kwargs,
    ):
        super().__init__(d_model, dropout, norm_first, layer_norm_epsilon, **kwargs)
        self.key_dim = resolve_key_dim(d_model, num_heads)
        self.num_heads = num_heads
        self.dff = dff
        sublayer_args = dict(
            d_model=d_model,
            dropout=dropout,
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
        )
        # Attention first, then the feed-forward network: the order of the
        # weights and of the random seeds drawn at construction.
        self._create_attention_sublayers(num_heads=num_heads, **sublayer_args)
        self.feed_forward = FeedForward(dff=dff, name="feed_forward", **sublayer_args)

    def _create_attention_sublayers(self, **sublayer_args):
        """Creates the block's attention sublayers from `num_heads` and the
        arguments every sublayer takes (`d_model`, `dropout`, `norm_first`,
        `layer_norm_epsilon`, `dtype`)."""
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "dff": self.dff})
        return config
