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
    cache = layer.build_cache(context=value)
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
    expected_key, _ = layer.build_cache(context=x)
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


def test_zero_cache_and_one_build_cache_signature():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    x = np.ones((2, 1, 8), "float32")
    layer.build(x.shape, x.shape)
    key_cache, value_cache = layer.build_cache(batch_size=2, max_length=5)
    assert tuple(key_cache.shape) == (2, 5, 2, 4) and tuple(value_cache.shape) == (2, 5, 2, 3)
    assert not np.asarray(key_cache).any() and not np.asarray(value_cache).any()
    with pytest.raises(ValueError, match="batch_size and max_length"):
        layer.build_cache(batch_size=2)
    with pytest.raises(ValueError, match="not both"):
        layer.build_cache(batch_size=2, max_length=5, context=x)


@pytest.mark.parametrize("with_padding", [False, True])
def test_causal_mask_and_keras_masks_match_keras(with_padding):
    """`use_causal_mask` and the `value_mask` Keras fills from a masked input."""
    rng = np.random.default_rng(6)
    query = rng.normal(size=(2, 5, 8)).astype("float32")
    padding = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool) if with_padding else None
    ours = MultiHeadAttention(num_heads=2, key_dim=4)
    ours(query, query)
    reference = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    reference(query, query)
    reference.set_weights(ours.get_weights())
    kwargs = dict(use_causal_mask=True, return_attention_scores=True)
    if with_padding:
        kwargs["value_mask"] = padding
    output, scores = ours(query, query, **kwargs)
    ref_output, ref_scores = reference(query, query, **kwargs)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-6)
    np.testing.assert_allclose(output, ref_output, atol=1e-5)
    assert not np.asarray(scores)[:, :, 0, 1:].any()  # query 0 sees key 0 only


def test_heads_match_the_reference_equation():
    """`attend` on projected heads = softmax(Q K^T / sqrt(d_k)) V of the reference, then W^O."""
    rng = np.random.default_rng(8)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    value = rng.normal(size=(2, 4, 8)).astype("float32")
    mask = _random_mask((2, 3, 4), rng)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    output, weights = layer(query, value, attention_mask=mask, return_attention_scores=True)
    q, k, v = (keras.ops.transpose(dense(t), (0, 2, 1, 3)) for dense, t in (
        (layer.query_dense, query), (layer.key_dense, value), (layer.value_dense, value)))
    heads, expected_weights = scaled_dot_product_attention(q, k, v, mask=mask[:, None])
    expected = layer.output_dense(keras.ops.transpose(heads, (0, 2, 1, 3)))
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_mixed_precision_matches_float32():
    """Under `mixed_float16` the weights (softmax in float32, cast back) and the
    output are float16 and agree with the float32 layer; a padded key gets 0."""
    rng = np.random.default_rng(9)
    query, value = (rng.normal(size=(2, n, 8)).astype("float32") for n in (3, 4))
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)[:, None, :]
    layers = [MultiHeadAttention(num_heads=2, key_dim=4, dtype=d)
              for d in ("float32", "mixed_float16")]
    layers[0](query, value)
    layers[1](query, value)
    layers[1].set_weights(layers[0].get_weights())
    (output, weights), (half_output, half_weights) = (
        layer(query, value, attention_mask=mask, return_attention_scores=True) for layer in layers)
    assert half_weights.dtype == "float16" and half_output.dtype == "float16"
    np.testing.assert_allclose(np.asarray(half_weights, "float32"), weights, atol=2e-3)
    np.testing.assert_allclose(np.asarray(half_output, "float32"), output, atol=1e-2)
    assert not np.asarray(half_weights)[0, :, :, 3].any()


def test_inputs_must_be_sequences():
    with pytest.raises(ValueError, match=r"query must be \(batch_size, length, width\)"):
        MultiHeadAttention(num_heads=1, key_dim=4)(np.ones((1, 2, 3, 4)), np.ones((1, 2, 3, 4)))


def test_symbolic_call_gives_cross_attention_shapes():
    """The explicit output spec: scores `(batch_size, num_heads, target_length, source_length)`."""
    query, value = keras.Input((3, 8)), keras.Input((5, 6))
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    output, scores = layer(query, value, return_attention_scores=True)
    assert tuple(output.shape) == (None, 3, 8) and tuple(scores.shape) == (None, 2, 3, 5)
    output = MultiHeadAttention(num_heads=2, key_dim=4, output_dim=7)(query, value)
    assert tuple(output.shape) == (None, 3, 7)
