"""Greedy decoding against a NumPy reference and hand-computed toys."""

import functools
import math

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.decoding import greedy
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    PrefixTableModel,
    assert_xla_matches_graph_mode,
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
    assert_xla_matches_graph_mode(
        functools.partial(greedy, model.step_fn, model.initial_state(), 3, START_ID, END_ID),
        max_length=6)


def test_the_callers_function_traces_once_for_every_batch_size():
    # The decoders keep no compiled functions: the caller compiles (here with an
    # unknown batch size and batch_size=None, so one graph serves every size).
    model = PrefixTableModel(batch_size=8, vocab_size=5, seed=4)
    state = model.initial_state()
    specs = {name: tf.TensorSpec([None] + t.shape[1:].as_list(), t.dtype) for name, t in state.items()}

    @tf.function(input_signature=[specs])
    def run(state):
        return greedy(model.step_fn, state, None, START_ID, END_ID, max_length=5)

    expected = greedy(model.step_fn, state, 8, START_ID, END_ID, max_length=5)
    for size in (5, 6, 7, 8, 3):
        rows = {name: tensor[:size] for name, tensor in state.items()}
        token_ids, _, _ = run(rows)
        assert token_ids.shape == (size, 5)
        np.testing.assert_array_equal(token_ids, expected[0][:size])
    assert run.experimental_get_tracing_count() == 1


def test_docstring_examples_run():
    """The examples in the decoders' docstrings (direct calls with a step_fn) run."""
    import doctest
    import importlib

    for name in ("greedy", "beam_search", "sampling", "config"):
        module = importlib.import_module(f"kerasseq.decoding.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__
