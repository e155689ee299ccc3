"""Sampling: reproducibility, support of the top-k / top-p filters, limits."""

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.decoding import greedy, sample
from kerasseq.decoding.sampling import top_k_filter, top_p_filter
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    MarkovTableModel,
    PrefixTableModel,
)

BATCH = 64
MAX_LENGTH = 10


@pytest.fixture(scope="module")
def markov_model():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.full(8, 0.7), size=8)
    probabilities[:, START_ID] = 0.0  # the searches never generate it (also padding)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return MarkovTableModel(probabilities, batch_size=BATCH)


def transitions(token_ids, lengths):
    """Every (previous token, drawn token) pair, the end token included."""
    pairs = []
    for row, length in zip(np.asarray(token_ids), np.asarray(lengths), strict=True):
        drawn = list(row[:length]) + ([END_ID] if length < len(row) else [])
        previous = [START_ID] + list(row[:length])
        pairs.extend(zip(previous, drawn, strict=False))
    return pairs


def draw(model, **kwargs):
    kwargs.setdefault("max_length", MAX_LENGTH)
    outputs = sample(
        model.step_fn, model.initial_state(), model.batch_size, START_ID, END_ID, **kwargs
    )
    return [np.asarray(output) for output in outputs]


def test_same_seed_same_samples_other_seed_other_samples(markov_model):
    first = draw(markov_model, seed=11)
    again = draw(markov_model, seed=11)
    other = draw(markov_model, seed=12)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


def test_scores_are_model_log_probabilities(markov_model):
    # Even with temperature and filtering, scores use the model's own distribution.
    token_ids, scores, lengths = draw(markov_model, seed=3, temperature=0.7, top_k=4)
    for row in range(BATCH):
        pairs = transitions(token_ids[row : row + 1], lengths[row : row + 1])
        expected = sum(markov_model.log_table[a, b] for a, b in pairs)
        np.testing.assert_allclose(scores[row], expected, rtol=1e-5, atol=1e-5)


def test_every_token_lies_in_the_top_k_set(markov_model):
    token_ids, _, lengths = draw(markov_model, seed=5, top_k=3)
    top_3 = np.argsort(-markov_model.probabilities, axis=-1)[:, :3]
    pairs = transitions(token_ids, lengths)
    assert all(b in top_3[a] for a, b in pairs)
    # With 64 rows the filter really is exercised: more than one token per context.
    assert len({b for a, b in pairs if a == START_ID}) > 1


def test_every_token_lies_in_the_nucleus(markov_model):
    top_p = 0.6
    token_ids, _, lengths = draw(markov_model, seed=9, top_p=top_p)
    nucleus = {}
    for context, probabilities in enumerate(markov_model.probabilities):
        order = np.argsort(-probabilities)
        mass_above = np.cumsum(probabilities[order]) - probabilities[order]
        nucleus[context] = set(order[mass_above < top_p].tolist())
    pairs = transitions(token_ids, lengths)
    assert all(b in nucleus[a] for a, b in pairs)
    assert len({b for a, b in pairs if a == START_ID}) == len(nucleus[START_ID])


def test_filters_on_a_known_row():
    logits = tf.math.log([[0.5, 0.3, 0.15, 0.05]])
    assert np.isfinite(top_k_filter(logits, 2).numpy()).tolist() == [[True, True, False, False]]
    # Mass above each token: 0, 0.5, 0.8, 0.95.
    assert np.isfinite(top_p_filter(logits, 0.8).numpy()).tolist() == [[True, True, False, False]]
    assert np.isfinite(top_p_filter(logits, 0.81).numpy()).tolist() == [[True, True, True, False]]
    assert np.isfinite(top_p_filter(logits, 0.1).numpy()).tolist() == [[True, False, False, False]]


def test_top_k_one_and_cold_temperature_equal_greedy():
    model = PrefixTableModel(batch_size=6, vocab_size=6, seed=2, end_bias=0.5)
    expected = greedy(model.step_fn, model.initial_state(), 6, START_ID, END_ID, max_length=7)
    for kwargs in ({"top_k": 1, "seed": 1}, {"temperature": 1e-3, "seed": 2}):
        token_ids, scores, lengths = draw(model, max_length=7, **kwargs)
        np.testing.assert_array_equal(token_ids, expected[0])
        np.testing.assert_array_equal(lengths, expected[2])
        np.testing.assert_allclose(scores, expected[1], rtol=1e-5)


def test_min_length_and_max_length(markov_model):
    token_ids, _, lengths = draw(markov_model, seed=4, min_length=3, max_length=6)
    assert token_ids.shape == (BATCH, 6)
    assert lengths.min() >= 3 and lengths.max() <= 6
    for row, length in zip(token_ids, lengths, strict=True):
        assert END_ID not in row[:length] and not row[length:].any()


def test_xla_and_repeated_calls_do_not_retrace(markov_model):
    state = markov_model.initial_state()

    @tf.function  # the caller compiles; sample is a loop inside its graph
    def run(state, seed):
        return sample(markov_model.step_fn, state, BATCH, START_ID, END_ID,
                      max_length=MAX_LENGTH, top_k=4, top_p=0.9, seed=seed)

    plain = [np.asarray(x) for x in run(state, tf.constant(21))]
    np.testing.assert_array_equal(plain[0], draw(markov_model, seed=21, top_k=4, top_p=0.9)[0])
    other_seed = run(state, tf.constant(22))  # the seed is a tensor: no new trace
    assert run.experimental_get_tracing_count() == 1
    assert not np.array_equal(plain[0], other_seed[0])
    compiled = draw(markov_model, seed=21, top_k=4, top_p=0.9, jit_compile=True)
    assert compiled[0].shape == plain[0].shape
    pairs = transitions(compiled[0], compiled[2])
    top_4 = np.argsort(-markov_model.probabilities, axis=-1)[:, :4]
    assert all(b in top_4[a] for a, b in pairs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"temperature": 0.0}, "temperature must be a float > 0. Received: temperature=0.0"),
        ({"top_k": -1}, "top_k must be >= 0. Received: top_k=-1"),
        ({"top_p": 0.0}, r"top_p must be a float in \(0, 1\]. Received: top_p=0.0"),
        ({"top_p": 1.5}, r"top_p must be a float in \(0, 1\]. Received: top_p=1.5"),
        ({"seed": "abc"}, "seed must be an int or None. Received: seed='abc'"),
    ],
)
def test_invalid_arguments_are_named(markov_model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        draw(markov_model, **kwargs)
