"""Tests for `kerasseq.models.Ensemble`: several models decoded as one."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasseq
from kerasseq.data import TextTokenizer
from kerasseq.export import export_translator
from kerasseq.models import Ensemble, build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.translator import Translator
from tests.models.g2p_fixture import (
    tiny_g2p,
    tiny_g2p_model,
    train_on_tiny_g2p,
    trained_tiny_g2p_rnn,
)


def _log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def members():
    """Two different tiny trained models on one vocabulary: an RNN and a Transformer."""
    rnn, words, _ = trained_tiny_g2p_rnn(seed=3, epochs=10)
    transformer, _ = train_on_tiny_g2p(
        tiny_g2p_model(build_transformer_seq2seq, 8, num_layers=1, d_model=16, num_heads=2,
                       dff=32, dropout=0.0, max_positions=12),
        epochs=8)
    return rnn, transformer, words


@pytest.fixture(scope="module")
def source_ids(members):
    rnn, _, words = members
    return rnn.source_tokenizer.encode(words[:6]).to_tensor().numpy()  # (6, source_length)


def test_ensemble_of_one_model_equals_the_model(members, source_ids):
    rnn, _, words = members
    ensemble = Ensemble([rnn])
    for settings in ({"method": "greedy"}, {"method": "beam", "num_beams": 3, "num_return": 2}):
        ours = ensemble.generate(source_ids, jit_compile=False, **settings)
        reference = rnn.generate(source_ids, jit_compile=False, **settings)
        np.testing.assert_array_equal(ours[0], reference[0])  # token ids
        np.testing.assert_array_equal(ours[2], reference[2])  # lengths
        np.testing.assert_allclose(ours[1], reference[1], atol=1e-5)  # scores
    texts, scores = ensemble.translate(words[:6], return_scores=True)
    reference_texts, reference_scores = rnn.translate(words[:6], return_scores=True)
    assert texts == reference_texts
    np.testing.assert_allclose(scores, reference_scores, atol=1e-5)


def test_first_step_log_probs_are_the_mean_of_the_members_distributions(members, source_ids):
    rnn, transformer, _ = members
    ensemble = Ensemble([rnn, transformer])
    start = tf.fill([source_ids.shape[0]], ensemble.start_id)  # (batch_size,)
    step = tf.constant(0, tf.int32)
    probabilities = []
    for member in (rnn, transformer):
        logits, _ = member.decode_step(start, member.encode(source_ids), step)
        probabilities.append(np.exp(_log_softmax(logits.numpy())))  # (batch_size, vocab_size)
    expected = np.log((probabilities[0] + probabilities[1]) / 2)
    log_probs, state = ensemble.decode_step(start, ensemble.encode(source_ids), step)
    np.testing.assert_allclose(log_probs.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(np.exp(log_probs.numpy()).sum(axis=-1), 1.0, atol=1e-5)
    # The searches apply log_softmax to the logits: on these it is the identity.
    np.testing.assert_allclose(tf.nn.log_softmax(log_probs).numpy(), log_probs.numpy(), atol=1e-5)
    # One flat state: the members' keys prefixed, plus the ensemble's own.
    assert "member_0/decoder_state" in state and "member_1/layer_0_self_key" in state
    assert {"source_mask", "attention_weights"} <= set(state)
    assert set(ensemble.shared_state_keys) == {
        "source_mask", "member_1/layer_0_cross_key", "member_1/layer_0_cross_value"}


def test_decode_step_equals_the_teacher_forced_call(members, source_ids):
    rnn, transformer, _ = members
    ensemble = Ensemble([rnn, transformer])
    target_in = np.array([[2, 5, 7, 6, 9], [2, 8, 5, 0, 0]], np.int32)  # (2, target_length)
    source = source_ids[:2]
    teacher_forced = ensemble([source, target_in]).numpy()  # (2, target_length, vocab_size)
    state = ensemble.encode(source)
    for position in range(target_in.shape[1]):
        log_probs, state = ensemble.decode_step(tf.constant(target_in[:, position]), state,
                                                tf.constant(position, tf.int32))
        real = target_in[:, position] != 0
        np.testing.assert_allclose(log_probs.numpy()[real], teacher_forced[real, position],
                                   atol=1e-4)


def test_beam_search_on_an_ensemble_of_two_trained_models(members, source_ids):
    rnn, transformer, words = members
    ensemble = Ensemble([rnn, transformer])
    token_ids, scores, lengths = ensemble.generate(source_ids, method="beam", num_beams=4,
                                                   num_return=3, length_penalty=0.6,
                                                   jit_compile=False)
    assert token_ids.shape == (6, 3, ensemble.max_target_length)
    assert np.all(np.isfinite(scores)) and np.all(np.diff(scores, axis=1) <= 1e-6)
    assert np.all((lengths >= 0) & (lengths <= ensemble.max_target_length))
    translations = ensemble.translate(words[:6], num_beams=4, coverage_penalty=0.2,
                                      jit_compile=False)
    assert len(translations) == 6 and all(isinstance(t, str) for t in translations)
    # Every entry point runs the same translator (XLA-compiled by default).
    assert kerasseq.translate(ensemble, words[:6]) == ensemble.translate(words[:6])
    sampled = ensemble.translate(words[:2], method="sample", seed=1, top_k=3, jit_compile=False)
    assert len(sampled) == 2


def test_limits_are_the_smallest_of_the_members():
    _, _, source, target = tiny_g2p()
    short = build_transformer_seq2seq(num_layers=1, d_model=8, num_heads=2, dff=16, max_positions=8,
                                      source_tokenizer=source, target_tokenizer=target)
    long = build_transformer_seq2seq(num_layers=1, d_model=8, num_heads=2, dff=16, max_positions=16,
                                     source_tokenizer=source, target_tokenizer=target)
    rnn = build_rnn_seq2seq(embedding_dim=8, units=8, max_target_length=20,
                            source_tokenizer=source, target_tokenizer=target)
    ensemble = Ensemble([long, rnn, short])
    assert ensemble.max_positions == 8 and ensemble.max_target_length == 8
    assert ensemble.source_length_multiple == 8
    with pytest.raises(ValueError, match="max_positions=8"):
        ensemble.generate(np.ones([1, 12], np.int32) * 5, jit_compile=False)
    with pytest.raises(ValueError, match="max_positions=8"):
        ensemble.translator(max_length=12)
    token_ids, _, _ = ensemble.generate(np.ones([2, 6], np.int32) * 5, jit_compile=False)
    assert token_ids.shape == (2, 1, 8)


def test_members_without_attention_refuse_the_coverage_penalty():
    _, _, source, target = tiny_g2p()
    plain = build_rnn_seq2seq(embedding_dim=8, units=8, attention=None, max_target_length=6,
                              source_tokenizer=source, target_tokenizer=target)
    attentive = build_rnn_seq2seq(embedding_dim=8, units=8, max_target_length=6,
                                  source_tokenizer=source, target_tokenizer=target)
    ensemble = Ensemble([attentive, plain])
    assert "attention_weights" not in ensemble.encode(np.ones([1, 3], np.int32) * 5)
    with pytest.raises(ValueError, match="coverage_penalty"):
        ensemble.translate(["abc"], coverage_penalty=0.5)
    assert isinstance(ensemble.translate("abc"), str)


def test_mismatched_vocabularies_raise():
    _, _, source, target = tiny_g2p()
    model = build_rnn_seq2seq(embedding_dim=8, units=8, source_tokenizer=source,
                              target_tokenizer=target)
    bigger = TextTokenizer.from_texts(["X Y Z"] + list(target.get_vocabulary()[4:]),
                                      split="whitespace")
    other_size = build_rnn_seq2seq(embedding_dim=8, units=8, source_tokenizer=source,
                                   target_tokenizer=bigger)
    with pytest.raises(ValueError, match=r"one target vocabulary.*target_vocab_size"):
        Ensemble([model, other_size])
    # Same size, other tokens (order): the ids would mean other phonemes.
    vocabulary = list(target.get_vocabulary()[4:])
    shuffled = TextTokenizer(split="whitespace")
    shuffled.set_vocabulary(vocabulary[::-1])
    same_size = build_rnn_seq2seq(embedding_dim=8, units=8, source_tokenizer=source,
                                  target_tokenizer=shuffled)
    with pytest.raises(ValueError, match=r"target tokenizers of members\[0\] and members\[1\]"):
        Ensemble([model, same_size])
    words = TextTokenizer.from_texts(["abc def"], split="word")
    other_source = build_rnn_seq2seq(embedding_dim=8, units=8, source_tokenizer=words,
                                     target_tokenizer=target)
    with pytest.raises(ValueError, match="one source vocabulary"):
        Ensemble([model, other_source])
    with pytest.raises(TypeError, match="non-empty list"):
        Ensemble([])
    with pytest.raises(TypeError, match=r"members\[1\]"):
        Ensemble([model, object()])


def test_save_and_load_keeps_the_ensemble(members, source_ids, tmp_path):
    rnn, transformer, _ = members
    ensemble = Ensemble([rnn, transformer])
    path = str(tmp_path / "ensemble.keras")
    ensemble.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, Ensemble) and len(loaded.members) == 2
    settings = dict(method="beam", num_beams=3, jit_compile=False)
    for ours, theirs in zip(ensemble.generate(source_ids, **settings),
                            loaded.generate(source_ids, **settings), strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.slow
def test_exported_ensemble_translates_without_kerasseq(members, tmp_path):
    from tests.test_export import serve_in_fresh_process

    rnn, transformer, words = members
    ensemble = Ensemble([rnn, transformer])
    export_dir = str(tmp_path / "ensemble_export")
    export_translator(ensemble, export_dir, num_beams=3, num_return=2)
    texts = words[:5] + [""]
    expected, expected_scores = Translator(ensemble, num_beams=3, num_return=2).translate(
        texts, return_scores=True)
    results = serve_in_fresh_process({export_dir: {"words": texts}}, cwd=str(tmp_path))
    assert results["kerasseq_imported"] is False
    served = results[export_dir]["words"]
    assert served["translations"] == expected
    np.testing.assert_allclose(served["scores"], expected_scores, atol=1e-4)
    assert served["translation"] == [nbest[0] for nbest in expected]


@pytest.fixture(scope="module")
def rnn_file(members, tmp_path_factory):
    """The trained RNN member saved once, for the tests that load copies of it."""
    path = str(tmp_path_factory.mktemp("ensemble") / "rnn.keras")
    members[0].save(path)
    return path


def test_copies_of_one_model_share_a_name_and_equal_the_model(members, source_ids, rnn_file,
                                                             tmp_path):
    """Two loads of one `.keras` file (same layer names) ensemble like the model itself."""
    rnn, _, words = members
    path = rnn_file
    copies = Ensemble([keras.models.load_model(path), keras.models.load_model(path)])
    assert copies.members[0].name == copies.members[1].name
    # The settings of the beam search in `test_ensemble_of_one_model_equals_the_model`:
    # the reference reuses the RNN's cached translator (no second trace).
    settings = dict(method="beam", num_beams=3, num_return=2, jit_compile=False)
    ours = copies.generate(source_ids, **settings)
    reference = rnn.generate(source_ids, **settings)
    np.testing.assert_array_equal(ours[0], reference[0])
    np.testing.assert_allclose(ours[1], reference[1], atol=1e-5)
    copies.save(str(tmp_path / "copies.keras"))
    loaded = keras.models.load_model(str(tmp_path / "copies.keras"))
    # Default settings and 6 words (8-row bucket): the RNN's translator and its
    # traced shape are those of `test_ensemble_of_one_model_equals_the_model`
    # (cached on the model). No XLA on a CPU either way.
    assert loaded.translate(words[:6]) == rnn.translate(words[:6])


def test_same_named_members_keep_their_own_weights_through_save_and_load(rnn_file, tmp_path):
    """Two loads of one file, one of them changed: after `.keras` saving and loading,
    each member still holds its own weights (no mix-up by layer name)."""
    path = rnn_file
    first, second = keras.models.load_model(path), keras.models.load_model(path)
    rng = np.random.default_rng(0)
    for weight in second.trainable_weights:
        weight.assign(weight.numpy() + rng.normal(0.0, 0.1, weight.shape).astype(weight.dtype))
    assert first.name == second.name
    ensemble = Ensemble([first, second])
    ensemble.save(str(tmp_path / "ensemble.keras"))
    loaded = keras.models.load_model(str(tmp_path / "ensemble.keras"))
    for original, restored in zip([first, second], loaded.members, strict=True):
        for a, b in zip(original.weights, restored.weights, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # and the two members really differ
    assert any(not np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(loaded.members[0].weights, loaded.members[1].weights, strict=True))
