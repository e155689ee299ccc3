import numpy as np
import pytest

from kerasseq.layers import Bridge
from tests.helpers import check_layer


def test_bridge_is_tanh_of_affine_map():
    bridge = Bridge(units=3)
    x = np.random.default_rng(0).normal(size=(2, 5)).astype("float32")
    out = np.asarray(bridge(x))
    kernel, bias = bridge.get_weights()
    np.testing.assert_allclose(out, np.tanh(x @ kernel + bias), atol=1e-6)
    assert np.all(np.abs(out) < 1)


def test_layer_contract():
    check_layer(Bridge, dict(units=4), np.random.default_rng(1).normal(size=(3, 6)).astype("float32"))


def test_bad_units():
    with pytest.raises(ValueError, match="units"):
        Bridge(units=0)


def test_mixed_float16_layer_policy_matches_float32():
    x = np.random.default_rng(2).normal(size=(3, 6)).astype("float32")
    reference = Bridge(units=4)
    expected = np.asarray(reference(x))
    bridge = Bridge(units=4, dtype="mixed_float16")  # the global policy stays float32
    bridge(x)
    bridge.set_weights(reference.get_weights())
    output = bridge(x)
    assert bridge.dense.compute_dtype == "float16" and output.dtype == "float16"
    np.testing.assert_allclose(np.asarray(output, "float32"), expected, atol=1e-2)
