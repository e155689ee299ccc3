"""Tests for kerasseq.layers.feed_forward."""

import keras
import numpy as np
import pytest

from kerasseq.layers.feed_forward import FeedForward
from tests.helpers import check_layer


def _numpy_weights(layer):
    return [keras.ops.convert_to_numpy(w) for w in layer.weights]


@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_the_equation(norm_first):
    x = np.random.default_rng(0).normal(size=(2, 3, 6)).astype("float32")
    layer = FeedForward(d_model=6, dff=12, norm_first=norm_first)
    layer.build(x.shape)
    layer.layer_norm.set_weights([np.linspace(0.5, 1.5, 6), np.linspace(-0.1, 0.1, 6)])
    w1, b1 = _numpy_weights(layer.intermediate_dense)
    w2, b2 = _numpy_weights(layer.output_dense)
    gamma, beta = _numpy_weights(layer.layer_norm)

    def layer_norm(v):
        mean, variance = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mean) / np.sqrt(variance + 1e-5) * gamma + beta

    def ffn(v):
        return np.maximum(0.0, v @ w1 + b1) @ w2 + b2

    expected = x + ffn(layer_norm(x)) if norm_first else layer_norm(x + ffn(x))
    np.testing.assert_allclose(layer(x), expected, atol=1e-5)


def test_dropout_only_in_training():
    x = np.ones((2, 3, 6), "float32")
    layer = FeedForward(d_model=6, dff=12, dropout=0.5)
    np.testing.assert_allclose(layer(x), layer(x, training=False))
    assert not np.allclose(layer(x, training=True), layer(x))


@pytest.mark.parametrize(
    "init_kwargs",
    [
        {"d_model": 6, "dff": 12, "dropout": 0.1},
        {"d_model": 6, "dff": 12, "activation": "gelu", "norm_first": True},
    ],
)
def test_check_layer(init_kwargs):
    x = np.random.default_rng(1).normal(size=(2, 3, 6)).astype("float32")
    check_layer(FeedForward, init_kwargs, x)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="dff must be >= 1. Received: dff=0"):
        FeedForward(d_model=6, dff=0)
    with pytest.raises(ValueError, match="d_model=6"):
        FeedForward(d_model=6, dff=4)(np.zeros((1, 2, 5), "float32"))


def _padded_batch():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], bool)
    return x, mask, rng.normal(size=(3, 5, 6)).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
def test_skipping_padding_changes_no_real_output_or_gradient(norm_first):
    import tensorflow as tf

    x, mask, probe = _padded_batch()
    layer = FeedForward(d_model=6, dff=12, norm_first=norm_first)
    layer.build(x.shape)
    x = tf.constant(x)

    def run(skip_padding):
        layer.skip_padding = skip_padding
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, padding_mask=mask, training=True)
            # what a masked loss sees: real positions only
            loss = tf.reduce_sum(y * probe * mask[..., None])
        return np.asarray(y), tape.gradient(loss, [x] + layer.trainable_weights)

    skipped, skipped_gradients = run(True)
    full, full_gradients = run(False)
    np.testing.assert_allclose(skipped[mask], full[mask], atol=1e-6)
    # padding positions were not computed: they keep the input
    np.testing.assert_array_equal(skipped[~mask], np.asarray(x)[~mask])
    assert not np.allclose(full[~mask], np.asarray(x)[~mask])
    for skipped_gradient, full_gradient in zip(skipped_gradients, full_gradients, strict=True):
        np.testing.assert_allclose(skipped_gradient, full_gradient, atol=1e-5)


def test_padding_is_computed_in_inference_and_under_xla():
    import tensorflow as tf

    x, mask, _ = _padded_batch()
    layer = FeedForward(d_model=6, dff=12)
    full = np.asarray(layer(x))
    np.testing.assert_allclose(layer(x, padding_mask=mask), full, atol=1e-6)
    np.testing.assert_allclose(layer(x, padding_mask=mask, training=False), full, atol=1e-6)
    # XLA needs static shapes: the gather of real positions is not used there
    compiled = tf.function(lambda x: layer(x, padding_mask=mask, training=True), jit_compile=True)
    np.testing.assert_allclose(compiled(x), full, atol=1e-5)


def test_skipping_padding_under_mixed_precision():
    x, mask, _ = _padded_batch()
    layer = FeedForward(d_model=6, dff=12, dtype="mixed_float16")
    skipped = layer(x, padding_mask=mask, training=True)
    assert skipped.dtype == "float16"
    layer.skip_padding = False
    full = layer(x, padding_mask=mask, training=True)
    skipped, full = np.asarray(skipped, "float32"), np.asarray(full, "float32")
    assert np.all(np.isfinite(skipped))
    np.testing.assert_allclose(skipped[mask], full[mask], atol=1e-2)
