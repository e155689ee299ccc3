"""What the attention and Transformer block tests share: the reference
`scaled_dot_product_attention`, a padded input batch, a NumPy LayerNorm,
`check_layer` on that batch, and the weight copy into the keras-hub
Transformer layers the blocks are compared with."""

import math

import keras
import numpy as np
from keras import ops

from tests.helpers import check_layer


def scaled_dot_product_attention(query, key, value, mask=None):
    """Scaled dot-product attention, `softmax(Q K^T / sqrt(d_k)) V`, on heads.

    Equation (1) of Vaswani et al., 2017, in plain `keras.ops`, the reference
    the tests hold `MultiHeadAttention` to. The softmax is computed in float32
    (`keras.layers.Softmax(dtype="float32")`, which gives masked keys zero
    weight and a fully masked row all zeros, never NaN) and cast back to the
    dtype of `query`.

    Args:
        query: `(batch_size, num_heads, target_length, key_dim)`.
        key: `(batch_size, num_heads, source_length, key_dim)`.
        value: `(batch_size, num_heads, source_length, value_dim)`.
        mask: optional boolean broadcastable to `(batch_size, num_heads,
            target_length, source_length)`; True = may attend.

    Returns:
        `(output, weights)`: `(batch_size, num_heads, target_length,
        value_dim)` and `(batch_size, num_heads, target_length, source_length)`.
    """
    scale = 1.0 / math.sqrt(float(ops.shape(query)[-1]))
    scores = ops.matmul(ops.cast(query, "float32"), ops.swapaxes(ops.cast(key, "float32"), -1, -2))
    weights = keras.layers.Softmax(dtype="float32")(scores * scale, mask=mask)
    weights = ops.cast(weights, query.dtype)
    return ops.matmul(weights, ops.cast(value, weights.dtype)), weights


def padded_inputs(rng):
    """`(x, padding_mask)`: 2 float32 sequences of 6 positions of width 8,
    the first one with 2 padded positions."""
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    return x, padding_mask


def layer_norm(x, layer, epsilon=1e-5):
    """NumPy LayerNorm of `x` over its last axis with `layer`'s gamma and beta."""
    gamma, beta = (keras.ops.convert_to_numpy(w) for w in layer.weights)
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def check_padded_layer(layer_cls, seed, **init_kwargs):
    """`check_layer` of `layer_cls(d_model=8, num_heads=2, **init_kwargs)`
    called on `padded_inputs` drawn with `seed`."""
    x, padding_mask = padded_inputs(np.random.default_rng(seed))
    check_layer(layer_cls, {"d_model": 8, "num_heads": 2, **init_kwargs}, [x, padding_mask])


def _attention_sublayers(block):
    """`(sublayer, keras-hub attribute prefix)` for each attention sublayer of
    a `TransformerEncoderBlock` or `TransformerDecoderBlock`, in order; a
    decoder's cross-attention only once built (a decoder-only block has none)."""
    if not hasattr(block, "causal_self_attention"):
        return [(block.self_attention, "_self_attention")]
    sublayers = [(block.causal_self_attention, "_self_attention")]
    if block.cross_attention.built:
        sublayers.append((block.cross_attention, "_cross_attention"))
    return sublayers


def randomize_layer_norms(block, rng):
    """Non-trivial LayerNorm parameters in every sublayer of `block`, so that a
    swapped or misplaced norm changes the outputs."""
    sublayers = [sublayer for sublayer, _ in _attention_sublayers(block)] + [block.feed_forward]
    for sublayer in sublayers:
        sublayer.layer_norm.set_weights([rng.uniform(0.5, 1.5, 8), rng.normal(0, 0.1, 8)])


def copy_into_keras_hub(block, reference):
    """Copies a Transformer block's weights into a built keras_hub
    `TransformerEncoder` or `TransformerDecoder`."""
    pairs = [
        (block.feed_forward.intermediate_dense, reference._feedforward_intermediate_dense),
        (block.feed_forward.output_dense, reference._feedforward_output_dense),
        (block.feed_forward.layer_norm, reference._feedforward_layer_norm),
    ]
    for sublayer, prefix in _attention_sublayers(block):
        pairs.append((sublayer.attention, getattr(reference, f"{prefix}_layer")))
        pairs.append((sublayer.layer_norm, getattr(reference, f"{prefix}_layer_norm")))
    for ours, theirs in pairs:
        theirs.set_weights(ours.get_weights())
