"""Greedy decoding against a NumPy reference and hand-computed toys."""

import math

import numpy as np
import pytest

from kerasseq.decoding import bucket_size, greedy, pad_state, trace_count
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    PrefixTableModel,
    early_end_model,
    reference_greedy,
    sheep_ship_model,
    unpad,
)


@pytest.mark.parametrize("min_length", [0, 3])
def test_matches_numpy_reference(min_length):
    model = PrefixTableModel(batch_size=5, vocab_size=6, seed=min_length, end_bias=1.0)
    token_ids, scores, lengths = greedy(
        model.step_fn, model.initial_state(), 5, START_ID, END_ID, max_length=7,
        min_length=min_length,
    )
    assert token_ids.dtype == "int32" and token_ids.shape == (5, 7)
    assert scores.dtype == "float32" and lengths.dtype == "int32"
    for row in range(5):
        tokens, log_prob = reference_greedy(model, row, 7, min_length)
        assert unpad(token_ids[row], int(lengths[row])) == tokens
        np.testing.assert_allclose(scores[row], log_prob, rtol=1e-5, atol=1e-5)
        assert lengths[row] >= min_length


def test_sheep_ship_greedy_takes_the_locally_best_word():
    model, vocabulary = sheep_ship_model()
    token_ids, scores, lengths = greedy(
        model.step_fn, model.initial_state(), 1, start_id=1, end_id=2, max_length=5
    )
    assert [vocabulary[t] for t in token_ids[0, : lengths[0]]] == ["sheep", "passed"]
    # log(0.6) + log(0.55) + log(1.0): the end token's log-probability is included.
    np.testing.assert_allclose(scores[0], math.log(0.33), rtol=1e-6)


def test_end_token_counts_in_score_not_in_length():
    model = early_end_model()
    token_ids, scores, lengths = greedy(model.step_fn, model.initial_state(), 1, 0, 1, max_length=4)
    assert lengths.numpy().tolist() == [0]
    assert not token_ids.numpy().any()
    np.testing.assert_allclose(scores[0], math.log(0.6), rtol=1e-6)


def test_min_length_and_max_length():
    model = early_end_model()
    state = model.initial_state()
    token_ids, scores, lengths = greedy(model.step_fn, state, 1, 0, 1, max_length=4, min_length=1)
    assert token_ids.numpy()[0].tolist() == [2, 3, 0, 0]
    # The end token was banned at step 0, but P(a) stays 0.4: no renormalisation.
    np.testing.assert_allclose(scores[0], math.log(0.4 * 0.9), rtol=1e-6)

    sheep, _ = sheep_ship_model()
    token_ids, scores, lengths = greedy(sheep.step_fn, sheep.initial_state(), 1, 1, 2, max_length=1)
    assert token_ids.numpy().tolist() == [[3]] and lengths.numpy().tolist() == [1]
    np.testing.assert_allclose(scores[0], math.log(0.6), rtol=1e-6)


def test_xla_matches_graph_mode():
    model = PrefixTableModel(batch_size=3, vocab_size=5, seed=8, end_bias=0.5)
    plain = greedy(model.step_fn, model.initial_state(), 3, START_ID, END_ID, max_length=6)
    compiled = greedy(
        model.step_fn, model.initial_state(), 3, START_ID, END_ID, max_length=6, jit_compile=True
    )
    np.testing.assert_array_equal(plain[0], compiled[0])
    np.testing.assert_array_equal(plain[2], compiled[2])
    np.testing.assert_allclose(plain[1], compiled[1], rtol=1e-5)


def test_traces_once_per_shape_and_buckets_batch_sizes():
    model = PrefixTableModel(batch_size=8, vocab_size=5, seed=4)
    state = model.initial_state()
    greedy(model.step_fn, state, 8, START_ID, END_ID, max_length=5)
    traces = trace_count("greedy")
    greedy(model.step_fn, state, 8, START_ID, END_ID, max_length=5)
    assert trace_count("greedy") == traces

    for size in (5, 6, 7, 8):  # all pad to 8 rows
        rows = {name: tensor[:size] for name, tensor in state.items()}
        token_ids, _, _ = greedy(
            model.step_fn, rows, size, START_ID, END_ID, max_length=5, batch_buckets="pow2"
        )
        assert token_ids.shape == (size, 5)
    assert trace_count("greedy") == traces


def test_bucket_helpers():
    assert [bucket_size(n) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]
    assert bucket_size(5, buckets=(4, 16, 64)) == 16
    assert bucket_size(100, buckets=(4, 16, 64)) == 100
    padded = pad_state({"x": np.arange(6).reshape(3, 2)}, 3, 4)
    assert padded["x"].numpy().tolist() == [[0, 1], [2, 3], [4, 5], [0, 1]]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_length": 0}, "max_length must be >= 1. Received: max_length=0"),
        ({"min_length": 5}, "min_length must be <= max_length=4. Received: min_length=5"),
        ({"batch_size": 0}, "batch_size must be >= 1. Received: batch_size=0"),
        ({"end_id": -1}, "end_id must be >= 0. Received: end_id=-1"),
    ],
)
def test_invalid_arguments_are_named(kwargs, message):
    model = early_end_model()
    arguments = dict(batch_size=1, start_id=0, end_id=1, max_length=4)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        greedy(model.step_fn, model.initial_state(), **arguments)


def test_state_rows_must_match_batch_size():
    model = early_end_model(batch_size=2)
    with pytest.raises(ValueError, match=r"batch_size=3 rows. Received: state\['unused'\]"):
        greedy(model.step_fn, model.initial_state(), 3, 0, 1, max_length=4)
