"""Beam search against brute-force enumeration, a plain-Python reference search
and hand-computed toys."""

import functools
import math

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.decoding import beam_search, greedy
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    MarkovTableModel,
    PrefixTableModel,
    assert_xla_matches_graph_mode,
    brute_force,
    early_end_model,
    reference_beam_search,
    reference_greedy,
    sheep_ship_model,
    unpad,
)


def run_beam(model, **kwargs):
    kwargs.setdefault("batch_size", model.batch_size)
    outputs = beam_search(
        model.step_fn, model.initial_state(), start_id=START_ID, end_id=END_ID,
        return_log_probs=True, **kwargs,
    )
    return [np.asarray(output) for output in outputs]


def assert_matches(outputs, row, expected):
    """Returned n-best of `row` equals `expected` [(score, log_prob, tokens)]."""
    token_ids, scores, lengths, log_probs = outputs
    for rank, (score, log_prob, tokens) in enumerate(expected):
        assert unpad(token_ids[row, rank], lengths[row, rank]) == tokens, (row, rank)
        np.testing.assert_allclose(scores[row, rank], score, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(log_probs[row, rank], log_prob, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- exactness


@pytest.mark.parametrize(
    "seed, vocab_size, max_length, alpha, min_length",
    [
        (0, 4, 4, 0.0, 0),
        (1, 4, 4, 0.6, 0),
        (2, 5, 3, 1.5, 0),
        (3, 4, 4, 0.0, 2),
    ],
)
def test_exhaustive_beam_equals_brute_force(seed, vocab_size, max_length, alpha, min_length):
    # With num_beams >= vocab_size ** (max_length - 1) every prefix stays alive and
    # every candidate enters the top 2 * num_beams: the search is exhaustive, so the
    # n-best list must be the exact top-n of all sequences.
    model = PrefixTableModel(batch_size=3, vocab_size=vocab_size, seed=seed, end_bias=0.5)
    num_beams = vocab_size ** (max_length - 1)
    outputs = run_beam(
        model, num_beams=num_beams, max_length=max_length, min_length=min_length,
        length_penalty=alpha, num_return=5,
    )
    for row in range(model.batch_size):
        expected = brute_force(model, row, max_length, min_length, alpha)[:5]
        assert_matches(outputs, row, expected)


@pytest.mark.parametrize(
    "num_beams, alpha, min_length, num_return",
    [(1, 0.0, 0, 1), (2, 0.0, 0, 2), (3, 0.8, 0, 2), (2, 0.6, 2, 1), (4, 1.2, 1, 4)],
)
def test_small_beams_match_reference_search(num_beams, alpha, min_length, num_return):
    # The reference runs every step to max_length (no early stop) and keeps every
    # finished hypothesis, so agreement also shows the early stop loses nothing.
    model = PrefixTableModel(batch_size=3, vocab_size=6, seed=10 + num_beams, end_bias=0.3)
    max_length = 6
    outputs = run_beam(
        model, num_beams=num_beams, max_length=max_length, min_length=min_length,
        length_penalty=alpha, num_return=num_return,
    )
    for row in range(model.batch_size):
        expected = reference_beam_search(model, row, num_beams, max_length, min_length, alpha)
        assert_matches(outputs, row, expected[:num_return])


# ---------------------------------------------------------------- worked toys


def test_sheep_ship_beam_finds_what_greedy_misses():
    model, vocabulary = sheep_ship_model()
    state = model.initial_state()
    start, end = vocabulary.index("[start]"), vocabulary.index("[end]")

    token_ids, scores, lengths = greedy(model.step_fn, state, 1, start, end, max_length=5)
    assert [vocabulary[t] for t in token_ids[0, : lengths[0]]] == ["sheep", "passed"]
    np.testing.assert_allclose(scores[0], math.log(0.6 * 0.55), rtol=1e-6)

    token_ids, scores, lengths = beam_search(
        model.step_fn, state, 1, start, end, num_beams=2, max_length=5
    )
    assert [vocabulary[t] for t in token_ids[0, 0, : lengths[0, 0]]] == ["ship", "passed"]
    np.testing.assert_allclose(scores[0, 0], math.log(0.4 * 0.9), rtol=1e-6)


def test_early_end_wins_with_true_log_probabilities():
    model = early_end_model()
    token_ids, scores, lengths, log_probs = run_beam(model, num_beams=2, max_length=5, num_return=2)
    assert lengths[0].tolist() == [0, 2]
    assert unpad(token_ids[0, 1], 2) == (2, 3)
    np.testing.assert_allclose(scores[0], [math.log(0.6), math.log(0.36)], rtol=1e-6)
    np.testing.assert_allclose(log_probs[0], scores[0])
    assert not token_ids[0, 0].any()


def test_keras_hub_beam_sampler_prefers_the_longer_hypothesis():
    # Documents the difference from keras-hub. After [end] this model spreads its
    # probability evenly, which must not matter: the hypothesis is over. keras-hub's
    # BeamSampler keeps scoring beams after [end] ("[end] x" = 0.6 * 0.25 = 0.15)
    # and returns "a b [end]" (0.36); beam_search returns the empty output (0.6).
    keras_hub = pytest.importorskip("keras_hub")
    probabilities = early_end_model().probabilities.copy()
    probabilities[END_ID] = 0.25
    model = MarkovTableModel(probabilities)

    token_ids, scores, lengths, _ = run_beam(model, num_beams=2, max_length=3)
    assert lengths[0, 0] == 0
    np.testing.assert_allclose(scores[0, 0], math.log(0.6), rtol=1e-6)

    table = tf.constant(np.maximum(model.log_table, -1e9), tf.float32)

    def next_fn(prompt, cache, index):
        return tf.gather(table, prompt[:, index - 1]), None, cache

    prompt = tf.constant([[START_ID, 0, 0, 0]], tf.int32)
    try:
        sampler = keras_hub.samplers.BeamSampler(num_beams=2)
        output = sampler(next_fn, prompt, index=1, stop_token_ids=[END_ID])
    except (TypeError, AttributeError, ValueError) as error:  # API drift
        pytest.skip(f"keras_hub BeamSampler API differs: {error}")
    assert np.asarray(output)[0, 1:].tolist() == [2, 3, END_ID]


def test_length_penalty_counts_the_end_token():
    # s = log P / ((5 + |Y|) / 6) ** alpha with |Y| = 1 for "[end]", 3 for "a b [end]".
    model = early_end_model()
    alpha = 5.0
    token_ids, scores, lengths, log_probs = run_beam(
        model, num_beams=2, max_length=5, num_return=2, length_penalty=alpha
    )
    long_score = math.log(0.36) / (8 / 6) ** alpha
    empty_score = math.log(0.6) / (6 / 6) ** alpha
    assert long_score > empty_score
    assert lengths[0].tolist() == [2, 0]
    np.testing.assert_allclose(scores[0], [long_score, empty_score], rtol=1e-5)
    np.testing.assert_allclose(log_probs[0], [math.log(0.36), math.log(0.6)], rtol=1e-5)


def test_min_length_forbids_early_end_without_renormalising():
    model = early_end_model()
    token_ids, scores, lengths, log_probs = run_beam(
        model, num_beams=2, max_length=5, min_length=1, num_return=2
    )
    assert lengths[0].tolist() == [2, 1]
    np.testing.assert_allclose(log_probs[0], [math.log(0.36), math.log(0.04)], rtol=1e-5)


def test_max_length_finishes_hypotheses_as_they_are():
    model, vocabulary = sheep_ship_model()
    token_ids, scores, lengths = beam_search(
        model.step_fn, model.initial_state(), 1, 1, 2, num_beams=2, max_length=2,
        num_return=2,
    )
    assert lengths.numpy().tolist() == [[2, 2]]
    assert token_ids.shape == (1, 2, 2)
    assert [vocabulary[t] for t in token_ids[0, 0]] == ["ship", "passed"]
    np.testing.assert_allclose(scores[0], np.log([0.36, 0.33]), rtol=1e-6)


@pytest.mark.parametrize("min_length", [0, 2])
def test_one_beam_is_exactly_greedy(min_length):
    # end_bias makes [end] the runner-up at many steps: a 2-candidate single beam
    # would keep it as a finished hypothesis; one beam must follow greedy exactly.
    model = PrefixTableModel(batch_size=4, vocab_size=6, seed=5, end_bias=0.5)
    state = model.initial_state()
    greedy_ids, greedy_scores, greedy_lengths = greedy(
        model.step_fn, state, 4, START_ID, END_ID, max_length=6, min_length=min_length
    )
    beam_ids, beam_scores, beam_lengths = beam_search(
        model.step_fn, state, 4, START_ID, END_ID, num_beams=1, max_length=6,
        min_length=min_length,
    )
    np.testing.assert_array_equal(beam_ids.numpy()[:, 0], greedy_ids.numpy())
    np.testing.assert_array_equal(beam_lengths.numpy()[:, 0], greedy_lengths.numpy())
    np.testing.assert_allclose(beam_scores.numpy()[:, 0], greedy_scores.numpy(), rtol=1e-6)
    for row in range(4):  # and greedy is what an independent loop finds
        expected_tokens, _ = reference_greedy(model, row, 6, min_length)
        assert unpad(greedy_ids.numpy()[row], greedy_lengths.numpy()[row]) == expected_tokens


# ---------------------------------------------------------------- coverage


class AttentionModel(MarkovTableModel):
    """Vocabulary 0 [start], 1 [end], 2 x, 3 y; P(x) = 0.55, P(y) = 0.45, then [end].

    Attention over 3 source positions (the last one padding) depends on the fed
    token: [start] and x look at position 0, y looks at position 1.
    """

    ATTENTION = np.array([[0.9, 0.1, 0.0], [0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [0.1, 0.9, 0.0]])

    def __init__(self):
        probabilities = np.zeros((4, 4))
        probabilities[:, END_ID] = 1.0
        probabilities[START_ID] = [0.0, 0.0, 0.55, 0.45]
        super().__init__(probabilities)
        self._attention = tf.constant(self.ATTENTION, tf.float32)

    def initial_state(self):
        return {
            "attention_weights": tf.zeros([1, 3], tf.float32),
            "source_mask": tf.constant([[True, True, False]]),
        }

    def step_fn(self, token_ids, state, step):
        logits, _ = super().step_fn(token_ids, state, step)
        return logits, dict(state, attention_weights=tf.gather(self._attention, token_ids))


def test_coverage_penalty_prefers_the_hypothesis_that_covers_the_source():
    model = AttentionModel()
    _, scores, _ = run_beam(model, num_beams=2, max_length=4, num_return=2)[:3]
    np.testing.assert_allclose(scores[0], np.log([0.55, 0.45]), rtol=1e-6)

    token_ids, scores, lengths, log_probs = run_beam(
        model, num_beams=2, max_length=4, num_return=2, coverage_penalty=1.0
    )
    # "y": coverage [0.9 + 0.1, 0.1 + 0.9] = [1, 1] -> cp = 0.
    # "x": coverage [0.9 + 0.9, 0.1 + 0.1] = [1.8, 0.2] -> cp = log 1 + log 0.2.
    # The padded third position (coverage 0) is ignored thanks to the source mask.
    assert token_ids[0, :, 0].tolist() == [3, 2]
    np.testing.assert_allclose(
        scores[0], [math.log(0.45), math.log(0.55) + math.log(0.2)], rtol=1e-5
    )
    np.testing.assert_allclose(log_probs[0], np.log([0.45, 0.55]), rtol=1e-5)


def test_coverage_penalty_needs_attention_weights():
    model = early_end_model()
    with pytest.raises(ValueError, match="coverage_penalty=0.5"):
        beam_search(model.step_fn, model.initial_state(), 1, 0, 1, coverage_penalty=0.5)


# ---------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_beams": 0}, "num_beams must be >= 1. Received: num_beams=0"),
        ({"num_beams": 2, "num_return": 3}, "num_return must be <= num_beams=2. Received: num_return=3"),
        ({"num_return": 0}, "num_return must be >= 1. Received: num_return=0"),
        ({"max_length": 0}, "max_length must be >= 1. Received: max_length=0"),
        ({"max_length": 3, "min_length": 4}, "min_length must be <= max_length=3. Received: min_length=4"),
        ({"min_length": -1}, "min_length must be >= 0. Received: min_length=-1"),
        ({"length_penalty": -0.5}, "length_penalty must be a finite float >= 0. Received: length_penalty=-0.5"),
        ({"coverage_penalty": -1.0}, "coverage_penalty must be a finite float >= 0. Received: coverage_penalty=-1.0"),
        ({"batch_size": 2}, "batch_size=2 rows"),
    ],
)
def test_invalid_arguments_are_named(kwargs, message):
    model = early_end_model()
    arguments = dict(batch_size=1, start_id=0, end_id=1, max_length=4)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        beam_search(model.step_fn, model.initial_state(), **arguments)


# ---------------------------------------------------------------- compilation


def test_xla_matches_graph_mode():
    model = PrefixTableModel(batch_size=2, vocab_size=5, seed=21, end_bias=0.3)
    assert_xla_matches_graph_mode(functools.partial(run_beam, model), num_beams=3, max_length=5,
                                  length_penalty=0.6, num_return=2)


def test_the_callers_function_is_traced_once_per_shape():
    # The decoders keep no compiled functions: the caller's tf.function is reused.
    model = PrefixTableModel(batch_size=4, vocab_size=5, seed=3)
    state = model.initial_state()
    settings = dict(start_id=START_ID, end_id=END_ID, num_beams=2, max_length=4)

    @tf.function
    def run(state):
        return beam_search(model.step_fn, state, None, **settings)

    first = run(state)
    again = run(state)
    assert run.experimental_get_tracing_count() == 1
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[0], beam_search(model.step_fn, state, 4, **settings)[0])

    # Another batch size is another shape: one new trace.
    rows = {name: tensor[:3] for name, tensor in state.items()}
    outputs = run(rows)
    assert outputs[0].shape == (3, 1, 4)
    np.testing.assert_array_equal(outputs[0], first[0][:3])
    assert run.experimental_get_tracing_count() == 2


def test_early_stop_ends_the_loop_once_no_alive_beam_can_win():
    # After step 0 the finished "[end]" (0.6) beats the best alive "a" (0.4) and
    # every extension of it, so the search stops after one model step.
    model = early_end_model()
    calls = tf.Variable(0)

    def counting_step(token_ids, state, step):
        calls.assign_add(1)
        return model.step_fn(token_ids, state, step)

    beam_search(counting_step, model.initial_state(), 1, 0, 1, num_beams=2, max_length=50)
    assert int(calls.numpy()) == 1

    # Asking for two outputs keeps the search going until "a b [end]" is finished
    # (step 2); after that nothing alive remains.
    calls.assign(0)
    beam_search(counting_step, model.initial_state(), 1, 0, 1, num_beams=2, max_length=50, num_return=2)
    assert int(calls.numpy()) == 3
