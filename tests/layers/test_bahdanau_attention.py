import numpy as np
import pytest

from kerasseq.layers import BahdanauAttention
from tests.helpers import check_layer


def test_additive_score_matches_hand_computed_values():
    # units = 1, W_1 = [1, 1], W_2 = [1, -1], b = 0, v = 1:
    # e_i = tanh((s1 + s2) + (h_i1 - h_i2))
    attention = BahdanauAttention(units=1)
    s = np.array([[0.7, 0.8]], "float32")
    h = np.array([[[0.1, 0.2], [0.8, 0.9], [0.5, 0.4], [0.3, 0.1]]], "float32")
    attention(s, h)
    attention.query_dense.set_weights([np.array([[1.0], [1.0]], "float32")])
    attention.key_dense.set_weights([np.array([[1.0], [-1.0]], "float32"), np.zeros(1, "float32")])
    attention.score_dense.set_weights([np.ones((1, 1), "float32")])
    context, weights = attention(s, h)
    scores = np.tanh(1.5 + np.array([-0.1, -0.1, 0.1, 0.2]))
    expected = np.exp(scores) / np.exp(scores).sum()
    np.testing.assert_allclose(np.asarray(weights)[0], expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(context)[0], expected @ h[0], atol=1e-6)


def test_random_weights_match_numpy():
    rng = np.random.default_rng(3)
    attention = BahdanauAttention(units=6)
    query = rng.normal(size=(2, 5)).astype("float32")
    values = rng.normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    attention(query, values, mask)
    # a non-zero bias b (Keras starts it at zero), so that the score shows it
    attention.key_dense.bias.assign(rng.normal(size=6).astype("float32"))
    context, weights = attention(query, values, mask)
    w1 = attention.query_dense.get_weights()[0]
    w2, b2 = attention.key_dense.get_weights()
    assert np.abs(b2).min() > 0
    v = attention.score_dense.get_weights()[0]
    scores = (np.tanh((query @ w1)[:, None, :] + values @ w2 + b2) @ v)[..., 0]  # v^T tanh(W1 s + W2 h + b)
    np.testing.assert_allclose(np.asarray(attention.score(query, attention.precompute_keys(values))),
                               scores, atol=1e-5)
    scores = np.where(mask, scores, -np.inf)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(weights), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(context), np.einsum("bs,bsd->bd", expected, values), atol=1e-6)


def test_precomputed_keys_give_the_same_result():
    rng = np.random.default_rng(4)
    attention = BahdanauAttention(units=6)
    query, values = rng.normal(size=(2, 5)), rng.normal(size=(2, 4, 3))
    a = attention(query, values)
    b = attention(query, values, keys=attention.precompute_keys(values))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-7)


def test_fully_masked_row_gives_zeros_not_nan():
    attention = BahdanauAttention(units=4)
    context, weights = attention(np.ones((1, 2)), np.ones((1, 3, 2)), np.zeros((1, 3), bool))
    assert np.all(np.asarray(weights) == 0) and np.all(np.asarray(context) == 0)


def test_layer_contract():
    rng = np.random.default_rng(5)
    check_layer(BahdanauAttention, dict(units=4),
                [rng.normal(size=(2, 5)).astype("float32"),
                 rng.normal(size=(2, 3, 6)).astype("float32"),
                 np.array([[True, True, False], [True, True, True]])])


def test_bad_units():
    with pytest.raises(ValueError, match="units"):
        BahdanauAttention(units=0)


def test_mixed_float16_layer_policy_matches_float32():
    # A per-layer policy (the global one stays float32) reaches the scoring MLP;
    # a fully masked row still gives zeros in float16, never NaN.
    rng = np.random.default_rng(6)
    query = rng.normal(size=(3, 5)).astype("float32")
    values = rng.normal(size=(3, 4, 6)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], bool)
    reference = BahdanauAttention(units=4)
    expected = [np.asarray(x) for x in reference(query, values, mask)]
    attention = BahdanauAttention(units=4, dtype="mixed_float16")
    attention(query, values, mask)
    attention.set_weights(reference.get_weights())
    outputs = attention(query, values, mask)
    assert attention.score_dense.compute_dtype == "float16"
    for output, reference_output in zip(outputs, expected, strict=True):
        assert output.dtype == "float16" and np.all(np.isfinite(np.asarray(output)))
        np.testing.assert_allclose(np.asarray(output, "float32"), reference_output, atol=1e-2)
    assert np.all(np.asarray(outputs[1])[2] == 0)
