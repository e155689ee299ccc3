"""Multi-head attention core shared by every Transformer layer in kerasseq.

The module holds three things:

- `scaled_dot_product_attention`, the reference equation in plain `keras.ops`;
- `MultiHeadAttention`, the projections around it, laid out exactly like
  `keras.layers.MultiHeadAttention` (so weights can be copied both ways) and
  extended with a key/value cache for incremental decoding;
- `BaseAttention`, the "attention + dropout + residual + LayerNorm" skeleton
  that `GlobalSelfAttention`, `CausalSelfAttention` and `CrossAttention` share.

Axis names used in every docstring: `batch_size`, `num_heads`,
`target_length` (queries), `source_length` (keys/values), `max_length`
(preallocated cache length), `key_dim` (per-head size), `d_model`.
"""

import math

import keras
from keras import ops

from kerasseq._validation import check_positive_int

# Masked scores are filled with this value *after* the scores are cast to
# float32, so it is finite in every compute dtype we run in (float16 included).
_MASK_VALUE = -1e9


def _executing_eagerly():
    """True outside `tf.function` / symbolic tracing (the backend is TensorFlow)."""
    import tensorflow as tf

    return tf.executing_eagerly()


def _clone_initializer(initializer):
    """A fresh copy, so that two kernels never share one seeded initializer."""
    return initializer.__class__.from_config(initializer.get_config())


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
    Scores are computed, masked and normalised in float32, then cast back to
    the dtype of `query`, so the function is safe under `mixed_float16`.
    Masked scores become a large negative *finite* number; a query row whose
    keys are all masked gets all-zero weights (and a zero output), never NaN.

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
    key_dim = ops.shape(query)[-1]
    scale = 1.0 / math.sqrt(float(key_dim))
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))
    # (batch_size, num_heads, target_length, source_length)
    scores = ops.cast(scores, "float32") * scale
    if mask is not None:
        mask = ops.cast(mask, "bool")
        scores = ops.where(mask, scores, _MASK_VALUE)
    weights = ops.softmax(scores, axis=-1)
    if mask is not None:
        # A row with no visible key would otherwise be uniform; make it zero.
        any_visible = ops.any(mask, axis=-1, keepdims=True)
        weights = ops.where(any_visible, weights, 0.0)
    weights = ops.cast(weights, query.dtype)
    if dropout_layer is not None:
        weights = dropout_layer(weights, training=training)
    output = ops.matmul(weights, ops.cast(value, weights.dtype))
    # (batch_size, num_heads, target_length, value_dim)
    return output, weights


@keras.saving.register_keras_serializable(package="kerasseq")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with the weight layout of `keras.layers.MultiHeadAttention`.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` with
    `head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)` (Vaswani et al., 2017,
    section 3.2.2). The projections are `keras.layers.EinsumDense` layers named
    `query`, `key`, `value` and `attention_output`, built in that order, so
    `get_weights()` / `set_weights()` are interchangeable with
    `keras.layers.MultiHeadAttention(num_heads, key_dim)` and keras-hub's
    `CachedMultiHeadAttention`:

    - query/key/value kernels `(d_model, num_heads, key_dim)`,
      biases `(num_heads, key_dim)`;
    - output kernel `(num_heads, key_dim, output_dim)`, bias `(output_dim,)`.

    Incremental decoding uses a key/value cache: a tuple `(key_cache,
    value_cache)` of tensors `(batch_size, max_length, num_heads, key_dim)`
    holding projected keys and values.

    - `cache` given with `cache_index`: the keys/values projected from this
      call's `value`/`key` inputs are written at `cache_index` with
      `keras.ops.slice_update` (static shapes, XLA friendly) and attention runs
      over the whole cache; the caller masks positions not yet written.
    - `cache` given without `cache_index`: a static cache (e.g. the output of
      `compute_key_value` on the encoder outputs); `value`/`key` are ignored.

    Args:
        num_heads: number of attention heads, >= 1.
        key_dim: size of each head for queries, keys and values, >= 1.
        dropout: dropout rate on the attention weights, in `[0, 1)`.
        output_dim: size of the output projection; defaults to the last
            dimension of `query`.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).

    Call arguments:
        query: `(batch_size, target_length, d_model)`.
        value: `(batch_size, source_length, d_model)`.
        key: optional `(batch_size, source_length, d_model)`; defaults to `value`.
        attention_mask: optional boolean, broadcastable to
            `(batch_size, target_length, source_length)` (or to
            `(batch_size, target_length, max_length)` with a cache).
        cache: optional tuple `(key_cache, value_cache)`, each
            `(batch_size, max_length, num_heads, key_dim)`.
        cache_index: optional int (or scalar int tensor): position at which the
            new keys/values are written into `cache`.
        return_attention_scores: whether to also return the attention weights.
        training: Python bool or `None` (dropout).

    Returns:
        `output` `(batch_size, target_length, output_dim)`, followed, when
        requested, by `attention_scores` `(batch_size, num_heads,
        target_length, source_length)` and, when `cache` is given, by the
        (updated) cache: `output`, `(output, attention_scores)`,
        `(output, cache)` or `(output, attention_scores, cache)`.

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
        super().__init__(**kwargs)
        num_heads = check_positive_int("num_heads", num_heads)
        key_dim = check_positive_int("key_dim", key_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.dropout = dropout
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True
        self.query_dense = self._projection("query")
        self.key_dense = self._projection("key")
        self.value_dense = self._projection("value")
        self.output_dense = None  # needs d_model, created in build()
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def _projection(self, name):
        projection = keras.layers.EinsumDense(
            "abc,cde->abde",
            output_shape=(None, self.num_heads, self.key_dim),
            bias_axes="de",
            kernel_initializer=_clone_initializer(self.kernel_initializer),
            bias_initializer=_clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        # Padding reaches the attention through `attention_mask`; a Keras mask
        # riding on the inputs is simply passed through instead of warned about.
        projection.supports_masking = True
        return projection

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        output_dim = self.output_dim or query_shape[-1]
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.output_dense = keras.layers.EinsumDense(
            "abcd,cde->abe",
            output_shape=(None, output_dim),
            bias_axes="e",
            kernel_initializer=_clone_initializer(self.kernel_initializer),
            bias_initializer=_clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="attention_output",
        )
        self.output_dense.build(
            (query_shape[0], query_shape[1], self.num_heads, self.key_dim)
        )
        self.built = True

    def compute_key_value(self, value, key=None):
        """Projects keys and values once, e.g. the encoder outputs for cross-attention.

        Args:
            value: `(batch_size, source_length, d_model)`.
            key: optional `(batch_size, source_length, d_model)`; defaults to
                `value`.

        Returns:
            `(key_heads, value_heads)`, each
            `(batch_size, source_length, num_heads, key_dim)`; pass them back as
            `cache=(key_heads, value_heads)` with `cache_index=None`.
        """
        key = value if key is None else key
        return self.key_dense(key), self.value_dense(value)

    def _keys_and_values(self, value, key, cache, cache_index):
        if cache is None:
            if cache_index is not None:
                raise ValueError(
                    "cache_index must be None when cache is None. "
                    f"Received: cache_index={cache_index}"
                )
            key_heads, value_heads = self.compute_key_value(value, key)
            return key_heads, value_heads, None
        key_cache, value_cache = cache
        if cache_index is None:
            return key_cache, value_cache, cache
        key_update, value_update = self.compute_key_value(value, key)
        start = [0, cache_index, 0, 0]
        key_cache = ops.slice_update(
            key_cache, start, ops.cast(key_update, key_cache.dtype)
        )
        value_cache = ops.slice_update(
            value_cache, start, ops.cast(value_update, value_cache.dtype)
        )
        # each (batch_size, max_length, num_heads, key_dim)
        return key_cache, value_cache, (key_cache, value_cache)

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        cache=None,
        cache_index=None,
        return_attention_scores=False,
        training=None,
    ):
        query_heads = self.query_dense(query)
        # (batch_size, target_length, num_heads, key_dim)
        key_heads, value_heads, cache = self._keys_and_values(
            value, key, cache, cache_index
        )
        output, attention_scores = self._attend(
            query_heads, key_heads, value_heads, attention_mask, training
        )
        outputs = (output,)
        if return_attention_scores:
            outputs += (attention_scores,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _attend(self, query_heads, key_heads, value_heads, attention_mask, training):
        query_heads = ops.transpose(query_heads, (0, 2, 1, 3))
        # (batch_size, num_heads, target_length, key_dim)
        key_heads = ops.transpose(key_heads, (0, 2, 1, 3))
        # (batch_size, num_heads, source_length, key_dim)
        value_heads = ops.transpose(value_heads, (0, 2, 1, 3))
        # (batch_size, num_heads, source_length, key_dim)
        if attention_mask is not None:
            attention_mask = ops.expand_dims(ops.cast(attention_mask, "bool"), axis=1)
            # (batch_size, 1, target_length, source_length)
        context, attention_scores = scaled_dot_product_attention(
            query_heads,
            key_heads,
            value_heads,
            mask=attention_mask,
            dropout_layer=self.dropout_layer if self.dropout > 0 else None,
            training=training,
        )
        context = ops.transpose(context, (0, 2, 1, 3))
        # (batch_size, target_length, num_heads, key_dim)
        return self.output_dense(context), attention_scores

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

    def compute_output_spec(self, *args, **kwargs):
        # The number of outputs depends on call arguments: trace call().
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "output_dim": self.output_dim,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="kerasseq")
class BaseAttention(keras.layers.Layer):
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
        # `skip_padding` (a training-time padding skip, since removed) may be
        # in configs saved by older versions: accepted and ignored.
        kwargs.pop("skip_padding", None)
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout = dropout
        self.key_dim = resolve_key_dim(d_model, num_heads, key_dim)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.supports_masking = True
        self.attention = MultiHeadAttention(
            num_heads=num_heads,
            key_dim=self.key_dim,
            dropout=dropout,
            output_dim=d_model,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )

    def _build_sublayers(self, x_shape, context_shape):
        if x_shape[-1] is not None and x_shape[-1] != self.d_model:
            raise ValueError(
                "The last dimension of the input must equal d_model. "
                f"Received: input shape={tuple(x_shape)}, d_model={self.d_model}"
            )
        self.attention.build(x_shape, context_shape)
        self.layer_norm.build(x_shape)
        self.built = True

    def _pre_norm(self, x):
        return self.layer_norm(x) if self.norm_first else x

    def _add_and_norm(self, residual, attention_output, training):
        x = residual + self.dropout_layer(attention_output, training=training)
        return x if self.norm_first else self.layer_norm(x)

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

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "key_dim": self.key_dim,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
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
