"""`no_repeat_ngram_size`: the ban against its definition (`repeats_ngram`), every
search against brute force or a plain-Python reference with the ban, and every door
(translate, generate, the ensemble, the export, the command line, TFLite's loop)."""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

import kerasseq
from kerasseq.data import tokenizer
from kerasseq.decoding import (
    SearchConfig,
    SearchConfigError,
    beam_search,
    greedy,
    sample,
)
from kerasseq.decoding._common import ban_repeated_ngrams
from kerasseq.decoding.contract import encode_for_search
from kerasseq.export import read_metadata
from kerasseq.models import Ensemble, build_transformer_seq2seq
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    MarkovTableModel,
    PrefixTableModel,
    assert_xla_matches_graph_mode,
    brute_force,
    reference_beam_search,
    reference_greedy,
    repeats_ngram,
    unpad,
)
from tests.models.g2p_fixture import tiny_g2p, tiny_g2p_model


def has_repeated_ngram(tokens, size):
    grams = [tuple(tokens[j:j + size]) for j in range(len(tokens) - size + 1)]
    return len(set(grams)) < len(grams)


# ------------------------------------------------------------- the ban itself


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_ban_is_the_definition_and_ignores_what_follows_the_step(size):
    # Small vocabulary, so that repeats are frequent; the columns from `step` on
    # hold random tokens (not the zeros of a search), which must never count.
    rng = np.random.default_rng(size)
    rows, max_length, vocab_size = 64, 10, 3
    sequences = rng.integers(0, vocab_size, (rows, max_length)).astype("int32")
    compiled = tf.function(ban_repeated_ngrams, jit_compile=True)
    fired = 0
    for step in range(max_length):
        log_probs = tf.zeros([rows, vocab_size])
        for ban in (ban_repeated_ngrams, compiled):
            banned = np.isinf(ban(log_probs, tf.constant(sequences), tf.constant(step), size))
            expected = [[repeats_ngram(tuple(row[:step]), token, size)
                         for token in range(vocab_size)] for row in sequences]
            np.testing.assert_array_equal(banned, expected)
        fired += banned.sum()
    assert fired > 30  # the comparison saw many bans
    assert ban_repeated_ngrams(log_probs, tf.constant(sequences), tf.constant(5), 0) is log_probs


def test_start_token_is_never_generated_so_never_repeated():
    # Token 0 is [start] and padding; the Markov chain on the previous token
    # prefers "a" after 0 and 0 after "a". Without the ban greedy said a 0 a
    # (then 0 was banned by the bigram (a, 0)); with it 0 never comes, and the
    # others keep the model's probabilities (the ban does not renormalise):
    # after [start] P(a) = 0.9, after "a" P([end]) = 0.08, so the output is "a".
    probabilities = np.full((3, 3), 0.05)
    probabilities[0] = [0.05, 0.05, 0.9]  # after [start]: "a"
    probabilities[2] = [0.9, 0.08, 0.02]  # after "a": 0
    model = MarkovTableModel(probabilities)
    token_ids, scores, lengths = greedy(model.step_fn, model.initial_state(), 1, START_ID,
                                        END_ID, max_length=6, no_repeat_ngram_size=2)
    assert unpad(token_ids[0], lengths[0]) == (2,)
    np.testing.assert_allclose(scores[0], math.log(0.9 * 0.08), rtol=1e-6)


# ----------------------------------------------------- searches against references


@pytest.mark.parametrize("seed, vocab_size, max_length, size, alpha", [
    (0, 3, 5, 1, 0.0), (1, 3, 5, 2, 0.0), (2, 4, 5, 2, 0.6), (4, 3, 6, 3, 0.0),
])
def test_exhaustive_beam_equals_brute_force_over_sequences_without_repeats(
        seed, vocab_size, max_length, size, alpha):
    # Every prefix stays alive: the n-best list must be the best sequences among
    # all those without a repeated n-gram (scored by the unmodified model).
    model = PrefixTableModel(batch_size=2, vocab_size=vocab_size, seed=seed, end_bias=-1.5)
    num_beams = vocab_size ** (max_length - 1)
    outputs = beam_search(model.step_fn, model.initial_state(), 2, START_ID, END_ID,
                          num_beams=num_beams, max_length=max_length, length_penalty=alpha,
                          num_return=4, no_repeat_ngram_size=size, return_log_probs=True)
    token_ids, scores, lengths, log_probs = (np.asarray(output) for output in outputs)
    changed = False
    for row in range(2):
        every = brute_force(model, row, max_length, alpha=alpha)
        allowed = [result for result in every if not has_repeated_ngram(result[2], size)]
        changed |= allowed[:4] != every[:4]
        for rank, (score, log_prob, tokens) in enumerate(allowed[:4]):
            assert unpad(token_ids[row, rank], lengths[row, rank]) == tokens, (row, rank)
            np.testing.assert_allclose(scores[row, rank], score, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(log_probs[row, rank], log_prob, rtol=1e-5, atol=1e-5)
    assert changed, "the ban should change the n-best list here"


@pytest.mark.parametrize("seed, num_beams, size, num_return", [
    (0, 2, 2, 2), (1, 3, 2, 1), (2, 3, 1, 3), (3, 4, 3, 2), (4, 2, 3, 1),
])
def test_small_beams_keep_each_hypothesis_history(seed, num_beams, size, num_return):
    # Beams are reordered at every step; the reference keeps each prefix as a
    # tuple, so a ban read from another beam's tokens would disagree with it.
    model = PrefixTableModel(batch_size=4, vocab_size=4, seed=20 + seed, end_bias=-3.0)
    kwargs = dict(num_beams=num_beams, max_length=8, num_return=num_return, length_penalty=0.6)

    def run(**extra):
        return beam_search(model.step_fn, model.initial_state(), 4, START_ID, END_ID,
                           **kwargs, no_repeat_ngram_size=size, **extra)

    token_ids, scores, lengths = (np.asarray(output) for output in run())
    plain = beam_search(model.step_fn, model.initial_state(), 4, START_ID, END_ID, **kwargs)
    assert not np.array_equal(plain[0], token_ids)
    for row in range(4):
        expected = reference_beam_search(model, row, num_beams, 8, alpha=0.6, no_repeat=size)
        for rank, (score, _, tokens) in enumerate(expected[:num_return]):
            assert unpad(token_ids[row, rank], lengths[row, rank]) == tokens, (row, rank)
            assert not has_repeated_ngram(tokens, size)
            np.testing.assert_allclose(scores[row, rank], score, rtol=1e-5, atol=1e-5)
    assert_xla_matches_graph_mode(run)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_greedy_matches_the_reference(size):
    model = PrefixTableModel(batch_size=6, vocab_size=4, seed=40 + size, end_bias=-1.5)

    def run(**extra):
        return greedy(model.step_fn, model.initial_state(), 6, START_ID, END_ID, max_length=9,
                      no_repeat_ngram_size=size, **extra)

    token_ids, scores, lengths = (np.asarray(output) for output in run())
    plain = greedy(model.step_fn, model.initial_state(), 6, START_ID, END_ID, max_length=9)
    assert not np.array_equal(plain[0], token_ids)
    for row in range(6):
        tokens, log_prob = reference_greedy(model, row, 9, no_repeat=size)
        assert unpad(token_ids[row], lengths[row]) == tokens
        np.testing.assert_allclose(scores[row], log_prob, rtol=1e-5)
    assert_xla_matches_graph_mode(run)


def test_sampling_never_draws_a_repeat_and_top_k_1_is_greedy():
    # A chain that loops: a -> a 0.5, a -> b 0.3, b -> a 0.6 ...
    probabilities = np.array([[0.0, 0.05, 0.6, 0.35],   # [start]
                              [0.0, 1.0, 0.0, 0.0],     # [end]
                              [0.0, 0.2, 0.5, 0.3],     # a
                              [0.0, 0.1, 0.6, 0.3]])    # b
    model = MarkovTableModel(probabilities, batch_size=64)
    state = model.initial_state()

    def draw(size, **extra):
        outputs = sample(model.step_fn, state, 64, START_ID, END_ID, max_length=10, seed=3,
                         no_repeat_ngram_size=size, **extra)
        token_ids, _, lengths = (np.asarray(output) for output in outputs)
        return [unpad(ids, length) for ids, length in zip(token_ids, lengths, strict=True)]

    assert sum(has_repeated_ngram(tokens, 2) for tokens in draw(0)) > 30
    for outputs in (draw(2), draw(2, jit_compile=True)):
        assert not any(has_repeated_ngram(tokens, 2) for tokens in outputs)
    greedy_ids = greedy(model.step_fn, state, 64, START_ID, END_ID, max_length=10,
                        no_repeat_ngram_size=2)
    sampled = sample(model.step_fn, state, 64, START_ID, END_ID, max_length=10, seed=3, top_k=1,
                     no_repeat_ngram_size=2)
    np.testing.assert_array_equal(sampled[0], greedy_ids[0])  # a a b a [end]
    assert unpad(greedy_ids[0][0], greedy_ids[2][0]) == (2, 2, 3, 2)


@pytest.mark.parametrize("value", [-1, 1.5, True, "2", None])
def test_config_refuses_what_is_not_an_int_from_0(value):
    with pytest.raises(SearchConfigError, match="no_repeat_ngram_size must be") as raised:
        SearchConfig(no_repeat_ngram_size=value)
    assert raised.value.field == "no_repeat_ngram_size"
    with pytest.raises(ValueError, match="no_repeat_ngram_size"):
        greedy(lambda ids, state, step: (None, state), {"x": tf.zeros([1, 1])}, 1, 0, 1,
               max_length=3, no_repeat_ngram_size=value)
    assert SearchConfig(no_repeat_ngram_size=np.int64(3)).no_repeat_ngram_size == 3


# --------------------------------------------------------------- every door


@pytest.fixture(scope="module")
def transformers():
    """Two untrained tiny Transformers: greedy and beam search loop on them ("AH AH AH")."""
    def build(seed):
        return tiny_g2p_model(build_transformer_seq2seq, seed, num_layers=1, d_model=16,
                              num_heads=2, dff=32, dropout=0.0, max_positions=12)

    words = [word for word, _ in tiny_g2p()[1][:5]]
    return build(5), build(6), words


def contract_greedy(model, source_ids, max_length, size):
    """Greedy search written over `encode` / `decode_step`, eagerly, with the ban
    of `repeats_ngram`: `(rows, max_length)` ids, 0 after the end token."""
    state = encode_for_search(model, tf.constant(source_ids), max_length)
    rows = len(source_ids)
    tokens, prefixes = np.full(rows, tokenizer.START_ID, "int32"), [()] * rows
    done = np.zeros(rows, bool)
    for step in range(max_length):
        logits, state = model.decode_step(tf.constant(tokens), state, tf.constant(step))
        logits = np.array(logits, np.float64)
        for row in range(rows):
            for token in range(logits.shape[1]):
                if repeats_ngram(prefixes[row], token, size):
                    logits[row, token] = -np.inf
        tokens = logits.argmax(axis=1).astype("int32")
        for row in range(rows):
            if not done[row] and tokens[row] == tokenizer.END_ID:
                done[row] = True
            elif not done[row]:
                prefixes[row] += (int(tokens[row]),)
    return prefixes


@pytest.mark.parametrize("kind", ["transformer", "ensemble"])
def test_greedy_through_generate_and_translate_matches_the_contract_reference(transformers,
                                                                              kind):
    first, second, words = transformers
    model = first if kind == "transformer" else Ensemble([first, second])
    source_ids = first.source_tokenizer.encode(words).to_tensor().numpy()
    expected = contract_greedy(model, source_ids, 10, 2)
    plain = contract_greedy(model, source_ids, 10, 0)
    assert expected != plain and any(has_repeated_ngram(tokens, 2) for tokens in plain)
    token_ids, _, lengths = model.generate(source_ids, method="greedy", max_length=10,
                                           no_repeat_ngram_size=2)
    assert [unpad(ids[0], length[0]) for ids, length in zip(token_ids, lengths,
                                                             strict=True)] == expected
    texts = first.target_tokenizer.decode_to_strings([list(tokens) for tokens in expected])
    config = SearchConfig(method="greedy", max_length=10, no_repeat_ngram_size=2)
    assert kerasseq.translate(model, words, config, verbose=0) == texts
    assert model.translate(words, config) == texts


def test_beam_and_sampling_through_generate(transformers):
    # (XLA against graph mode: the toy tests above; here the model doors, untraced by XLA.)
    first, second, words = transformers
    source_ids = first.source_tokenizer.encode(words).to_tensor().numpy()

    def outputs(model, **search):
        token_ids, _, lengths = model.generate(source_ids, max_length=10, **search)
        return [unpad(ids, length) for ids, length in zip(token_ids.reshape(-1, 10),
                                                          lengths.ravel(), strict=True)]

    beam = dict(num_beams=3, num_return=3)
    assert any(has_repeated_ngram(tokens, 2) for tokens in outputs(first, **beam))
    for model in (first, Ensemble([first, second])):
        assert not any(has_repeated_ngram(tokens, 2)
                       for tokens in outputs(model, **beam, no_repeat_ngram_size=2))
        assert not any(has_repeated_ngram(tokens, 1) for tokens in outputs(
            model, method="sample", seed=0, no_repeat_ngram_size=1))


def test_export_and_command_line_carry_the_guard(transformers, tmp_path, capsys):
    from kerasseq_cli import main

    model, _, words = transformers
    model_path, export_dir = str(tmp_path / "model.keras"), str(tmp_path / "export")
    model.save(model_path)
    flags = ["--beam", "1", "--no-repeat-ngram-size", "2", "--jit", "off"]  # greedy: cheap
    guarded = model.translate(words, method="greedy", no_repeat_ngram_size=2)
    assert guarded != model.translate(words, method="greedy")

    assert main(["translate", model_path, *words, *flags]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{word}\t{text}" for word, text in zip(words, guarded, strict=True)]
    assert main(["export", model_path, export_dir, *flags]) == 0
    assert read_metadata(export_dir)["no_repeat_ngram_size"] == 2
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    translations = served(text=tf.constant(words))["translation"].numpy()
    assert [text.decode() for text in translations] == guarded
    capsys.readouterr()
    assert main(["translate", export_dir, words[0], "--no-repeat-ngram-size", "3"]) == 2
    assert "exported with no_repeat_ngram_size=2" in capsys.readouterr().err


def test_cli_flag_sets_the_field_only_when_given():
    # A bad value's message: tests/test_cli.py (SEARCH_ERRORS).
    from kerasseq_cli import make_parser
    from kerasseq_cli.commands import _search_config

    args = make_parser().parse_args(["translate", "m", "--no-repeat-ngram-size", "3"])
    assert _search_config(args).no_repeat_ngram_size == 3
    assert _search_config(make_parser().parse_args(["translate", "m"])).no_repeat_ngram_size == 0


def test_repeats_ngram_reference_by_hand():
    # The reference itself, on hand-made prefixes.
    assert repeats_ngram((5, 6, 5), 6, 2) and not repeats_ngram((5, 6, 5), 5, 2)
    assert repeats_ngram((5, 6, 5, 6), 5, 3) and not repeats_ngram((5, 6, 5), 5, 3)
    assert repeats_ngram((7,), 7, 1) and not repeats_ngram((), 7, 1)
    assert not any(repeats_ngram(prefix, 1, 0) for prefix in itertools.product([1], repeat=3))
