"""One Transformer decoder block: causal self-attention, cross-attention, feed-forward."""

import keras

from kerasseq.layers.causal_self_attention import CausalSelfAttention
from kerasseq.layers.cross_attention import CrossAttention
from kerasseq.layers.feed_forward import FeedForward
from kerasseq.layers.multi_head_attention import resolve_key_dim


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerDecoderBlock(keras.layers.Layer):
    """Transformer decoder block: masked self-attention, cross-attention, feed-forward.

    Post-norm (Vaswani et al., 2017, "Attention Is All You Need", section 3.1):

        z1 = LayerNorm(x  + MaskedMultiHead(x, x, x))
        z2 = LayerNorm(z1 + MultiHead(z1, c, c))          # c: encoder outputs
        y  = LayerNorm(z2 + FFN(z2))

    with dropout on each sublayer output; `norm_first=True` gives pre-norm.
    Weights map one-to-one onto `keras_hub.layers.TransformerDecoder`
    (`normalize_first=norm_first`).

    Two ways to run it:

    - training / teacher forcing: `block(x, context, ...)` on whole sequences;
    - incremental decoding with a key/value cache: `init_self_cache`, then
      `compute_cross_cache(context)` once, then `call_step` per position. The
      self-attention cache is a tuple `(key_cache, value_cache)`, each
      `(batch_size, max_length, num_heads, key_dim)`; the cross cache is
      `(cross_key, cross_value)`, each `(batch_size, source_length, num_heads,
      key_dim)`, with `key_dim = d_model // num_heads`. `call_step` gives the
      same outputs as the full call at every position.

    Args:
        d_model: model width, the last dimension of `x` and of the output.
        num_heads: number of attention heads (`d_model` must be divisible by it).
        dff: width of the feed-forward hidden layer.
        dropout: dropout rate used throughout the block.
        norm_first: pre-norm if True, post-norm if False (default).
        layer_norm_epsilon: epsilon of the LayerNormalizations.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        x: target embeddings `(batch_size, target_length, d_model)`.
        context: encoder outputs `(batch_size, source_length, d_model)`, or
            `None` for a decoder-only block (a language model): the first call
            decides, and a block built without `context` has no cross-attention
            weights.
        target_padding_mask: optional boolean `(batch_size, target_length)`,
            True on real target tokens; defaults to `x`'s Keras mask.
        source_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real source tokens; defaults to `context`'s Keras mask.
        return_attention_scores: if True, also return the cross-attention
            weights.
        training: Python bool or `None` (dropout).
        x_mask, context_mask: filled by Keras from the masks carried by `x`
            and `context`; prefer the explicit arguments.

    Returns:
        `(batch_size, target_length, d_model)`, and with
        `return_attention_scores=True` also the cross-attention weights
        `(batch_size, num_heads, target_length, source_length)`.

    Example:

    >>> block = TransformerDecoderBlock(d_model=16, num_heads=4, dff=32)
    >>> x, context = keras.random.normal((2, 5, 16)), keras.random.normal((2, 7, 16))
    >>> tuple(block(x, context).shape)
    (2, 5, 16)
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
        super().__init__(**kwargs)
        self.key_dim = resolve_key_dim(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout = dropout
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.supports_masking = True
        common = dict(
            d_model=d_model,
            dropout=dropout,
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
        )
        self.causal_self_attention = CausalSelfAttention(
            num_heads=num_heads, name="causal_self_attention", **common
        )
        self.cross_attention = CrossAttention(
            num_heads=num_heads, name="cross_attention", **common
        )
        self.feed_forward = FeedForward(dff=dff, name="feed_forward", **common)

    def build(self, x_shape, context_shape=None):
        self.causal_self_attention.build(x_shape)
        # Decoder-only (no encoder): the cross-attention sublayer stays unbuilt
        # and has no weights, as in keras_hub.layers.TransformerDecoder.
        self.decoder_only = context_shape is None
        if not self.decoder_only:
            self.cross_attention.build(x_shape, context_shape)
        self.feed_forward.build(x_shape)
        self.built = True

    def _check_context(self, context, where):
        if context is None and not getattr(self, "decoder_only", True):
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' was built with cross-attention "
                f"(an encoder's `context`) but {where} got none. Pass the encoder "
                "outputs, or use a block built without `context` (decoder-only)."
            )
        if context is not None and getattr(self, "decoder_only", False):
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' was built decoder-only (first "
                f"called without `context`), so it has no cross-attention weights, but "
                f"{where} got a `context`. Build a new block for encoder-decoder use."
            )

    def call(
        self,
        x,
        context=None,
        target_padding_mask=None,
        source_padding_mask=None,
        return_attention_scores=False,
        training=None,
        x_mask=None,
        context_mask=None,
    ):
        target_padding_mask = (
            x_mask if target_padding_mask is None else target_padding_mask
        )
        source_padding_mask = (
            context_mask if source_padding_mask is None else source_padding_mask
        )
        self._check_context(context, "call()")
        x = self.causal_self_attention(
            x, padding_mask=target_padding_mask, training=training
        )
        if context is None:
            if return_attention_scores:
                raise ValueError(
                    "return_attention_scores=True returns cross-attention weights; a "
                    "decoder-only block (no `context`) has none."
                )
            scores = None
        else:
            x, scores = self.cross_attention(
                x,
                context,
                context_mask=source_padding_mask,
                return_attention_scores=True,
                training=training,
                padding_mask=target_padding_mask,
            )
        x = self.feed_forward(x, padding_mask=target_padding_mask, training=training)
        return (x, scores) if return_attention_scores else x

    def init_self_cache(self, batch_size, max_length):
        """Zero self-attention cache: `(key_cache, value_cache)`, each
        `(batch_size, max_length, num_heads, key_dim)`."""
        return self.causal_self_attention.init_cache(batch_size, max_length)

    def compute_cross_cache(self, context):
        """Projects the encoder outputs once: `(cross_key, cross_value)`, each
        `(batch_size, source_length, num_heads, key_dim)`. The block must be built."""
        if getattr(self, "decoder_only", False):
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' is decoder-only (built without "
                "`context`): it has no cross-attention to cache."
            )
        return self.cross_attention.compute_cache(context)

    def call_step(
        self,
        x_step,
        step_index,
        self_cache,
        cross_key=None,
        cross_value=None,
        source_padding_mask=None,
        training=False,
    ):
        """Decodes the position(s) starting at `step_index` with the key/value caches.

        Args:
            x_step: `(batch_size, 1, d_model)` (any `step_length` works).
            step_index: absolute position of `x_step[:, 0]`, int or scalar int
                tensor (works inside `tf.function` / XLA).
            self_cache: `(key_cache, value_cache)`, each
                `(batch_size, max_length, num_heads, key_dim)`; positions
                `< step_index` must already be filled.
            cross_key: `(batch_size, source_length, num_heads, key_dim)`
                (`None` for a decoder-only block).
            cross_value: `(batch_size, source_length, num_heads, key_dim)`.
            source_padding_mask: optional boolean `(batch_size, source_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, new_self_cache, cross_attention_scores)`:
            `(batch_size, 1, d_model)`, the updated cache, and
            `(batch_size, num_heads, 1, source_length)` (`None` decoder-only).
        """
        self._check_context(cross_key, "call_step()")
        x, self_cache = self.causal_self_attention.call_step(
            x_step, step_index, self_cache, training=training
        )
        if cross_key is None:  # decoder-only
            return self.feed_forward(x, training=training), self_cache, None
        x, scores = self.cross_attention.call_step(
            x,
            cross_key,
            cross_value,
            context_mask=source_padding_mask,
            training=training,
        )
        return self.feed_forward(x, training=training), self_cache, scores

    def compute_output_shape(self, x_shape, context_shape=None):
        return tuple(x_shape)

    def compute_output_spec(self, *args, **kwargs):
        # The number of outputs depends on call arguments: trace call().
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dff": self.dff,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
