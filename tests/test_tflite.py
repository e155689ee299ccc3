"""TFLite: both models convert, and greedy search over the interpreter gives
the tokens of `model.generate(method="greedy")` on a batch of words."""

import os

import numpy as np
import pytest

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.tflite import TFLiteGreedyDecoder, convert_to_tflite, export_tflite
from tests.models.g2p_fixture import tiny_g2p, trained_tiny_g2p_rnn

pytest.importorskip("ai_edge_litert", reason="pip install -e '.[tflite]' (ai-edge-litert)")

MAX_LENGTH = 10


@pytest.fixture(scope="module")
def rnn():
    model, words, _ = trained_tiny_g2p_rnn(seed=0, epochs=3)
    return model, words


@pytest.fixture(scope="module")
def transformer():
    _, _, source, target = tiny_g2p()
    model = build_transformer_seq2seq(num_layers=2, d_model=16, num_heads=2, dff=32,
                                      max_positions=12, source_tokenizer=source,
                                      target_tokenizer=target)
    return model


@pytest.fixture(scope="module")
def rnn_quantized(rnn):
    """The RNN converted with dynamic-range quantization (4 rows of 12 tokens): one
    conversion for the quantization test and the decoder's input checks."""
    model, _ = rnn
    return convert_to_tflite(model, batch_size=4, source_length=12, max_length=MAX_LENGTH,
                             quantize="dynamic_range")


def _ids(model, words):
    return model.source_tokenizer.encode(words).to_tensor().numpy()


def _assert_same_as_keras(model, words, decoder, no_repeat_ngram_size=0, ban_unk=False):
    source_ids = _ids(model, words)
    tokens, lengths = decoder.greedy(source_ids, MAX_LENGTH, no_repeat_ngram_size, ban_unk=ban_unk)
    expected_tokens, _, expected_lengths = model.generate(
        source_ids, method="greedy", max_length=MAX_LENGTH,
        no_repeat_ngram_size=no_repeat_ngram_size, ban_unk=ban_unk)
    np.testing.assert_array_equal(tokens, expected_tokens[:, 0])  # (rows, num_return=1, ...)
    np.testing.assert_array_equal(lengths, expected_lengths[:, 0])
    return tokens


def test_rnn_converts_and_greedy_equals_keras(rnn, rnn_quantized, tmp_path):
    model, words = rnn
    path = export_tflite(model, tmp_path / "g2p_rnn.tflite", batch_size=8, source_length=12,
                         max_length=MAX_LENGTH)
    assert sorted(os.listdir(tmp_path)) == ["g2p_rnn.tflite"]  # no temporary left behind
    decoder = TFLiteGreedyDecoder(path)
    assert (decoder.batch_size, decoder.source_length) == (8, 12)
    tokens = _assert_same_as_keras(model, words[:8], decoder)
    assert len({tuple(row) for row in tokens}) > 1  # a trained model: outputs differ by word
    _assert_same_as_keras(model, words[8:11], decoder)  # fewer rows than the batch
    # Dynamic-range quantization: the same model (4 rows instead of 8: the rows add
    # no weights) in well under the full model's bytes. (Merged here from
    # test_dynamic_range_quantization_is_smaller_and_decodes: one full conversion.)
    assert len(rnn_quantized) < 0.6 * os.path.getsize(path)


def test_transformer_converts_and_greedy_equals_keras(transformer):
    _, pairs, _, _ = tiny_g2p()
    words = [word for word, _ in pairs[:6]]
    decoder = TFLiteGreedyDecoder(convert_to_tflite(transformer, batch_size=6,
                                                    max_length=transformer.max_positions))
    assert decoder.source_length == decoder.max_length == transformer.max_positions
    plain = _assert_same_as_keras(transformer, words, decoder)
    # An untrained model repeats its tokens: the guard (no token twice) changes them.
    guarded = _assert_same_as_keras(transformer, words, decoder, no_repeat_ngram_size=1)
    assert not np.array_equal(plain, guarded)
    with pytest.raises(ValueError, match="no_repeat_ngram_size must be >= 0"):
        decoder.greedy(_ids(transformer, words), MAX_LENGTH, no_repeat_ngram_size=-1)

    # Step by step through the whole cache, fed the same (random) tokens: the
    # interpreter's logits are Keras' logits at every position.
    import tensorflow as tf

    source_ids = np.zeros((6, transformer.max_positions), "int32")
    ids = _ids(transformer, words)
    source_ids[:, :ids.shape[1]] = ids
    tokens = np.random.default_rng(0).integers(4, transformer.target_vocab_size,
                                               (transformer.max_positions, 6)).astype("int32")
    state = transformer.encode(tf.constant(source_ids), max_length=transformer.max_positions)
    lite_state = {key: value for key, value in decoder._encode(source_ids=source_ids).items()
                  if not key.startswith("limit_")}
    for step in range(transformer.max_positions):
        logits, state = transformer.decode_step(tf.constant(tokens[step]), state, tf.constant(step))
        result = decoder._step(token_ids=tokens[step], step=np.int32(step), **lite_state)
        np.testing.assert_allclose(result.pop("logits"), logits, atol=2e-4)
        lite_state = result


def test_greedy_never_generates_pad_or_start_and_bans_unk_on_request():
    # An untrained RNN whose output bias favours [PAD] (0), [UNK] (1) and [START] (2):
    # the loop bans 0 and 2 (tokens inside the length are never 0) and, with
    # ban_unk, 1, as the Keras searches do.
    from tests.decoding.test_banned_ids import favour_special_ids
    from tests.models.g2p_fixture import tiny_g2p_model

    model = favour_special_ids(tiny_g2p_model(build_rnn_seq2seq, 0, embedding_dim=8, units=8,
                                              max_target_length=MAX_LENGTH))
    words = [word for word, _ in tiny_g2p()[1][:4]]
    decoder = TFLiteGreedyDecoder(convert_to_tflite(model, batch_size=4, source_length=12,
                                                    max_length=MAX_LENGTH))
    for ban_unk in (False, True):
        tokens = _assert_same_as_keras(model, words, decoder, ban_unk=ban_unk)
        _, lengths = decoder.greedy(_ids(model, words), MAX_LENGTH, ban_unk=ban_unk)
        generated = np.concatenate([row[:length] for row, length in zip(tokens, lengths,
                                                                       strict=True)])
        assert generated.size and not np.isin(generated, [0, 2]).any()
        assert (1 in generated) != ban_unk
    with pytest.raises(ValueError, match="ban_unk must be a bool"):
        decoder.greedy(_ids(model, words), MAX_LENGTH, ban_unk=1)


def test_dynamic_range_quantization_decodes(rnn, rnn_quantized):
    # Its size against the full conversion: test_rnn_converts_and_greedy_equals_keras.
    model, words = rnn
    tokens, lengths = TFLiteGreedyDecoder(rnn_quantized).greedy(_ids(model, words[:4]),
                                                                MAX_LENGTH)
    assert tokens.shape == (4, MAX_LENGTH) and (tokens < model.target_vocab_size).all()


def test_bad_input_is_refused(rnn, rnn_quantized, transformer):
    model, words = rnn
    with pytest.raises(ValueError, match="quantize must be one of"):
        convert_to_tflite(model, quantize="int4")
    with pytest.raises(ValueError, match="batch_size must be"):
        convert_to_tflite(model, batch_size=0)
    with pytest.raises(ValueError, match=r"source_length: max_source_length must be <= the model's max_positions=12"):
        convert_to_tflite(transformer, source_length=13)
    # The decoder's checks, on the quantized conversion of 4 rows of 12 tokens.
    decoder = TFLiteGreedyDecoder(rnn_quantized)
    with pytest.raises(ValueError, match="at most 4 rows of 12 tokens"):
        decoder.greedy(_ids(model, words[:5]), MAX_LENGTH)  # too many rows
    with pytest.raises(ValueError, match="at most 4 rows of 12 tokens"):
        decoder.greedy(np.ones((2, 13), "int32"), MAX_LENGTH)  # too long
    with pytest.raises(ValueError, match=r"shape \(rows, length\)"):
        decoder.greedy(np.array([1.5, 2.0]), MAX_LENGTH)
    with pytest.raises(ValueError, match=rf"max_length must be <= {MAX_LENGTH}"):
        decoder.greedy(_ids(model, words[:2])[:, :4], MAX_LENGTH + 1)
    with pytest.raises(ValueError, match=r"source_ids must hold ids in \[0, "):
        decoder.greedy(np.array([[model.source_vocab_size, 1]]), MAX_LENGTH)
