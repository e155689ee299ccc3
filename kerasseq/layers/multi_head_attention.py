"""Multi-head attention with a key/value cache, the core of kerasseq's Transformer layers.

Axis names used in every docstring: `batch_size`, `num_heads`,
`target_length` (queries), `source_length` (keys/values), `max_length`
(preallocated cache length), `key_dim` (per-head size), `d_model`.
"""

import math

import keras
from keras import ops

from kerasseq._validation import check_positive_int


def padding_to_attention_mask(padding_mask):
    """Key padding mask `(batch_size, source_length)` (True on real tokens) →
    attention mask `(batch_size, 1, source_length)` that broadcasts over queries;
    `None` stays `None`."""
    if padding_mask is None:
        return None
    return ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)


def merge_masks(*masks):
    """Logical AND of the masks that are not `None` (broadcasting); `None` if all are."""
    merged = None
    for mask in masks:
        if mask is not None:
            mask = ops.cast(mask, "bool")
            merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


@keras.saving.register_keras_serializable(package="kerasseq")
class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` whose `call` shows the equation, with a key/value cache.

    `MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` with
    `head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k)) V W_i^V` (Vaswani et
    al., 2017, section 3.2). A subclass of `keras.layers.MultiHeadAttention`,
    as keras-hub's `CachedMultiHeadAttention` is: the projections
    `query_dense`, `key_dense`, `value_dense`, `output_dense`, their names
    (`query`, `key`, `value`, `attention_output`) and the weight layout are
    Keras' own, so `get_weights()` / `set_weights()` are interchangeable with
    `keras.layers.MultiHeadAttention(num_heads, key_dim)` and keras-hub:

    - query/key/value kernels `(d_model, num_heads, key_dim)`,
      biases `(num_heads, key_dim)`;
    - output kernel `(num_heads, key_dim, output_dim)`, bias `(output_dim,)`.

    `attend` computes the softmax in float32, written out as
    `keras.layers.Softmax` computes it over a mask (which would warn on a
    one-token sequence): masked positions get zero weight (a fully masked
    row is all zeros, never NaN); the weights are cast back to the compute
    dtype.
    `call_step` attends over a key/value cache `(key_cache, value_cache)`,
    each `(batch_size, max_length, num_heads, key_dim)`, from `build_cache`.

    Args:
        num_heads: number of attention heads, >= 1.
        key_dim: size of each head for queries, keys and values, >= 1.
        dropout: dropout rate on the attention weights, in `[0, 1)`.
        output_dim: size of the output projection; defaults to the last
            dimension of `query` (Keras' `output_shape=(output_dim,)`).
        kernel_initializer, bias_initializer: of the four projections.
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`
            (`value_dim`, `use_bias`, `use_gate`, `seed`...) and of
            `keras.layers.Layer`. Inputs are `(batch_size, length, width)`.

    Call arguments:
        query: `(batch_size, target_length, d_model)`.
        value: `(batch_size, source_length, d_model)`.
        key: optional `(batch_size, source_length, d_model)`; defaults to `value`.
        attention_mask: optional boolean, broadcastable to
            `(batch_size, target_length, source_length)`; True = may attend.
        return_attention_scores: whether to also return the attention weights.
        training: Python bool or `None` (dropout).
        use_causal_mask: query `i` sees keys `j <= i` only.
        value_mask, key_mask: filled by Keras from the masks carried by
            `value` and `key` (merged with `attention_mask`). Queries are not
            masked: a padding query's row is computed and meaningless.

    Returns:
        `output` `(batch_size, target_length, output_dim)`, or with
        `return_attention_scores=True` `(output, attention_scores)`, the
        weights `(batch_size, num_heads, target_length, source_length)`.

    Example:

    >>> mha = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = keras.random.normal((3, 5, 8))
    >>> tuple(mha(x, x).shape)
    (3, 5, 8)
    """

    def __init__(self, num_heads, key_dim, dropout=0.0, output_dim=None,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        num_heads = check_positive_int("num_heads", num_heads)
        key_dim = check_positive_int("key_dim", key_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={dropout}")
        if output_dim is not None:
            if kwargs.get("output_shape") is not None:
                raise ValueError("Pass output_dim or output_shape, not both. Received: "
                                 f"output_dim={output_dim}, output_shape={kwargs['output_shape']}")
            kwargs["output_shape"] = (check_positive_int("output_dim", output_dim),)
        super().__init__(num_heads=num_heads, key_dim=key_dim, dropout=dropout,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer, **kwargs)
        self.output_dim = output_dim

    def build(self, query_shape, value_shape, key_shape=None):
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if shape is not None and len(shape) != 3:
                raise ValueError(f"{name} must be (batch_size, length, width). "
                                 f"Received: {name} shape={tuple(shape)}")
        super().build(query_shape, value_shape, key_shape)
        # Padding reaches the attention through `attention_mask`; a Keras mask
        # riding on the inputs is passed through instead of warned about.
        for projection in (self.query_dense, self.key_dense, self.value_dense):
            projection.supports_masking = True

    # -------------------------------------------------------------- the equation
    def call(self, query, value, key=None, attention_mask=None, return_attention_scores=False,
             training=None, use_causal_mask=False, value_mask=None, key_mask=None):
        causal_mask = None
        if use_causal_mask:  # (1, target_length, source_length): query i sees keys j <= i
            causal_mask = ops.tril(ops.ones((1, ops.shape(query)[1], ops.shape(value)[1]), "int32"))
        mask = merge_masks(attention_mask, padding_to_attention_mask(value_mask),
                           None if key is None else padding_to_attention_mask(key_mask), causal_mask)
        key = value if key is None else key
        output, weights = self.attend(self.query_dense(query), self.key_dense(key),
                                      self.value_dense(value), mask, query, training)
        return (output, weights) if return_attention_scores else output

    def attend(self, q, k, v, mask=None, query=None, training=None):
        """`softmax(Q K^T / sqrt(d_k)) V W^O` on projected heads.

        Args:
            q: `Q W^Q`, `(batch_size, target_length, num_heads, key_dim)`.
            k: `K W^K`, `(batch_size, source_length, num_heads, key_dim)`.
            v: `V W^V`, `(batch_size, source_length, num_heads, value_dim)`.
            mask: optional boolean broadcastable to `(batch_size,
                target_length, source_length)`.
            query: the unprojected query, read by the gate (`use_gate=True`).
            training: Python bool or `None` (dropout on the weights).

        Returns:
            `(output, weights)`: `(batch_size, target_length, output_dim)` and
            `(batch_size, num_heads, target_length, source_length)`.
        """
        q = q * ops.cast(1.0 / math.sqrt(self.key_dim), q.dtype)
        scores = ops.cast(ops.einsum("bshd,bthd->bhts", k, q), "float32")  # Q K^T / sqrt(d_k)
        if mask is not None:  # one mask for all heads: a masked key gets exp(-1e9) = 0
            mask = ops.expand_dims(mask, axis=1)
            scores = ops.where(mask, scores, -1e9)
        exp = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))  # softmax in float32
        weights = exp / ops.sum(exp, axis=-1, keepdims=True)
        if mask is not None:  # a fully masked row gets zero weights, not uniform ones
            weights = ops.where(mask, weights, 0.0)
        weights = ops.cast(weights, q.dtype)
        heads = ops.einsum("bhts,bshd->bthd", self._dropout_layer(weights, training=training), v)
        if self._use_gate:  # Keras' gated attention: heads ⊙ sigmoid(query W^G)
            heads = heads * self._gate_dense(query)
        return self.output_dense(heads), weights  # Concat(head_1..head_h) W^O

    # ------------------------------------------------------ incremental decoding
    def build_cache(self, batch_size=None, max_length=None, context=None):
        """A key/value cache `(key_cache, value_cache)` for `call_step`.

        Args:
            batch_size, max_length: ints: a zero cache, each `(batch_size,
                max_length, num_heads, key_dim)`, that `call_step` fills one
                position per step (self-attention).
            context: or `(batch_size, source_length, width)`: its keys and
                values projected once, each `(batch_size, source_length,
                num_heads, key_dim)`, a static cache (cross-attention).
        """
        if context is not None:
            if batch_size is not None or max_length is not None:
                raise ValueError("build_cache takes batch_size and max_length (a zero cache) "
                                 "or context (a projected one), not both.")
            return self.key_dense(context), self.value_dense(context)
        if batch_size is None or max_length is None:
            raise ValueError("build_cache needs batch_size and max_length (a zero cache) or "
                             f"context. Received: batch_size={batch_size}, max_length={max_length}")
        return (ops.zeros((batch_size, max_length, self.num_heads, self.key_dim), self.compute_dtype),
                ops.zeros((batch_size, max_length, self.num_heads, self.value_dim),
                          self.compute_dtype))

    def call_step(self, query, step_index, cache, *, value=None, key=None, attention_mask=None,
                  training=False):
        """Attention of `query` over a key/value cache.

        `step_index` given (self-attention): the keys/values of `value`
        (default: `query`) and `key` (default: `value`) are written into the
        cache at position `step_index` with `keras.ops.slice_update` (static
        shapes, XLA friendly), then `query` attends over the whole cache; the
        caller masks the positions not yet written. `step_index=None`: the
        cache is static (`build_cache(context=...)`), attended as it is.

        Args:
            query: `(batch_size, step_length, d_model)`.
            step_index: absolute position of `query[:, 0]` (int or scalar int
                tensor), or `None` for a static cache.
            cache: `(key_cache, value_cache)`, each `(batch_size, max_length,
                num_heads, key_dim)`.
            value, key: optional `(batch_size, step_length, d_model)`.
            attention_mask: optional boolean broadcastable to `(batch_size,
                step_length, max_length)`.
            training: Python bool (dropout); False for decoding.

        Returns:
            `(output, cache, attention_scores)`: `(batch_size, step_length,
            output_dim)`, the (updated) cache, and `(batch_size, num_heads,
            step_length, max_length)`.
        """
        if not self.built:
            self.build(tuple(query.shape), tuple((query if value is None else value).shape))
        key_cache, value_cache = cache
        if step_index is None and (value is not None or key is not None):
            raise ValueError("A static cache (step_index=None) is attended as it is: value and key "
                             "must be None. Pass step_index to write new keys/values into it.")
        if step_index is not None:  # cache update: write position step_index
            value = query if value is None else value
            key = value if key is None else key
            start = [0, step_index, 0, 0]
            key_cache = ops.slice_update(key_cache, start,
                                         ops.cast(self.key_dense(key), key_cache.dtype))
            value_cache = ops.slice_update(value_cache, start,
                                           ops.cast(self.value_dense(value), value_cache.dtype))
        output, weights = self.attend(self.query_dense(query), key_cache, value_cache,
                                      attention_mask, query, training)
        return output, (key_cache, value_cache), weights

    # --------------------------------------------------------------- bookkeeping
    def compute_output_spec(self, query, value, key=None, attention_mask=None,
                            return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(self.compute_output_shape(
            query.shape, value.shape, None if key is None else key.shape), self.compute_dtype)
        if not return_attention_scores:
            return output
        scores_shape = (query.shape[0], self.num_heads, query.shape[1], value.shape[1])
        return output, keras.KerasTensor(scores_shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        if self.output_dim is not None:
            del config["output_shape"]  # rebuilt from output_dim
        config["output_dim"] = self.output_dim
        return config
