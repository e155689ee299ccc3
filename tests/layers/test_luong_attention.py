import numpy as np
import pytest

from kerasseq.layers import LuongAttention
from tests.helpers import check_layer

# Seed 003's exercise: decoder state s_2 after "Le chat", encoder states h_1..h_4
S2 = np.array([[0.7, 0.8]], "float32")
H = np.array([[[0.1, 0.2], [0.8, 0.9], [0.5, 0.4], [0.3, 0.1]]], "float32")


def test_dot_scores_match_hand_computed_seed_example():
    attention = LuongAttention(score="dot")
    context, weights = attention(S2, H)
    scores = np.asarray(attention.score(S2, attention.precompute_keys(H)))[0]
    # e_i = s_2 · h_i: 0.07+0.16, 0.56+0.72, 0.35+0.32, 0.21+0.08
    np.testing.assert_allclose(scores, [0.23, 1.28, 0.67, 0.29], atol=1e-6)
    expected = np.exp(scores) / np.exp(scores).sum()
    np.testing.assert_allclose(np.asarray(weights)[0], expected, atol=1e-6)
    assert int(np.argmax(expected)) == 1  # "black" gets the most weight
    np.testing.assert_allclose(np.asarray(context)[0], expected @ H[0], atol=1e-6)


def test_general_with_identity_equals_dot():
    attention = LuongAttention(score="general")
    attention(S2, H)
    attention.set_weights([np.eye(2, dtype="float32")])
    _, weights = attention(S2, H)
    _, dot_weights = LuongAttention(score="dot")(S2, H)
    np.testing.assert_allclose(np.asarray(weights), np.asarray(dot_weights), atol=1e-6)


def test_mask_and_fully_masked_row():
    attention = LuongAttention(score="dot")
    mask = np.array([[True, False, True, False]])
    _, weights = attention(S2, H, mask)
    w = np.asarray(weights)[0]
    assert w[1] == 0 and w[3] == 0 and w.sum() == pytest.approx(1.0)
    context, weights = attention(S2, H, np.zeros((1, 4), bool))
    assert np.all(np.asarray(weights) == 0) and np.all(np.asarray(context) == 0)


def test_dot_with_mismatched_sizes_is_a_clear_error():
    with pytest.raises(ValueError, match="score='general'"):
        LuongAttention(score="dot")(np.zeros((1, 3)), H)


def test_bad_score_name():
    with pytest.raises(ValueError, match="score"):
        LuongAttention(score="cosine")
    with pytest.raises(ValueError, match="units"):
        LuongAttention(score="concat")


@pytest.mark.parametrize("score, units", [("dot", None), ("general", None), ("concat", 5)])
def test_layer_contract(score, units):
    rng = np.random.default_rng(2)
    check_layer(LuongAttention, dict(score=score, units=units),
                [rng.normal(size=(2, 4)).astype("float32"),
                 rng.normal(size=(2, 3, 4)).astype("float32"),
                 np.array([[True, True, False], [True, True, True]])],
                fit=score != "dot")


@pytest.mark.parametrize("score, units", [("dot", None), ("general", None), ("concat", 5)])
def test_mixed_float16_layer_policy_matches_float32(score, units):
    # A per-layer policy (the global one stays float32) reaches the Dense layers
    # made in build(); a fully masked row still gives zeros in float16, never NaN.
    rng = np.random.default_rng(3)
    query = rng.normal(size=(3, 4)).astype("float32")
    values = rng.normal(size=(3, 3, 4)).astype("float32")
    mask = np.array([[True, True, False], [True, True, True], [False, False, False]])
    reference = LuongAttention(score=score, units=units)
    expected = [np.asarray(x) for x in reference(query, values, mask)]
    attention = LuongAttention(score=score, units=units, dtype="mixed_float16")
    attention(query, values, mask)
    attention.set_weights(reference.get_weights())
    outputs = attention(query, values, mask)
    if attention.key_dense is not None:
        assert attention.key_dense.compute_dtype == "float16"
    for output, reference_output in zip(outputs, expected, strict=True):
        assert output.dtype == "float16" and np.all(np.isfinite(np.asarray(output)))
        np.testing.assert_allclose(np.asarray(output, "float32"), reference_output, atol=1e-2)
    assert np.all(np.asarray(outputs[1])[2] == 0)
