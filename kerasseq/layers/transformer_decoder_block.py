"""One Transformer decoder block: causal self-attention, cross-attention, feed-forward."""

import keras

from kerasseq.layers.base_attention import resolve_key_dim
from kerasseq.layers.causal_self_attention import CausalSelfAttention
from kerasseq.layers.cross_attention import CrossAttention
from kerasseq.layers.feed_forward import FeedForward


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerDecoderBlock(keras.layers.Layer):
    """Transformer decoder block: masked self-attention, cross-attention, feed-forward.

    Post-norm (Vaswani et al., 2017, "Attention Is All You Need", section 3.1):

        z1 = LayerNorm(x  + Dropout(MaskedMultiHead(x, x, x)))
        z2 = LayerNorm(z1 + Dropout(MultiHead(z1, c, c)))          # c: encoder outputs
        y  = LayerNorm(z2 + Dropout(FFN(z2)))

    `norm_first=True` gives pre-norm, `z1 = x + Dropout(MaskedMultiHead(LN(x)))`
    and so on. Weights map one-to-one onto `keras_hub.layers.TransformerDecoder`
    (`normalize_first=norm_first`).

    Two ways to run it:

    - training / teacher forcing: `block(x, context, ...)` on whole sequences;
    - incremental decoding with key/value caches: `build_cache(batch_size=...,
      max_length=..., context=...)` once per sentence, then `call_step` per
      position. The cache is `(self_cache, cross_cache)`: `self_cache =
      (key_cache, value_cache)`, each `(batch_size, max_length, num_heads,
      key_dim)`, zeros filled one position per step; `cross_cache` the
      projected encoder outputs, each `(batch_size, source_length,
      num_heads, key_dim)` (`None` for a decoder-only block), with `key_dim =
      d_model // num_heads`. `call_step` gives the same outputs as the full
      call at every position.

    Args:
        d_model, num_heads, dff, dropout, norm_first, layer_norm_epsilon,
            **kwargs: as `TransformerEncoderBlock`.

    Call arguments:
        x: target embeddings `(batch_size, target_length, d_model)`.
        context: encoder outputs `(batch_size, source_length, d_model)`, or
            `None` for a decoder-only block (a language model): the first call
            decides, and a block built without `context` has no cross-attention
            weights.
        decoder_padding_mask: optional boolean `(batch_size, target_length)`,
            True on real target tokens; defaults to `x`'s Keras mask.
        encoder_padding_mask: optional boolean `(batch_size, source_length)`,
            True on real source tokens; defaults to `context`'s Keras mask.
        return_attention_scores: if True, also return the cross-attention
            weights.
        training: Python bool or `None` (dropout).
        x_mask, context_mask: the slots Keras fills with the masks carried by
            `x` and `context` (Keras' `<argument>_mask` convention); pass the
            explicit arguments.

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

    def __init__(self, d_model, num_heads, dff, dropout=0.0, norm_first=False,
                 layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dff, self.dropout = d_model, num_heads, dff, dropout
        self.key_dim = resolve_key_dim(d_model, num_heads)
        self.norm_first, self.layer_norm_epsilon = norm_first, layer_norm_epsilon
        self.supports_masking = True
        sublayer_args = dict(d_model=d_model, dropout=dropout, norm_first=norm_first,
                             layer_norm_epsilon=layer_norm_epsilon, dtype=self.dtype_policy)
        self.causal_self_attention = CausalSelfAttention(
            num_heads=num_heads, name="causal_self_attention", **sublayer_args)
        self.cross_attention = CrossAttention(num_heads=num_heads, name="cross_attention",
                                              **sublayer_args)
        self.feed_forward = FeedForward(dff=dff, name="feed_forward", **sublayer_args)

    def build(self, x_shape, context_shape=None):
        self.causal_self_attention.build(x_shape)
        # Decoder-only (no encoder): the cross-attention sublayer stays unbuilt
        # and has no weights, as in keras_hub.layers.TransformerDecoder.
        self.decoder_only = context_shape is None
        if not self.decoder_only:
            self.cross_attention.build(x_shape, context_shape)
        self.feed_forward.build(x_shape)

    def call(self, x, context=None, decoder_padding_mask=None, encoder_padding_mask=None,
             return_attention_scores=False, training=None, x_mask=None, context_mask=None):
        decoder_padding_mask = x_mask if decoder_padding_mask is None else decoder_padding_mask
        encoder_padding_mask = context_mask if encoder_padding_mask is None else encoder_padding_mask
        self._check_context(context, "call()", return_attention_scores)
        # z1 = LN(x + Dropout(MaskedMHA(x)))            pre-norm: x + Dropout(MaskedMHA(LN(x)))
        z1 = self.causal_self_attention(x, decoder_padding_mask=decoder_padding_mask,
                                        training=training)
        z2, scores = z1, None  # decoder-only: no cross-attention
        if context is not None:
            # z2 = LN(z1 + Dropout(MHA(z1, c, c)))      pre-norm: z1 + Dropout(MHA(LN(z1), c, c))
            z2, scores = self.cross_attention(z1, context, encoder_padding_mask=encoder_padding_mask,
                                              return_attention_scores=True, training=training)
        # y = LN(z2 + Dropout(FFN(z2)))                 pre-norm: z2 + Dropout(FFN(LN(z2)))
        y = self.feed_forward(z2, training=training)
        return (y, scores) if return_attention_scores else y

    # ------------------------------------------------------ incremental decoding
    def build_cache(self, batch_size=None, max_length=None, context=None):
        """The caches of one sentence batch: `(self_cache, cross_cache)`.

        Args:
            batch_size: int, rows of the self-attention cache.
            max_length: int, positions of the self-attention cache.
            context: encoder outputs `(batch_size, source_length, d_model)`,
                projected once into the cross-attention cache; `None` for a
                decoder-only block. The block must be built.

        Returns:
            `self_cache = (key_cache, value_cache)`, zeros, each `(batch_size,
            max_length, num_heads, key_dim)`, and `cross_cache = (key_cache,
            value_cache)`, each `(batch_size, source_length, num_heads,
            key_dim)`, or `None` without `context`.
        """
        self._check_context(context, "build_cache()")
        self_cache = self.causal_self_attention.build_cache(batch_size=batch_size,
                                                            max_length=max_length)
        cross_cache = None if context is None else self.cross_attention.build_cache(
            context=context)
        return self_cache, cross_cache

    def call_step(self, x_step, step_index, cache, *, encoder_padding_mask=None, training=False):
        """Decodes the position(s) starting at `step_index` with the key/value caches.

        The `call_step` of every attention layer and block of kerasseq
        (`CausalSelfAttention`, `CrossAttention`, this block) takes `(x_step,
        step_index, cache, *, encoder_padding_mask, training)` and returns
        `(outputs, cache, attention_scores)`.

        Args:
            x_step: `(batch_size, 1, d_model)` (any `step_length` works).
            step_index: absolute position of `x_step[:, 0]`, int or scalar int
                tensor (works inside `tf.function` / XLA).
            cache: `(self_cache, cross_cache)` from `build_cache`; positions
                `< step_index` of the self cache must already be filled.
            encoder_padding_mask: optional boolean `(batch_size, source_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(outputs, cache, attention_scores)`: `(batch_size, 1, d_model)`,
            the updated `(self_cache, cross_cache)`, and the cross-attention
            weights `(batch_size, num_heads, 1, source_length)` (`None`
            decoder-only).
        """
        self_cache, cross_cache = cache
        self._check_context(cross_cache, "call_step()")
        z1, self_cache, _ = self.causal_self_attention.call_step(
            x_step, step_index, self_cache, training=training)
        z2, scores = z1, None
        if cross_cache is not None:
            z2, cross_cache, scores = self.cross_attention.call_step(
                z1, None, cross_cache, encoder_padding_mask=encoder_padding_mask,
                training=training)
        return self.feed_forward(z2, training=training), (self_cache, cross_cache), scores

    # --------------------------------------------------------------- bookkeeping
    def _check_context(self, context, where, return_attention_scores=False):
        if context is None and not getattr(self, "decoder_only", True):
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' was built with cross-attention "
                f"(an encoder's `context`) but {where} got none. Pass the encoder "
                "outputs, or use a block built without `context` (decoder-only).")
        if context is not None and getattr(self, "decoder_only", False):
            raise ValueError(
                f"TransformerDecoderBlock '{self.name}' was built decoder-only (first "
                "called without `context`): it has no cross-attention to cache or to "
                f"weigh, but {where} got a `context`. Build a new block for "
                "encoder-decoder use.")
        if context is None and return_attention_scores:
            raise ValueError("return_attention_scores=True returns cross-attention weights; a "
                             "decoder-only block (no `context`) has none.")

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return tuple(x_shape)

    def compute_output_spec(self, x, context=None, *args, return_attention_scores=False,
                            **kwargs):
        self._check_context(context, "call()", return_attention_scores)
        outputs = keras.KerasTensor(x.shape, self.compute_dtype)
        if not return_attention_scores:
            return outputs
        scores_shape = (x.shape[0], self.num_heads, x.shape[1], context.shape[1])
        return outputs, keras.KerasTensor(scores_shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dff=self.dff,
                      dropout=self.dropout, norm_first=self.norm_first,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config
