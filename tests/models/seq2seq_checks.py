"""Checks that both seq2seq models (RNN and Transformer) must pass, written
once and called from test_rnn_seq2seq.py and test_transformer_seq2seq.py (two
files, so that pytest-xdist's `--dist loadfile` can give them to two workers)."""

import os

import keras
import numpy as np

from kerasseq.evaluation import word_error_rate

SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 5, 0, 0, 0, 0], [6, 6, 6, 6, 6, 6]], "int32")
TARGET_IN = np.array([[2, 5, 7, 4, 9], [2, 6, 0, 0, 0], [2, 8, 8, 8, 8]], "int32")
TARGET_OUT = np.array([[5, 7, 4, 9, 3], [6, 3, 0, 0, 0], [8, 8, 8, 8, 3]], "int32")


def step_by_step_logits(model, source, target_in):
    """The logits of `decode_step` fed `target_in` one position at a time."""
    state = model.encode(source)
    outputs = []
    for t in range(target_in.shape[1]):
        logits, state = model.decode_step(target_in[:, t], state, t)
        outputs.append(np.asarray(logits))
    return np.stack(outputs, axis=1)  # (batch_size, target_length, vocab_size)


def assert_padding_changes_nothing(model, atol):
    """Extra source padding, and extra target padding, change no logit.

    Returns:
        The logits of `model([SOURCE, TARGET_IN])`.
    """
    base = np.asarray(model([SOURCE, TARGET_IN]))
    more_source = np.asarray(model([np.pad(SOURCE, ((0, 0), (0, 5))), TARGET_IN]))
    more_target = np.asarray(model([SOURCE, np.pad(TARGET_IN, ((0, 0), (0, 4)))]))
    np.testing.assert_allclose(more_source, base, atol=atol)
    np.testing.assert_allclose(more_target[:, :5], base, atol=atol)
    return base


def assert_overfits_thirty_words(model, entries):
    """`model` translates at least 95% of the words it was trained on right."""
    words = [w for w, _ in entries]
    hypotheses = model.translate(words)
    accuracy = 1.0 - word_error_rate(hypotheses, [prons for _, prons in entries])
    assert accuracy >= 0.95, list(zip(words, hypotheses, strict=True))


def assert_save_load_keeps_logits_and_decoding(model, entries, directory, searches=({},)):
    """A `.keras` round trip of `model` gives an instance of its class with the
    same logits and, for each `translate` settings in `searches`, the same
    translations of 8 words."""
    path = os.path.join(directory, "g2p.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, type(model))
    source_ids = np.asarray(model.source_tokenizer.encode(["cat", "hello"]).to_tensor())
    target_in = np.array([[2, 5, 6, 7, 8], [2, 7, 8, 0, 0]], "int32")
    np.testing.assert_allclose(np.asarray(loaded([source_ids, target_in])),
                               np.asarray(model([source_ids, target_in])), atol=1e-6)
    words = [w for w, _ in entries[:8]]
    for search in searches:
        assert loaded.translate(words, **search) == model.translate(words, **search)
