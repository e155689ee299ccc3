"""Multi-head attention core shared by every Transformer layer in kerasseq.

The module holds three things:

- `scaled_dot_product_attention`, the reference equation in plain `keras.ops`;
- `MultiHeadAttention`, a subclass of `keras.layers.MultiHeadAttention` (so
  the weight layout is Keras' by construction) with a key/value cache for
  incremental decoding, as keras-hub's `CachedMultiHeadAttention`;
- `BaseAttention`, the "attention + dropout + residual + LayerNorm" skeleton
  that `GlobalSelfAttention`, `CausalSelfAttention` and `CrossAttention` share.

Axis names used in every docstring: `batch_size`, `num_heads`,
`target_length` (queries), `source_length` (keys/values), `max_length`
(preallocated cache length), `key_dim` (per-head size), `d_model`.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from kerasseq._validation import check_positive_int
from kerasseq.layers._attention_math import masked_softmax
from kerasseq.layers._transformer_layer import ResidualSublayer


def _executing_eagerly():
    """True outside `tf.function` / symbolic tracing (the backend is TensorFlow)."""
    return tf.executing_eagerly()


def padding_to_attention_mask(padding_mask):
    """Turns a key padding mask into an attention mask that broadcasts over queries.

    Args:
        padding_mask: boolean `(batch_size, source_length)`, True on real tokens,
            or `None`.

    Returns:
        Boolean `(batch_size, 1, source_length)`, or `None`.
    """
    if padding_mask is None:
        return None
    return ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)


def merge_masks(*masks):
    """Logical AND of the masks that are not `None` (broadcasting); `None` if all are."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def scaled_dot_product_attention(
    query, key, value, mask=None, dropout_layer=None, training=None
):
    """Scaled dot-product attention, `softmax(Q K^T / sqrt(d_k)) V`.

    Equation (1) of Vaswani et al., 2017, "Attention Is All You Need".
    Scores are normalised by `masked_softmax` (in float32, then cast back to
    the dtype of `query`), so the function is safe under `mixed_float16`; a
    query row whose keys are all masked gets all-zero weights (and a zero
    output), never NaN. `MultiHeadAttention` computes the same numbers with
    Keras' einsum equations.

    Args:
        query: `(batch_size, num_heads, target_length, key_dim)`.
        key: `(batch_size, num_heads, source_length, key_dim)`.
        value: `(batch_size, num_heads, source_length, value_dim)`.
        mask: optional boolean tensor broadcastable to
            `(batch_size, num_heads, target_length, source_length)`;
            True means "this query may attend to this key".
        dropout_layer: optional `keras.layers.Dropout` applied to the
            attention weights.
        training: Python bool or `None`, forwarded to `dropout_layer`.

    Returns:
        `(output, attention_weights)`: output `(batch_size, num_heads,
        target_length, value_dim)` and weights `(batch_size, num_heads,
        target_length, source_length)` (each row sums to 1, or to 0 if fully
        masked).

    Example:

    >>> q = keras.random.normal((2, 4, 3, 8))
    >>> kv = keras.random.normal((2, 4, 5, 8))
    >>> output, weights = scaled_dot_product_attention(q, kv, kv)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 4, 3, 8), (2, 4, 3, 5))
    """
    scale = 1.0 / math.sqrt(float(ops.shape(query)[-1]))
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    # (batch_size, num_heads, target_length, source_length)
    weights = ops.cast(masked_softmax(ops.cast(scores, "float32") * scale, mask), query.dtype)
    if dropout_layer is not None:
        weights = dropout_layer(weights, training=training)
    output = ops.matmul(weights, ops.cast(value, weights.dtype))
    # (batch_size, num_heads, target_length, value_dim)
    return output, weights


@keras.saving.register_keras_serializable(package="kerasseq")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with a key/value cache and kerasseq's masked softmax.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` with
    `head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)` (Vaswani et al., 2017,
    section 3.2.2). A subclass of `keras.layers.MultiHeadAttention`, as
    keras-hub's `CachedMultiHeadAttention` is: the projections, their names
    (`query`, `key`, `value`, `attention_output`) and the weight layout are
    Keras' own, so `get_weights()` / `set_weights()` are interchangeable with
    `keras.layers.MultiHeadAttention(num_heads, key_dim)` and keras-hub:

    - query/key/value kernels `(d_model, num_heads, key_dim)`,
      biases `(num_heads, key_dim)`;
    - output kernel `(num_heads, key_dim, output_dim)`, bias `(output_dim,)`.

    It differs from Keras in its softmax, always `masked_softmax` (docs/design.md,
    "The private Keras hooks"), and in `call_step`, which attends over a
    key/value cache `(key_cache, value_cache)`, each `(batch_size, max_length,
    num_heads, key_dim)`, built by `build_cache` (a static cache of projected
    encoder outputs) or by the caller (zeros, filled one position per step).

    Args:
        num_heads: number of attention heads, >= 1.
        key_dim: size of each head for queries, keys and values, >= 1.
        dropout: dropout rate on the attention weights, in `[0, 1)`.
        output_dim: size of the output projection; defaults to the last
            dimension of `query` (Keras' `output_shape=(output_dim,)`).
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `use_bias`, `seed`...) and of `keras.layers.Layer`
            (`name`, `dtype`...).

    Call arguments:
        query: `(batch_size, target_length, d_model)`.
        value: `(batch_size, source_length, d_model)`.
        key: optional `(batch_size, source_length, d_model)`; defaults to `value`.
        attention_mask: optional boolean, broadcastable to
            `(batch_size, target_length, source_length)`; True = may attend.
        return_attention_scores: whether to also return the attention weights.
        training: Python bool or `None` (dropout).
        use_causal_mask: as in `keras.layers.MultiHeadAttention`.
        value_mask, key_mask: filled by Keras from the masks carried by
            `value` and `key` (merged with `attention_mask`). Queries are not
            masked: a padding query's row is computed and meaningless.

    Returns:
        As `keras.layers.MultiHeadAttention`: `output` `(batch_size,
        target_length, output_dim)`, or with `return_attention_scores=True`
        `(output, attention_scores)`, the scores `(batch_size, num_heads,
        target_length, source_length)`.

    Example:

    >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = keras.random.normal((3, 5, 8))
    >>> tuple(mha(x, x).shape)
    (3, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        dropout=0.0,
        output_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        num_heads = check_positive_int("num_heads", num_heads)
        key_dim = check_positive_int("key_dim", key_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
        if output_dim is not None:
            if kwargs.get("output_shape") is not None:
                raise ValueError(
                    "Pass output_dim or output_shape, not both. Received: "
                    f"output_dim={output_dim}, output_shape={kwargs['output_shape']}"
                )
            kwargs["output_shape"] = (check_positive_int("output_dim", output_dim),)
        super().__init__(
            num_heads=num_heads,
            key_dim=key_dim,
            dropout=dropout,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        self.output_dim = output_dim

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        # Padding reaches the attention through `attention_mask`; a Keras mask
        # riding on the inputs is passed through instead of warned about.
        for projection in (self.query_dense, self.key_dense, self.value_dense):
            projection.supports_masking = True

    # ------------------------------------------------------------------ scores
    def _masked_softmax(self, attention_scores, attention_mask=None):
        # attention_scores: (batch_size, num_heads, target_length, source_length)
        if attention_mask is not None:
            attention_mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=-3)
            # (batch_size or 1, 1, target_length, source_length)
        weights = masked_softmax(attention_scores, attention_mask)
        return ops.cast(weights, attention_scores.dtype)

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        # Always Keras' explicit path (einsum, `_masked_softmax`, dropout),
        # never the fused kernel: one masked softmax, the same numbers with
        # and without `return_attention_scores`.
        return super()._compute_attention(
            query,
            key,
            value,
            attention_mask=attention_mask,
            training=training,
            return_attention_scores=True,
            use_causal_mask=use_causal_mask,
        )

    # -------------------------------------------------------------------- call
    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        value_mask=None,
        key_mask=None,
    ):
        key_is_value = key is None
        key = value if key is None else key
        attention_mask = self._compute_attention_mask(
            query,
            value,
            value_mask=value_mask,
            key_mask=None if key_is_value else key_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
        )  # (batch_size or 1, target_length, source_length) or None
        output, attention_scores = self._attend(
            query, self.key_dense(key), self.value_dense(value), attention_mask, training
        )
        return (output, attention_scores) if return_attention_scores else output

    def _attend(self, query, key_heads, value_heads, attention_mask, training):
        """Projected keys/values `(batch_size, source_length, num_heads, key_dim)` → output."""
        context, attention_scores = self._compute_attention(
            self.query_dense(query), key_heads, value_heads, attention_mask, training
        )
        # context (batch_size, target_length, num_heads, value_dim)
        if self._use_gate:
            context = ops.multiply(context, self._gate_dense(query))
        return self.output_dense(context), attention_scores

    # ------------------------------------------------------------------- cache
    def build_cache(self, value, key=None):
        """Projects keys and values once, e.g. the encoder outputs for cross-attention.

        Args:
            value: `(batch_size, source_length, d_model)`.
            key: optional `(batch_size, source_length, d_model)`; defaults to
                `value`.

        Returns:
            `(key_cache, value_cache)`, each `(batch_size, source_length,
            num_heads, key_dim)`: a static cache for `call_step(...,
            step_index=None)`.
        """
        key = value if key is None else key
        return self.key_dense(key), self.value_dense(value)

    def call_step(
        self, query, step_index, cache, *, value=None, key=None, attention_mask=None,
        training=False,
    ):
        """Attention of `query` over a key/value cache, for incremental decoding.

        - `step_index` given (self-attention): the keys/values projected from
          `value` (default: `query`) and `key` are written into the cache at
          row `step_index` with `keras.ops.slice_update` (static shapes, XLA
          friendly), then `query` attends over the whole cache; the caller
          masks the rows not yet written.
        - `step_index=None`: `cache` is static (from `build_cache`) and is
          attended as it is; `value` and `key` must be `None`.

        Args:
            query: `(batch_size, step_length, d_model)`.
            step_index: absolute position of `query[:, 0]` (int or scalar int
                tensor), or `None` for a static cache.
            cache: `(key_cache, value_cache)`, each `(batch_size, max_length,
                num_heads, key_dim)`.
            value: optional `(batch_size, step_length, d_model)`.
            key: optional `(batch_size, step_length, d_model)`.
            attention_mask: optional boolean broadcastable to `(batch_size,
                step_length, max_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(output, cache, attention_scores)`: `(batch_size, step_length,
            output_dim)`, the (updated) cache, and `(batch_size, num_heads,
            step_length, max_length)`.
        """
        if not self.built:
            shape = tuple((query if value is None else value).shape)
            self.build(tuple(query.shape), shape)
        key_cache, value_cache = cache
        if step_index is None:
            if value is not None or key is not None:
                raise ValueError(
                    "A static cache (step_index=None) is attended as it is: value and key "
                    "must be None. Pass step_index to write new keys/values into the cache."
                )
        else:
            value = query if value is None else value
            key_update, value_update = self.build_cache(value, key)
            start = [0, step_index, 0, 0]
            key_cache = ops.slice_update(key_cache, start, ops.cast(key_update, key_cache.dtype))
            value_cache = ops.slice_update(
                value_cache, start, ops.cast(value_update, value_cache.dtype)
            )
            # each (batch_size, max_length, num_heads, key_dim)
        output, attention_scores = self._attend(
            query, key_cache, value_cache, attention_mask, training
        )
        return output, (key_cache, value_cache), attention_scores

    # ------------------------------------------------------------ bookkeeping
    def compute_output_spec(self, *args, **kwargs):
        # Keras' spec gives cross-attention scores (target_length, target_length)
        # columns: trace call() instead.
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def get_config(self):
        config = super().get_config()
        if self.output_dim is not None:
            del config["output_shape"]  # rebuilt from output_dim
        config["output_dim"] = self.output_dim
        return config


@keras.saving.register_keras_serializable(package="kerasseq")
class BaseAttention(ResidualSublayer):
    """Attention sublayer wrapped in dropout, a residual connection and LayerNorm.

    Post-norm (Vaswani et al., 2017): `LayerNorm(x + Dropout(Attention(x, ...)))`.
    Pre-norm (`norm_first=True`, Xiong et al., 2020):
    `x + Dropout(Attention(LayerNorm(x), ...))`.
    Subclasses (`GlobalSelfAttention`, `CausalSelfAttention`, `CrossAttention`)
    only decide which keys/values and which mask the attention sees.

    Args:
        d_model: model width; the last dimension of the input and the output.
        num_heads: number of attention heads.
        dropout: dropout rate, used on the attention weights and on the
            attention output before the residual addition.
        key_dim: per-head size; defaults to `d_model // num_heads` (then
            `d_model` must be divisible by `num_heads`).
        norm_first: pre-norm if True, post-norm (the paper) if False.
        layer_norm_epsilon: epsilon of the LayerNormalization.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments every subclass takes, besides its inputs and masks:
        return_attention_scores: if True, also return the attention weights
            `(batch_size, num_heads, target_length, source_length)`.
        training: Python bool or `None` (dropout).
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dropout=0.0,
        key_dim=None,
        norm_first=False,
        layer_norm_epsilon=1e-5,
        **kwargs,
    ):
        super().__init__(d_model, dropout, norm_first, layer_norm_epsilon, **kwargs)
        self.num_heads = num_heads
        self.key_dim = resolve_key_dim(d_model, num_heads, key_dim)
        self.attention = MultiHeadAttention(
            num_heads=num_heads,
            key_dim=self.key_dim,
            dropout=dropout,
            output_dim=d_model,
            dtype=self.dtype_policy,
            name="attention",
        )
        self._create_add_and_norm()

    def build(self, x_shape):
        """Self-attention: the keys and values come from `x` too."""
        self._build_attention(x_shape, x_shape)

    def _build_attention(self, x_shape, context_shape):
        self._check_input_width(x_shape)
        self.attention.build(x_shape, context_shape)
        self.layer_norm.build(x_shape)
        self.built = True

    def _attend_add_and_norm(self, x, attention_mask, training, context=None):
        """Attention (self-attention when `context` is None) + dropout + residual + LayerNorm.

        Returns `(outputs, attention_scores)`.
        """
        normed = self._pre_norm(x)
        attention_output, attention_scores = self.attention(
            normed,
            normed if context is None else context,
            attention_mask=attention_mask,
            return_attention_scores=True,
            training=training,
        )
        return self._add_and_norm(x, attention_output, training), attention_scores

    def compute_output_spec(self, *args, **kwargs):
        # The number of outputs depends on call arguments: trace call().
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim})
        return config


def resolve_key_dim(d_model, num_heads, key_dim=None):
    """Returns `key_dim`, defaulting to `d_model // num_heads` (which must be exact)."""
    check_positive_int("num_heads", num_heads)
    if key_dim is not None:
        return key_dim
    if d_model % num_heads != 0:
        raise ValueError(
            "d_model must be divisible by num_heads. "
            f"Received: d_model={d_model}, num_heads={num_heads}"
        )
    return d_model // num_heads
