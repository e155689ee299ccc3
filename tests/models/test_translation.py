"""`kerasseq.translate(model, texts_or_ids)`: the high-level entry point."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasseq
from kerasseq import translate
from kerasseq.data import batch_shapes, make_dataset
from tests.models.g2p_fixture import trained_tiny_g2p_rnn


@pytest.fixture(scope="module")
def g2p():
    """A small RNN trained for 30 steps: outputs differ from word to word."""
    return trained_tiny_g2p_rnn(seed=3, epochs=10)


def test_exported_at_the_top_level():
    assert kerasseq.translate is translate


def test_text_input_equals_the_model_method(g2p):
    model, words, _ = g2p
    words = words[:7]
    beam = model.translate(words, method="beam", num_beams=4)
    assert len(set(beam)) > 1  # the comparison below is not between constant outputs
    assert translate(model, words) == beam  # default: beam search, 4 beams
    assert translate(model, words, batch_size=3) == beam
    assert translate(model, words[0]) == beam[0]
    assert translate(model, words, method="greedy") == model.translate(words, method="greedy")
    assert model.translate(words) == beam  # one set of defaults: beam search, 4 beams
    assert translate(model, words, num_beams=2, length_penalty=0.6) == model.translate(
        words, method="beam", num_beams=2, length_penalty=0.6)
    texts, scores = translate(model, words, return_scores=True)
    expected_texts, expected_scores = model.translate(words, method="beam", num_beams=4,
                                                      return_scores=True)
    assert texts == expected_texts
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)
    nbest = translate(model, words[:2], num_beams=3, num_return=3)
    assert [len(items) for items in nbest] == [3, 3] and [items[0] for items in nbest] == beam[:2]


def test_id_input_equals_generate(g2p):
    model, words, _ = g2p
    source_ids = model.source_tokenizer.encode(words[:7])
    dense = np.asarray(source_ids.to_tensor())
    expected = [np.asarray(x) for x in model.generate(dense, method="beam", num_beams=4)]
    for given in (dense, tf.constant(dense), source_ids, dense.tolist()):
        outputs = translate(model, given, batch_size=3)  # 3 + 3 + 1 rows
        assert len(outputs) == 3
        np.testing.assert_array_equal(outputs[0], expected[0])
        np.testing.assert_allclose(outputs[1], expected[1], atol=1e-5)
        np.testing.assert_array_equal(outputs[2], expected[2])
    ids, _, _ = translate(model, dense, method="greedy")
    assert ids.shape[:2] == (7, 1)  # the n-best axis, one hypothesis
    np.testing.assert_array_equal(ids, np.asarray(model.generate(dense, method="greedy")[0]))
    assert len(translate(model, dense, return_log_probs=True)) == 4


def test_dataset_input(g2p):
    model, words, pairs = g2p
    words = words[:7]
    expected = model.translate(words, method="beam", num_beams=4)
    strings = tf.data.Dataset.from_tensor_slices(words)
    assert translate(model, strings, verbose=0) == expected
    assert translate(model, strings.batch(3), verbose=0) == expected
    # Training batches ((source_ids, target_in_ids), target_out_ids): the sources are
    # decoded; the text path on the same words is the reference.
    training = make_dataset(pairs[:7], model.source_tokenizer, model.target_tokenizer,
                            batch_size=3, shuffle=False)
    ids, scores, lengths = translate(model, training, verbose=0)
    # 3 batches of 3 rows: 7 pairs and two neutral rows, which are left out
    assert sum(rows for ((rows, _), *_) in batch_shapes(training).elements()) == 9
    assert ids.shape == (7, 1, model.max_target_length) and scores.shape == lengths.shape == (7, 1)
    source_words = [word for (source, _), target_out in training.as_numpy_iterator()
                    for word, labels in zip(model.source_tokenizer.decode_to_strings(source),
                                            target_out, strict=True) if labels.any()]
    assert source_words == [source for source, _ in pairs[:7]]
    assert model.target_tokenizer.decode_to_strings(ids[:, 0]) == model.translate(
        source_words, method="beam", num_beams=4)
    # A dataset of unbatched id sequences: one row each.
    sequences = tf.data.Dataset.from_generator(
        lambda: iter(model.source_tokenizer.encode(words[:3])),
        output_signature=tf.TensorSpec((None,), tf.int32))
    ids, _, _ = translate(model, sequences, verbose=0)
    assert model.target_tokenizer.decode_to_strings(ids[:, 0]) == expected[:3]


def test_progress_bar(g2p, capsys):
    model, words, _ = g2p
    translate(model, words[:5], verbose=0)
    assert capsys.readouterr().out == ""
    translate(model, words[:5], batch_size=2, verbose=1)
    out = capsys.readouterr().out
    assert "5/5" in out and "2/5" in out  # one bar over all 5 texts, updated per batch
    translate(model, tf.data.Dataset.from_tensor_slices(words[:4]).batch(2))  # auto: on
    assert "4/4" in capsys.readouterr().out
    translate(model, words[:4])  # auto: off for lists
    assert capsys.readouterr().out == ""


def test_bad_inputs_are_named(g2p):
    model, words, _ = g2p
    for bad in (42, None, {"text": "cat"}, np.ones((2, 3), "float32"), [[1, 2], [3]]):
        with pytest.raises(TypeError, match="texts_or_ids must be a str, a list of str"):
            translate(model, bad)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        translate(model, ["cat", 42])
    with pytest.raises(TypeError, match="model must follow the kerasseq decoding contract"):
        translate(keras.Sequential([keras.layers.Dense(2)]), "cat")
    with pytest.raises(TypeError, match="dataset element 0 is a dict"):
        translate(model, tf.data.Dataset.from_tensor_slices({"source": ["cat"]}))
    with pytest.raises(TypeError, match="dataset element 0 of shape"):
        translate(model, tf.data.Dataset.from_tensor_slices([[0.5, 1.5]]))
    with pytest.raises(ValueError, match="infinite"):
        translate(model, tf.data.Dataset.from_tensor_slices(["cat"]).repeat())
    texts = words[:3] * 30
    texts[70] = 5
    with pytest.raises(TypeError, match=r"texts\[70\] must be a str"):  # index in the whole input
        translate(model, texts, batch_size=64)
    texts[70] = " "  # one blank text does not sink the batch: "" with score 0.0
    translations, scores = translate(model, texts, batch_size=64, return_scores=True)
    assert translations[70] == "" and scores[70] == 0.0
    assert translations[:70] + translations[71:] == translate(model, texts[:70] + texts[71:])
    with pytest.raises(ValueError, match="batch_size"):
        translate(model, "cat", batch_size=0)
    with pytest.raises(ValueError, match="method"):
        translate(model, "cat", method="viterbi")
    with pytest.raises(ValueError, match="source_ids"):
        translate(model, np.array([[5, model.source_vocab_size]]))


def test_translate_accepts_what_translator_accepts():
    """A non-Keras object meeting the encode/decode_step contract (the sheep/ship
    Markov table) decodes through kerasseq.translate as through Translator."""
    from kerasseq import Translator
    from tests.test_translator import TableDecodable

    table = TableDecodable()
    ids = np.array([[4, 5]], np.int32)
    expected = Translator(table, method="beam", num_beams=2).generate(ids)
    for ours, theirs in zip(translate(table, ids, method="beam", num_beams=2), expected,
                            strict=True):
        np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(ValueError, match="return_alignments needs text input"):
        translate(table, ids, return_alignments=True)


def test_model_translate_accepts_the_text_that_translate_accepts(g2p):
    """`model.translate` takes a `tf.string` tensor, a NumPy array of strings, a
    `tf.data.Dataset` of strings and UTF-8 bytes (invalid bytes as U+FFFD), through
    the conversion of `kerasseq.translate`; source ids are refused with a pointer."""
    model, words, _ = g2p
    words = words[:5]
    expected = model.translate(words, num_beams=2)
    assert len(set(expected)) > 1
    assert model.translate(tf.constant(words), num_beams=2) == expected
    assert model.translate(np.array(words), num_beams=2) == expected
    assert model.translate(tf.data.Dataset.from_tensor_slices(words).batch(2),
                           num_beams=2) == expected
    assert model.translate(tf.data.Dataset.from_tensor_slices(words), num_beams=2) == expected
    assert model.translate([word.encode() for word in words], num_beams=2) == expected
    assert translate(model, tf.constant(words), num_beams=2) == expected
    # invalid UTF-8 bytes: U+FFFD, as an export does (tf.strings.unicode_transcode)
    bad = words[0].encode() + b"\xe9"
    replaced = tf.strings.unicode_transcode(bad, "UTF-8", "UTF-8", errors="replace")
    assert replaced.numpy().decode("utf-8") == words[0] + "\ufffd"
    assert model.translate(tf.constant([bad]), num_beams=2) == model.translate(
        [words[0] + "\ufffd"], num_beams=2)
    texts, scores = model.translate(tf.constant(words), num_beams=2, return_scores=True)
    assert texts == expected and len(scores) == len(words)
    with pytest.raises(TypeError, match=r"source ids; decode ids with model.generate"):
        model.translate(model.source_tokenizer.encode(words).to_tensor())
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        model.translate(["cat", 42])
