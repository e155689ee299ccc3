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


def test_padding_changes_nothing():
    # the network is position-wise: every position is computed on its own,
    # in training as in inference, so the values at padded positions do not
    # reach the real ones
    x = np.random.default_rng(2).normal(size=(3, 5, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], bool)
    layer = FeedForward(d_model=6, dff=12)
    full = np.asarray(layer(x))
    changed = np.where(mask[..., None], x, 9.0).astype("float32")
    for training in (None, False, True):
        outputs = np.asarray(layer(changed, training=training))
        np.testing.assert_allclose(outputs[mask], full[mask], atol=1e-6)
