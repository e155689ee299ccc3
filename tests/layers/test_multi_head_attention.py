"""Tests for kerasseq.layers.multi_head_attention: the attention equation, the
multi-head core against keras.layers.MultiHeadAttention, and the key/value cache."""

import keras
import numpy as np
import pytest

from kerasseq.layers.base_attention import resolve_key_dim
from kerasseq.layers.multi_head_attention import MultiHeadAttention
from tests.helpers import check_layer
from tests.layers.references import scaled_dot_product_attention


def _numpy_attention(query, key, value, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V written with numpy loops over nothing fancy."""
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ value, weights


def _random_mask(shape, rng):
    mask = rng.random(shape) > 0.4
    mask[..., 0] = True  # every query row sees at least one key
    return mask


def test_scaled_dot_product_attention_matches_numpy():
    rng = np.random.default_rng(0)
    query = rng.normal(size=(2, 3, 4, 8)).astype("float32")
    key = rng.normal(size=(2, 3, 6, 8)).astype("float32")
    value = rng.normal(size=(2, 3, 6, 5)).astype("float32")
    mask = _random_mask((2, 1, 4, 6), rng)
    for m in (None, mask):
        output, weights = scaled_dot_product_attention(query, key, value, mask=m)
        expected_output, expected_weights = _numpy_attention(query, key, value, m)
        np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
        np.testing.assert_allclose(output, expected_output, atol=1e-5)


def test_fully_masked_rows_give_zeros_not_nan_in_float16():
    query = np.ones((1, 1, 2, 4), "float16") * 50.0  # large scores
    key = np.ones((1, 1, 3, 4), "float16") * 50.0
    value = np.ones((1, 1, 3, 4), "float16")
    mask = np.array([[[[True, False, True], [False, False, False]]]])
    output, weights = scaled_dot_product_attention(query, key, value, mask=mask)
    output, weights = (
        keras.ops.convert_to_numpy(output),
        keras.ops.convert_to_numpy(weights),
    )
    assert output.dtype == np.float16 and np.isfinite(output).all()
    np.testing.assert_allclose(weights[0, 0, 0], [0.5, 0.0, 0.5], atol=1e-3)
    np.testing.assert_array_equal(weights[0, 0, 1], 0.0)
    np.testing.assert_array_equal(output[0, 0, 1], 0.0)


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_matches_keras_with_copied_weights(masked):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(3, 4, 16)).astype("float32")
    value = rng.normal(size=(3, 7, 16)).astype("float32")
    mask = _random_mask((3, 4, 7), rng) if masked else None

    ours = MultiHeadAttention(num_heads=4, key_dim=8)
    ours(query, value)
    reference = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)
    reference(query, value)
    assert [w.shape for w in ours.get_weights()] == [
        w.shape for w in reference.get_weights()
    ]
    reference.set_weights(ours.get_weights())

    output, scores = ours(
        query, value, attention_mask=mask, return_attention_scores=True
    )
    ref_output, ref_scores = reference(
        query, value, attention_mask=mask, return_attention_scores=True
    )
    np.testing.assert_allclose(output, ref_output, atol=1e-5)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)


def test_separate_key_input_matches_keras():
    rng = np.random.default_rng(2)
    query, key, value = (
        rng.normal(size=(2, n, 8)).astype("float32") for n in (3, 5, 5)
    )
    ours = MultiHeadAttention(num_heads=2, key_dim=4)
    ours(query, value, key=key)
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(query, value, key=key)
    reference.set_weights(ours.get_weights())
    np.testing.assert_allclose(
        ours(query, value, key=key), reference(query, value, key=key), atol=1e-5
    )


def test_gated_attention_matches_keras():
    """`use_gate=True` (Keras' gated attention): the re-implemented `call` reads
    Keras' private `_use_gate` / `_gate_dense` (docs/design.md) as Keras' own does."""
    rng = np.random.default_rng(3)
    query, value = (rng.normal(size=(2, n, 8)).astype("float32") for n in (3, 5))
    ours = MultiHeadAttention(num_heads=2, key_dim=4, use_gate=True)
    ours(query, value)
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, use_gate=True)
    reference(query, value)
    assert len(ours.get_weights()) == len(reference.get_weights()) == 10  # the gate's kernel, bias
    reference.set_weights(ours.get_weights())
    np.testing.assert_allclose(ours(query, value), reference(query, value), atol=1e-5)
    ungated = MultiHeadAttention(num_heads=2, key_dim=4)
    ungated(query, value)
    weights = ours.get_weights()  # query, key, gate, value, output: kernel and bias each
    ungated.set_weights(weights[:4] + weights[6:])  # the same projections without the gate
    assert not np.allclose(ours(query, value), ungated(query, value), atol=1e-3)


def test_static_cache_equals_plain_call():
    rng = np.random.default_rng(3)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    value = rng.normal(size=(2, 5, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    expected = layer(query, value)
    cache = layer.build_cache(value)
    assert tuple(cache[0].shape) == (2, 5, 2, 4)
    output, returned_cache, _ = layer.call_step(query, None, cache)
    np.testing.assert_allclose(output, expected, atol=1e-6)
    np.testing.assert_array_equal(returned_cache[0], cache[0])
    np.testing.assert_array_equal(returned_cache[1], cache[1])


def test_cache_update_writes_one_position():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 1, 8)).astype("float32")
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    layer.build(x.shape, x.shape)
    zeros = np.zeros((2, 6, 2, 4), "float32")
    _, (key_cache, value_cache), _ = layer.call_step(x, 3, (zeros, zeros))
    key_cache = keras.ops.convert_to_numpy(key_cache)
    expected_key, _ = layer.build_cache(x)
    np.testing.assert_allclose(key_cache[:, 3:4], expected_key, atol=1e-6)
    assert not key_cache[:, [0, 1, 2, 4, 5]].any()


def test_check_layer():
    rng = np.random.default_rng(5)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    value = rng.normal(size=(2, 5, 8)).astype("float32")
    check_layer(MultiHeadAttention, {"num_heads": 2, "key_dim": 4}, [query, value])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model=10, num_heads=3"):
        resolve_key_dim(10, 3)
    with pytest.raises(ValueError, match="num_heads must be >= 1"):
        MultiHeadAttention(num_heads=0, key_dim=4)
    layer = MultiHeadAttention(num_heads=1, key_dim=4)
    x = np.zeros((1, 2, 4), "float32")
    with pytest.raises(ValueError, match="value and key must be None"):
        layer.call_step(x, None, (x, x), value=x)
