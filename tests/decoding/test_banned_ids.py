"""No search generates [PAD] (0) or [START]; [UNK] on request (`ban_unk`).

The ban against a model that gives those ids no probability by itself (toy
step functions, brute force), then every door on untrained RNN and Transformer
models whose output bias favours ids 0, 1 and 2 (generate, translate, the
ensemble, the SavedModel export and the command line; TFLite's loop:
tests/test_tflite.py)."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.data.tokenizer import PAD_ID, UNK_ID
from kerasseq.data.tokenizer import START_ID as TEXT_START_ID  # 2; the toys use 0
from kerasseq.decoding import (
    SearchConfig,
    SearchConfigError,
    beam_search,
    greedy,
    sample,
)
from kerasseq.decoding._common import ban_tokens, never_generated
from kerasseq.export import METADATA_PATH, read_metadata
from kerasseq.models import Ensemble, build_rnn_seq2seq, build_transformer_seq2seq
from tests.decoding.toy_models import (
    END_ID,
    START_ID,
    PrefixTableModel,
    assert_xla_matches_graph_mode,
    brute_force,
    unpad,
)
from tests.models.g2p_fixture import tiny_g2p, tiny_g2p_model

# ------------------------------------------------------------- the ban itself


def test_never_generated_and_ban_tokens_by_hand():
    assert never_generated(2, 3) == (0, 2)
    assert never_generated(2, 3, [5, 1, 1]) == (0, 1, 2, 5)
    assert never_generated(0, 1) == (0,)
    assert never_generated(2, 3, (3,)) == (0, 2)  # the end token is never banned
    logits = tf.constant([[1.0, 2.0, 3.0, 4.0, 5.0], [5.0, 4.0, 3.0, 2.0, 1.0]])
    expected = [[-np.inf, 2.0, -np.inf, 4.0, 5.0], [-np.inf, 4.0, -np.inf, 2.0, 1.0]]
    compiled = tf.function(ban_tokens, jit_compile=True)
    for ban in (ban_tokens, compiled):
        np.testing.assert_array_equal(ban(logits, (0, 2, 9)), expected)  # 9: beyond the vocabulary
    half = ban_tokens(tf.cast(logits, tf.float16), (0, 2))
    assert half.dtype == tf.float16 and np.isneginf(half.numpy()[:, [0, 2]]).all()
    assert ban_tokens(logits, ()) is logits  # nothing banned: nothing computed


@pytest.mark.parametrize("value", [3, "1", [1.5], [-1], [True], None])
def test_decoders_refuse_bad_banned_ids(value):
    model = PrefixTableModel(batch_size=1, vocab_size=4, seed=0)
    for decode in (greedy, sample, beam_search):
        with pytest.raises(ValueError, match="banned_ids must be a sequence of token ids"):
            decode(model.step_fn, model.initial_state(), 1, START_ID, END_ID, max_length=3,
                   banned_ids=value)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_config_refuses_a_ban_unk_that_is_not_a_bool(value):
    with pytest.raises(SearchConfigError, match="ban_unk must be a bool") as raised:
        SearchConfig(ban_unk=value)
    assert raised.value.field == "ban_unk"


# ------------------------------------- the ban equals a model that masks the ids


def run(method, model, **kwargs):
    search = {"greedy": greedy, "beam": beam_search, "sample": sample}[method]
    settings = {"beam": dict(num_beams=3, num_return=2), "sample": dict(seed=4)}.get(method, {})
    return [np.asarray(output) for output in search(
        model.step_fn, model.initial_state(), model.batch_size, START_ID, END_ID,
        max_length=6, **settings, **kwargs)]


def model_log_prob(model, row, tokens, length):
    """log P(tokens, then the end token if the output ended) of the plain model."""
    prefix, total = (), 0.0
    for token in list(tokens[:length]) + ([END_ID] if length < len(tokens) else []):
        total += model.log_probs(row, prefix)[token]
        prefix += (token,)
    return total


@pytest.mark.parametrize("method", ["greedy", "sample"])
def test_banned_search_picks_as_a_model_that_masks_the_ids_and_keeps_model_scores(method):
    # One path per row: the choice (arg-max, or a draw, which a per-row shift of
    # the log-probabilities does not change) is the masked model's; the score
    # is the plain model's log P of the output, not renormalised (fairseq's ban).
    banned = (2, 4)
    plain = PrefixTableModel(batch_size=8, vocab_size=6, seed=3, end_bias=-1.0)
    masked = PrefixTableModel(batch_size=8, vocab_size=6, seed=3, end_bias=-1.0,
                              masked_ids=banned)
    free = run(method, plain)
    assert np.isin(free[0], banned).any()  # the model does choose them
    expected = run(method, masked)
    outputs = run(method, plain, banned_ids=banned)
    np.testing.assert_array_equal(outputs[0], expected[0])
    np.testing.assert_array_equal(outputs[2], expected[2])
    scores = [model_log_prob(plain, row, outputs[0][row], outputs[2][row]) for row in range(8)]
    np.testing.assert_allclose(outputs[1], scores, rtol=1e-5, atol=1e-5)
    assert np.all(outputs[1] < expected[1] + 1e-6)  # below the renormalised scores
    assert not np.isin(outputs[0], banned).any() and not free[1].tolist() == outputs[1].tolist()
    if method != "sample":  # XLA draws other numbers from the same seed
        assert_xla_matches_graph_mode(lambda **kwargs: run(method, plain, banned_ids=banned,
                                                           **kwargs))


@pytest.mark.parametrize("seed, vocab_size, max_length, alpha", [(0, 5, 3, 0.0), (1, 5, 3, 0.6)])
def test_exhaustive_banned_beam_equals_brute_force_over_the_masked_model(seed, vocab_size,
                                                                         max_length, alpha):
    # Every prefix stays alive (num_beams >= vocab_size ** (max_length - 1)): the
    # n-best list is the exact top of every sequence without ids 0 and 3.
    plain = PrefixTableModel(batch_size=3, vocab_size=vocab_size, seed=seed, end_bias=0.5)
    masked = PrefixTableModel(batch_size=3, vocab_size=vocab_size, seed=seed, end_bias=0.5,
                              banned_ids=(3,))  # the reference: banned after the softmax
    token_ids, scores, lengths, log_probs = (np.asarray(output) for output in beam_search(
        plain.step_fn, plain.initial_state(), 3, START_ID, END_ID,
        num_beams=vocab_size ** (max_length - 1), max_length=max_length, length_penalty=alpha,
        num_return=5, return_log_probs=True, banned_ids=(3,)))
    for row in range(3):
        for rank, (score, log_prob, tokens) in enumerate(
                brute_force(masked, row, max_length, 0, alpha)[:5]):
            assert unpad(token_ids[row, rank], lengths[row, rank]) == tokens
            np.testing.assert_allclose(scores[row, rank], score, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(log_probs[row, rank], log_prob, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------- every door, untrained models

SPECIAL = (PAD_ID, UNK_ID, TEXT_START_ID)
MAX_LENGTH = 10


def favour_special_ids(model):
    """The untrained `model` with +9, +6 and +7 on the output bias of [PAD], [UNK] and [START]:
    every unbanned search then generates them."""
    vocab_size = model.target_vocab_size
    (bias,) = [weight for weight in model.weights
               if weight.path.endswith("bias") and tuple(weight.shape) == (vocab_size,)]
    value = bias.numpy()
    value[list(SPECIAL)] += np.array([9.0, 6.0, 7.0])
    bias.assign(value)
    return model


@pytest.fixture(scope="module")
def models():
    rnn = tiny_g2p_model(build_rnn_seq2seq, 0, embedding_dim=8, units=8,
                         max_target_length=MAX_LENGTH)
    transformers = [tiny_g2p_model(build_transformer_seq2seq, seed, num_layers=1, d_model=16,
                                   num_heads=2, dff=32, dropout=0.0, max_positions=12)
                    for seed in (5, 6)]
    words = [word for word, _ in tiny_g2p()[1][:6]]
    return {"rnn": favour_special_ids(rnn), "transformer": favour_special_ids(transformers[0]),
            "ensemble": Ensemble([favour_special_ids(model) for model in transformers])}, words


def search(model, words, **settings):
    """`generate` on the words: `(hypotheses, lengths, scores)` over every returned
    hypothesis, `hypotheses` the ids up to each length."""
    source_ids = model.source_tokenizer.encode(words).to_tensor().numpy()
    token_ids, scores, lengths = model.generate(source_ids, max_length=MAX_LENGTH,
                                                jit_compile=False, **settings)[:3]
    token_ids = token_ids.reshape(-1, token_ids.shape[-1])
    lengths, scores = lengths.ravel(), scores.ravel()
    return [row[:length] for row, length in zip(token_ids, lengths, strict=True)], lengths, scores


SETTINGS = {"greedy": dict(method="greedy"), "beam": dict(num_beams=3, num_return=2),
            "sample": dict(method="sample", seed=1)}


@pytest.mark.parametrize("kind", ["rnn", "transformer", "ensemble"])
@pytest.mark.parametrize("method", ["greedy", "beam", "sample"])
def test_no_search_generates_pad_or_start_and_lengths_count_the_text(models, kind, method):
    models, words = models
    model = models[kind]
    target = model.target_tokenizer
    for ban_unk in (False, True):
        hypotheses, lengths, scores = search(model, words, ban_unk=ban_unk, **SETTINGS[method])
        generated = np.concatenate(hypotheses)
        assert not np.isin(generated, [PAD_ID, TEXT_START_ID]).any()
        # The text holds every generated token ([UNK] detokenizes to "[UNK]").
        texts = target.decode_to_strings([list(ids) for ids in hypotheses])
        assert [len(text.split()) for text in texts] == lengths.tolist()
        assert np.isfinite(scores).all()
        assert (UNK_ID in generated) != ban_unk  # the bias makes [UNK] likely: banned on request


@pytest.mark.parametrize("kind", ["rnn", "transformer"])
def test_translate_shows_what_the_search_generated(models, kind):
    models, words = models
    model = models[kind]
    for ban_unk in (False, True):
        config = SearchConfig(method="greedy", max_length=MAX_LENGTH, ban_unk=ban_unk,
                              jit_compile=False)
        hypotheses, lengths, _ = search(model, words, **dict(method="greedy", ban_unk=ban_unk))
        texts = model.translate(words, config)
        assert texts == model.target_tokenizer.decode_to_strings([list(h) for h in hypotheses])
        assert all(text for text in texts) and ("[UNK]" in " ".join(texts)) != ban_unk


def test_export_and_command_line_carry_ban_unk(models, tmp_path, capsys):
    from kerasseq_cli import main

    models, words = models
    model = models["transformer"]
    model_path, export_dir = str(tmp_path / "model.keras"), str(tmp_path / "export")
    model.save(model_path)
    flags = ["--beam", "1", "--ban-unk", "--jit", "off"]  # greedy: cheap
    banned = model.translate(words, method="greedy", ban_unk=True)
    assert "[UNK]" in " ".join(model.translate(words, method="greedy"))
    assert "[UNK]" not in " ".join(banned)

    assert main(["translate", model_path, *words, *flags]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{word}\t{text}" for word, text in zip(words, banned, strict=True)]
    assert main(["export", model_path, export_dir, *flags]) == 0
    assert read_metadata(export_dir)["ban_unk"] is True
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    translations = served(text=tf.constant(words))["translation"].numpy()
    assert [text.decode() for text in translations] == banned
    # An export made without the ban refuses --ban-unk (checked on the metadata).
    unbanned_dir = str(tmp_path / "unbanned")
    shutil.copytree(export_dir, unbanned_dir)
    with open(os.path.join(unbanned_dir, METADATA_PATH)) as handle:
        metadata = json.load(handle)
    with open(os.path.join(unbanned_dir, METADATA_PATH), "w") as handle:
        json.dump({**metadata, "ban_unk": False}, handle)
    capsys.readouterr()
    assert main(["translate", unbanned_dir, words[0], "--ban-unk"]) == 2
    assert "exported with ban_unk=False" in capsys.readouterr().err


def test_cli_flag_sets_the_field_only_when_given():
    from kerasseq_cli import make_parser
    from kerasseq_cli.commands import _search_config

    parse = make_parser().parse_args
    assert _search_config(parse(["translate", "m", "--ban-unk"])).ban_unk is True
    assert _search_config(parse(["translate", "m"])).ban_unk is False


@pytest.mark.parametrize("kind", ["rnn", "transformer"])
def test_no_repeat_ngram_size_holds_for_the_text(models, kind):
    # With [PAD] generated between them, "[UNK] [PAD] [UNK] [PAD] [UNK]" has no
    # repeated bigram of ids, yet its text "[UNK] [UNK] [UNK]" repeats one.
    models, words = models
    texts = models[kind].translate(words, num_beams=3, max_length=MAX_LENGTH,
                                   no_repeat_ngram_size=2, jit_compile=False)
    for text in texts:
        bigrams = list(zip(text.split(), text.split()[1:], strict=False))
        assert len(set(bigrams)) == len(bigrams), text
