"""Tests for `kerasseq.training.averaging`: epoch checkpoints and their average."""

import os

import keras
import numpy as np
import pytest

from kerasseq.data import make_dataset
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import (
    KeepLastCheckpoints,
    MaskedSparseCategoricalCrossentropy,
    TrainingRun,
    average_checkpoints,
    epoch_checkpoints,
)
from tests.models.g2p_fixture import tiny_g2p


def _rnn(**kwargs):
    _, _, source, target = tiny_g2p()
    settings = dict(embedding_dim=8, units=8, max_target_length=8, source_tokenizer=source,
                    target_tokenizer=target)
    return build_rnn_seq2seq(**{**settings, **kwargs})


def _compiled(model):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=MaskedSparseCategoricalCrossentropy())
    return model


def _data():
    _, pairs, source, target = tiny_g2p()
    return make_dataset(pairs, source, target, batch_size=10, seed=0)


@pytest.fixture(scope="module")
def model():
    """One compiled RNN shared by the tests that train: its training step is
    traced once (by the first test's `fit`) and every later `fit` reuses it.
    Each test trains it on, as the tests before did with a model of their own."""
    keras.utils.set_random_seed(3)
    return _compiled(_rnn())


def test_averaging_a_model_with_itself_changes_nothing(model, tmp_path):
    model.fit(_data(), epochs=2, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    averaged = average_checkpoints([path, path, path])
    assert type(averaged) is type(model) and not averaged.compiled  # no optimizer state
    for ours, theirs in zip(averaged.weights, model.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours),
                                      keras.ops.convert_to_numpy(theirs))
    words = [word for word, _ in tiny_g2p()[0][:6]]
    assert averaged.translate(words) == model.translate(words)
    assert averaged.source_tokenizer.get_vocabulary() == model.source_tokenizer.get_vocabulary()


def test_the_mean_of_two_known_weight_sets_is_exact(tmp_path):
    first, second = _rnn(), _rnn()
    # Small integers / 8: every value and every mean is exact in float32.
    rng = np.random.default_rng(0)
    sets = [[rng.integers(-64, 64, size=tuple(w.shape)).astype(np.float32) / 8
             for w in first.weights] for _ in range(2)]
    paths = []
    for index, (model, values) in enumerate(zip((first, second), sets, strict=True)):
        model.set_weights(values)
        paths.append(str(tmp_path / f"m{index}.keras"))
        model.save(paths[-1])
    averaged = average_checkpoints(paths)
    for weight, a, b in zip(averaged.weights, *sets, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), (a + b) / 2)
    assert averaged.count_params() == first.count_params()


def test_mismatched_checkpoints_raise(tmp_path):
    def saved(model, name):
        path = str(tmp_path / name)
        model.save(path)
        return path

    rnn = saved(_rnn(), "rnn.keras")
    wider = saved(_rnn(embedding_dim=16), "wider.keras")
    luong = saved(_rnn(attention="luong"), "luong.keras")
    _, _, source, target = tiny_g2p()
    transformer = saved(build_transformer_seq2seq(num_layers=1, d_model=8, num_heads=2, dff=16,
                                                  source_tokenizer=source, target_tokenizer=target),
                        "transformer.keras")
    with pytest.raises(ValueError, match=r"one architecture: .*rnn.keras.* is a RNNSeq2Seq, "
                                         r".*transformer.keras.* is a TransformerSeq2Seq"):
        average_checkpoints([rnn, transformer])
    with pytest.raises(ValueError, match=r"differ in embedding_dim \(8 in .*, 16 in .*wider.keras"):
        average_checkpoints([rnn, wider])
    with pytest.raises(ValueError, match="differ in attention"):
        average_checkpoints([rnn, luong])
    with pytest.raises(FileNotFoundError, match="missing.keras"):
        average_checkpoints([rnn, str(tmp_path / "missing.keras")])
    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="list of .keras files"):
        average_checkpoints(rnn)
    # Any Keras model: weights are matched one by one, shapes compared.
    small = saved(keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)]), "small.keras")
    large = saved(keras.Sequential([keras.Input((2,)), keras.layers.Dense(4)]), "large.keras")
    with pytest.raises(ValueError, match=r"weight .*kernel.* is \(2, 3\) float32 in .*small.keras"):
        average_checkpoints([small, large])
    (tmp_path / "broken.keras").write_text("not a zip")
    with pytest.raises(ValueError, match="broken.keras.* is corrupt or unreadable: .*"
                                         r"\(File is not a zip file\)"):
        average_checkpoints([rnn, str(tmp_path / "broken.keras")])
    # a truncated checkpoint (a copy cut short): corrupt, not "File not found"
    data = (tmp_path / "rnn.keras").read_bytes()
    (tmp_path / "truncated.keras").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match="truncated.keras.* is corrupt or unreadable") as raised:
        average_checkpoints([rnn, str(tmp_path / "truncated.keras")])
    assert "not found" not in str(raised.value)


def test_keep_last_checkpoints_keeps_the_newest_and_refuses_a_later_runs_files(model, tmp_path):
    """One run of 3 epochs (keep=3), a new run into its directory (refused), then
    the run resumed for a 4th epoch with keep=2 (accepted; the 2 newest kept).
    Merges the former `test_keep_last_checkpoints_keeps_the_newest` (4 epochs,
    keep=2) and `test_keep_last_checkpoints_refuses_a_later_runs_files`: one
    model, one traced training step."""
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    (directory / "notes.txt").write_text("kept")
    model.fit(_data(), epochs=3, verbose=0, callbacks=[KeepLastCheckpoints(directory, keep=3)])
    assert [os.path.basename(p) for p in epoch_checkpoints(directory)] == [
        "epoch_001.keras", "epoch_002.keras", "epoch_003.keras"]
    # A new run into the same directory starts at epoch 1: epoch_002/003 would win.
    # (The check is the callback's, before the first epoch: any model shows it.)
    with pytest.raises(ValueError, match=r"epoch_001.keras, epoch_002.keras, epoch_003.keras\) "
                                         r"numbered at or above epoch 1"):
        model.fit(_data(), epochs=1, verbose=0, callbacks=[KeepLastCheckpoints(directory)])
    # A resumed run (initial_epoch=3) goes on after them: accepted; keep=2 removes
    # all but the newest two.
    model.fit(_data(), epochs=4, initial_epoch=3, verbose=0,
              callbacks=[KeepLastCheckpoints(directory, keep=2)])
    assert [os.path.basename(p) for p in epoch_checkpoints(directory)] == [
        "epoch_003.keras", "epoch_004.keras"]
    assert (directory / "notes.txt").read_text() == "kept"
    assert not [name for name in os.listdir(directory) if name.startswith(".")]  # no temporaries
    last = keras.models.load_model(epoch_checkpoints(directory)[-1])
    for ours, theirs in zip(last.weights, model.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours),
                                      keras.ops.convert_to_numpy(theirs))
    assert epoch_checkpoints(directory, last=1) == epoch_checkpoints(directory)[-1:]
    assert epoch_checkpoints(tmp_path / "none") == []
    with pytest.raises(ValueError, match="keep must be >= 1"):
        KeepLastCheckpoints(directory, keep=0)


def test_training_run_keeps_epoch_checkpoints_and_clear_removes_them(model, tmp_path):
    run = TrainingRun(tmp_path / "run")
    run.fit(model, _data(), _data(), epochs=3, verbose=0, keep_checkpoints=2)
    assert [os.path.basename(p) for p in run.epoch_checkpoints()] == [
        "epoch_002.keras", "epoch_003.keras"]
    averaged = average_checkpoints(run.epoch_checkpoints())
    assert averaged.count_params() == model.count_params()
    # A continued run numbers its epochs on.
    run.fit(model, _data(), _data(), epochs=4, verbose=0, keep_checkpoints=2)
    assert [os.path.basename(p) for p in run.epoch_checkpoints()] == [
        "epoch_003.keras", "epoch_004.keras"]
    run.clear()
    assert run.epoch_checkpoints() == [] and not (tmp_path / "run" / "checkpoints").exists()
