import keras
import numpy as np
import pytest

from kerasseq.models import RNNSeq2Seq, build_rnn_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy
from tests.models import seq2seq_checks
from tests.models.g2p_fixture import (
    tiny_g2p,
    tiny_g2p_model,
    train_on_tiny_g2p,
    trained_tiny_g2p_rnn,
)
from tests.models.rescoring import assert_beam_scores_equal_teacher_forcing
from tests.models.seq2seq_checks import SOURCE, TARGET_IN, TARGET_OUT


def small_model(attention="bahdanau", **kwargs):
    kwargs.setdefault("bidirectional", True)
    return build_rnn_seq2seq(12, 11, embedding_dim=6, units=8, attention=attention, **kwargs)


@pytest.fixture(scope="module")
def bahdanau_model():
    """`small_model()`, shared by the tests that only run it (no training, no
    change to its weights), drawn after the seed the autouse fixture sets."""
    keras.utils.set_random_seed(1234)
    return small_model()


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong"])
def test_decode_step_equals_teacher_forced_call(attention):
    model = small_model(attention, num_encoder_layers=2)
    full = np.asarray(model([SOURCE, TARGET_IN]))
    steps = seq2seq_checks.step_by_step_logits(model, SOURCE, TARGET_IN)
    np.testing.assert_allclose(steps, full, atol=1e-6)


@pytest.mark.parametrize("attention", [pytest.param(None, marks=pytest.mark.slow), "bahdanau",
                                       pytest.param("luong", marks=pytest.mark.slow)])
def test_mixed_float16_logits_are_float32_and_training_works(attention):
    # Under the global mixed_float16 policy the layers compute in float16 but
    # the output projection in float32, as in the Transformer (its test checks
    # the same); generate under mixed precision is checked in test_base.py.
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = small_model(attention)
        assert model.decoder.cell.compute_dtype == "float16"
        assert model.decoder.output_dense.compute_dtype == "float32"
        logits = model([SOURCE, TARGET_IN])
        step_logits = seq2seq_checks.step_by_step_logits(model, SOURCE, TARGET_IN)
        model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
        history = model.fit([SOURCE, TARGET_IN], TARGET_OUT, epochs=1, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert logits.dtype == "float32" and np.all(np.isfinite(np.asarray(logits)))
    assert step_logits.dtype == np.float32 and np.all(np.isfinite(step_logits))
    np.testing.assert_allclose(step_logits, np.asarray(logits), atol=1e-2)
    assert np.isfinite(history.history["loss"][0])
    assert all(np.all(np.isfinite(w)) for w in model.get_weights())


def test_state_contract_shapes(bahdanau_model):
    state = bahdanau_model.encode(SOURCE)
    for key, value in state.items():
        assert value.shape[0] == 3, key
    assert set(state) >= {"decoder_state", "source_mask", "attention_weights"}
    assert small_model(None).encode(SOURCE).keys() == {"decoder_state", "context"}


@pytest.mark.parametrize("attention", [None, "bahdanau"])
def test_padding_invariance(attention, bahdanau_model):
    model = bahdanau_model if attention == "bahdanau" else small_model(attention)
    seq2seq_checks.assert_padding_changes_nothing(model, atol=1e-6)


def test_attention_weights_are_a_distribution_over_real_source(bahdanau_model):
    weights = np.asarray(bahdanau_model.teacher_forced_attention(SOURCE, TARGET_IN))
    assert weights.shape == (3, 5, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[1, :, 2:] == 0)


def test_shared_embeddings_need_one_vocabulary():
    model = build_rnn_seq2seq(12, 12, embedding_dim=6, units=8, share_embeddings=True)
    assert model.encoder.embedding is model.decoder.embedding
    with pytest.raises(ValueError, match="share_embeddings"):
        build_rnn_seq2seq(12, 11, share_embeddings=True)


def test_bad_vocab_size():
    with pytest.raises(ValueError, match="source_vocab_size"):
        build_rnn_seq2seq(0, 11)
    with pytest.raises(ValueError, match="source_tokenizer"):
        build_rnn_seq2seq(None, 11)


@pytest.fixture(scope="module")
def trained_g2p():
    """A tiny model trained to memorise 30 words."""
    # 105 optimizer steps: all 30 words are right after 30 epochs (93 % after 25)
    model = tiny_g2p_model(build_rnn_seq2seq, 7, embedding_dim=32, units=32, attention="bahdanau",
                           max_target_length=16)
    return train_on_tiny_g2p(model, epochs=35, clipnorm=1.0,
                             metrics=[MaskedTokenAccuracy()])


@pytest.fixture(scope="module")
def trained_rnn():
    """The Bahdanau RNN trained once per session for the other files
    (`trained_tiny_g2p_rnn(seed=3, epochs=10)`: words come out different, most
    of them right), compiled as `trained_g2p` is (clipped Adam, the token
    accuracy metric), for the tests that need a trained model, not one that
    has memorised every word."""
    model, _, _ = trained_tiny_g2p_rnn(seed=3, epochs=10, clipnorm=1.0,
                                       metrics=[MaskedTokenAccuracy()])
    return model, tiny_g2p()[0]


def test_overfits_thirty_words(trained_g2p):
    seq2seq_checks.assert_overfits_thirty_words(*trained_g2p)


def test_keras_save_load_keeps_logits_and_decoding(trained_rnn, tmp_path):
    seq2seq_checks.assert_save_load_keeps_logits_and_decoding(*trained_rnn, tmp_path)


def test_translate_bad_and_odd_inputs(trained_rnn):
    model, entries = trained_rnn
    # One rule for blank texts (API, CLI, exports): "" with score 0.0, others untouched.
    texts, scores = model.translate(["cat", "", "\t \u3000", "cat"], return_scores=True)
    assert texts[1:3] == ["", ""] and scores[1:3] == [0.0, 0.0]
    assert texts[0] == texts[3] == model.translate("cat") and scores[0] < 0
    nbest = model.translate(["   ", "cat"], num_beams=3, num_return=2)
    assert nbest[0] == ["", ""] and len(nbest[1]) == 2
    with pytest.raises(TypeError, match="texts must be text.*Received: source ids"):
        model.translate([42])
    # Unknown characters become [UNK]: the translation is that of the [UNK] ids.
    tokenizer = model.source_tokenizer
    known = "a"
    assert "ß" not in tokenizer.get_vocabulary() and "☃" not in tokenizer.get_vocabulary()
    unk_ids = np.array([[tokenizer.unk_id, tokenizer.unk_id, tokenizer.get_vocabulary().index(known)]])
    # generate has translate's defaults (beam search, 4 beams): the best hypothesis
    expected = model.target_tokenizer.decode_to_strings(np.asarray(model.generate(unk_ids)[0])[:, 0])[0]
    assert model.translate("ß☃" + known) == expected
    # A single string gives a string; scores are finite log-probabilities.
    text, score = model.translate(entries[0][0], return_scores=True)
    assert isinstance(text, str) and np.isfinite(score) and score <= 0
    with pytest.raises(ValueError, match="method"):
        model.translate("cat", method="viterbi")
    with pytest.raises(ValueError, match="max_length"):
        model.translate("cat", max_length=0)


def test_long_source_is_truncated_by_the_tokenizer_max_length(trained_rnn):
    model, entries = trained_rnn
    config = model.source_tokenizer.get_config()
    config["max_length"] = 5
    truncating = RNNSeq2Seq.from_config(
        dict(model.get_config(), source_tokenizer=type(model.source_tokenizer).from_config(config))
    )
    truncating.set_weights(model.get_weights())
    # a memorised word of 5 letters: the comparisons below are not vacuous
    memorised = [w for w, p in entries if len(w) == 5 and model.translate(w) in p]
    assert memorised, "the fixture model should have memorised a word of 5 letters"
    word = memorised[0]
    long_word = word + "zyxwvutsrq" * 10
    assert truncating.translate(long_word) == truncating.translate(long_word[:5])
    assert truncating.translate(long_word) == model.translate(word)


def test_long_source_without_a_limit_is_translated(trained_rnn):
    model, _ = trained_rnn
    assert model.source_tokenizer.max_length is None
    long_word = ("abcdefghij" * 200)[:2000]
    assert model.source_tokenizer.encode([long_word]).to_tensor().shape == (1, 2000)  # not truncated
    translation = model.translate(long_word)
    assert isinstance(translation, str) and translation


def test_beam_scores_equal_teacher_forced_log_probabilities(trained_rnn):
    model, entries = trained_rnn
    words = [w for w, _ in entries[:4]] + ["zebra"]
    for length_penalty in (0.0, 0.8):
        assert_beam_scores_equal_teacher_forcing(model, words, num_beams=4, num_return=3,
                                                 max_length=12, length_penalty=length_penalty)


def test_coverage_penalty_needs_attention(bahdanau_model):
    model = small_model(None)
    with pytest.raises(ValueError, match=r"attention=None.*coverage_penalty=0.5"):
        model.generate(SOURCE, method="beam", num_beams=2, coverage_penalty=0.5)
    ids, _, _ = model.generate(SOURCE, method="beam", num_beams=2, coverage_penalty=0.0, max_length=4)
    assert ids.shape == (3, 1, 4)
    ids, _, _ = bahdanau_model.generate(SOURCE, method="beam", num_beams=2, coverage_penalty=0.5,
                                        max_length=4)
    assert ids.shape == (3, 1, 4)


def test_translate_needs_tokenizers(bahdanau_model):
    with pytest.raises(ValueError, match="tokenizer"):
        bahdanau_model.translate("cat")
    ids, scores, lengths = bahdanau_model.generate(SOURCE, max_length=4)
    assert ids.shape == (3, 1, 4) and lengths.shape == (3, 1)
