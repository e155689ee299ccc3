"""`kerasseq.training.checkpoints`: backups and checkpoints that a kill never leaves half-written.

A resumed `model.fit` starts at `initial_epoch=backup.completed_epochs()`
(public Keras API: the callback does not move `fit`'s first epoch, it checks
it). The command line's kill-and-rerun is tested in tests/test_resume.py.
"""

import json
import os

import keras
import numpy as np
import pytest

from kerasseq.training.checkpoints import AtomicBackupAndRestore, AtomicModelCheckpoint

X = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
Y = X.sum(axis=1, keepdims=True)  # 4 batches of 8


def compiled():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


def fit(model, epochs, callbacks, **kwargs):
    return model.fit(X, Y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
                     callbacks=callbacks, **kwargs)


def state(model):
    """Weights and optimizer variables (Adam's moments, the iteration count)."""
    # v.numpy(), not np.array(v): a Keras Variable's __array__ lacks NumPy 2's
    # `copy` argument (a DeprecationWarning for every variable).
    return [np.array(v.numpy()) for v in model.weights + model.optimizer.variables]


class Crash(keras.callbacks.Callback):
    """Stands in for a kill at the start of epoch `at`."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.at:
            raise KeyboardInterrupt


class Snapshots(keras.callbacks.Callback):
    """The model's state at every epoch's end, and at the first epoch's start."""

    def __init__(self):
        super().__init__()
        self.at_end, self.at_start = {}, None

    def on_epoch_begin(self, epoch, logs=None):
        if self.at_start is None:
            self.at_start = state(self.model)

    def on_epoch_end(self, epoch, logs=None):
        self.at_end[epoch] = state(self.model)


def crashed_run(backup_dir, at=2, **backup_args):
    """A fit of 4 epochs killed at the start of epoch `at`; its snapshots."""
    snapshots = Snapshots()
    with pytest.raises(KeyboardInterrupt):
        fit(compiled(), 4, [AtomicBackupAndRestore(backup_dir, **backup_args), snapshots,
                            Crash(at)])
    return snapshots


def assert_same(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_killed_fit_resumes_at_the_first_unfinished_epoch_with_weights_and_optimizer(tmp_path):
    backup_dir = str(tmp_path / "backup")
    snapshots = crashed_run(backup_dir)
    # A new process: a freshly built model, a new callback on the same directory.
    backup = AtomicBackupAndRestore(backup_dir)
    assert backup.completed_epochs() == 2
    model, resumed = compiled(), Snapshots()
    history = fit(model, 4, [backup, resumed], initial_epoch=backup.completed_epochs())
    assert backup.restored_epoch == 2 and history.epoch == [2, 3]
    assert_same(resumed.at_start, snapshots.at_end[1])  # bit-identical, Adam's state included
    assert int(model.optimizer.iterations.numpy()) == 16  # 4 epochs of 4 steps
    # The same as a run that was never interrupted.
    uninterrupted = compiled()
    fit(uninterrupted, 4, [])
    for a, b in zip(state(model), state(uninterrupted), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert not os.path.exists(backup_dir)  # delete_checkpoint=True: removed when fit ends


def test_a_fit_that_does_not_start_at_the_restored_epoch_stops_before_its_first_step(tmp_path):
    backup_dir = str(tmp_path / "backup")
    snapshots = crashed_run(backup_dir)
    model, backup = compiled(), AtomicBackupAndRestore(backup_dir)
    with pytest.raises(ValueError, match=r"fit started at epoch 0, but the backup in .*backup' "
                       r"restored the state after 2 finished epochs: pass initial_epoch=2 to fit "
                       r"\(e\.g\. initial_epoch=backup\.completed_epochs\(\)\)"):
        fit(model, 4, [backup])
    assert_same(state(model), snapshots.at_end[1])  # restored, and no step ran
    assert backup.completed_epochs() == 2  # the backup is untouched (not deleted)
    with pytest.raises(ValueError, match="fit started at epoch 3.* pass initial_epoch=2"):
        fit(compiled(), 4, [backup], initial_epoch=3)  # an epoch would be skipped
    assert fit(compiled(), 4, [backup], initial_epoch=2).epoch == [2, 3]
    # Nothing to restore: fit starts where it is told.
    assert fit(compiled(), 3, [backup], initial_epoch=1).epoch == [1, 2]


def test_resume_epoch_restores_the_previous_backup_and_fit_must_start_there(tmp_path):
    backup_dir = str(tmp_path / "backup")
    snapshots = crashed_run(backup_dir, at=3, keep_previous=True, delete_checkpoint=False)
    backup = AtomicBackupAndRestore(backup_dir, keep_previous=True, delete_checkpoint=False)
    assert backup.backed_up_epochs() == {3: "epoch-3-batch-0.weights.h5",
                                         2: "epoch-2-batch-0.weights.h5"}
    backup.resume_epoch = 2  # e.g. the epoch every worker of a multi-worker run holds
    with pytest.raises(ValueError, match=r"fit started at epoch 3.*after 2 finished epochs: "
                       r"pass initial_epoch=2 .*initial_epoch=backup\.resume_epoch"):
        fit(compiled(), 4, [backup], initial_epoch=backup.completed_epochs())
    model, resumed = compiled(), Snapshots()
    assert fit(model, 4, [backup, resumed], initial_epoch=2).epoch == [2, 3]
    assert_same(resumed.at_start, snapshots.at_end[1])
    backup.resume_epoch = 1
    with pytest.raises(ValueError, match=r"holds no backup of epoch 1 \(it holds epochs \[3, 4\]\)"):
        fit(compiled(), 4, [backup], initial_epoch=1)


def test_backups_written_before_are_restored_and_plain_keras_ones_ignored(tmp_path):
    """The on-disk format: `training_metadata.json` names the weights file to restore."""
    trained = compiled()
    fit(trained, 2, [])
    backup_dir = tmp_path / "backup"
    backup_dir.mkdir()
    trained.save_weights(str(backup_dir / "epoch-2-batch-0.weights.h5"))
    (backup_dir / "training_metadata.json").write_text(  # as the callback wrote it so far
        '{"epoch": 2, "batch": 0, "weights": "epoch-2-batch-0.weights.h5", '
        '"previous": {"epoch": 1, "weights": "epoch-1-batch-0.weights.h5"}}')
    backup = AtomicBackupAndRestore(str(backup_dir), delete_checkpoint=False)
    assert backup.backed_up_epochs() == {2: "epoch-2-batch-0.weights.h5"}  # (previous: gone)
    model, resumed = compiled(), Snapshots()
    assert fit(model, 3, [backup, resumed], initial_epoch=2).epoch == [2]
    assert_same(resumed.at_start, state(trained))
    assert json.loads((backup_dir / "training_metadata.json").read_text()) == {
        "epoch": 3, "batch": 0, "weights": "epoch-3-batch-0.weights.h5"}
    assert sorted(os.listdir(backup_dir)) == ["epoch-3-batch-0.weights.h5",
                                              "training_metadata.json"]
    # Keras' own BackupAndRestore files (no "weights" entry): a fresh start.
    keras_dir = tmp_path / "keras_backup"
    keras_dir.mkdir()
    trained.save_weights(str(keras_dir / "latest.weights.h5"))
    (keras_dir / "training_metadata.json").write_text('{"epoch": 2, "batch": 0}')
    fresh = AtomicBackupAndRestore(str(keras_dir))
    assert fresh.completed_epochs() == 0
    assert fit(compiled(), 1, [fresh]).epoch == [0] and fresh.restored_epoch is None


class FailingSaves(keras.Sequential):
    """A model whose `save_weights` writes half a file and dies, once `fail` is set."""

    fail = False

    def save_weights(self, filepath, *args, **kwargs):
        if self.fail:
            with open(filepath, "wb") as handle:
                handle.write(b"\x89HDF half")
            raise KeyboardInterrupt
        return super().save_weights(filepath, *args, **kwargs)


def test_a_kill_while_writing_leaves_the_last_backup_whole(tmp_path):
    backup_dir = str(tmp_path / "backup")
    keras.utils.set_random_seed(0)
    model = FailingSaves([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    fail_at_epoch_2 = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: setattr(FailingSaves, "fail", epoch == 2))
    snapshots = Snapshots()
    try:
        with pytest.raises(KeyboardInterrupt):
            fit(model, 4, [snapshots, fail_at_epoch_2, AtomicBackupAndRestore(backup_dir)])
    finally:
        FailingSaves.fail = False
    assert sorted(os.listdir(backup_dir)) == ["epoch-2-batch-0.weights.h5",
                                              "training_metadata.json"]  # no temporary left
    backup, resumed = AtomicBackupAndRestore(backup_dir), Snapshots()
    assert backup.completed_epochs() == 2
    fit(compiled(), 3, [backup, resumed], initial_epoch=2)
    assert_same(resumed.at_start[:2], snapshots.at_end[1][:2])  # the epoch-2 weights


def test_backups_every_n_batches_name_the_epoch_and_the_last_batch_done(tmp_path):
    backup_dir = tmp_path / "backup"
    written = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            path = backup_dir / "training_metadata.json"
            if path.exists():
                metadata = json.loads(path.read_text())
                written.append((metadata["epoch"], metadata["batch"]))

    backup = AtomicBackupAndRestore(str(backup_dir), save_freq=3, delete_checkpoint=False)
    fit(compiled(), 2, [backup, Record()])  # 4 batches an epoch
    assert sorted(set(written)) == [(0, 2), (1, 1)]  # after 3 batches, then 3 more
    assert backup.completed_epochs() == 1  # a backup within epoch 1: resume restarts it
    assert fit(compiled(), 2, [backup], initial_epoch=1).epoch == [1]
    with pytest.raises(ValueError, match="save_freq must be an int >= 1"):
        AtomicBackupAndRestore(str(backup_dir), save_freq="batch")


def test_unbuilt_model_is_refused():
    model = keras.Sequential([keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match="needs a built model before fit"):
        fit(model, 1, [AtomicBackupAndRestore("unused")])


def test_model_checkpoint_writes_whole_files_only_where_asked(tmp_path):
    best = tmp_path / "run" / "best.keras"
    every = str(tmp_path / "run" / "epochs" / "{epoch:02d}" / "model-{epoch}.weights.h5")
    scripted = iter([3.0, 2.0, 2.5])
    script = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: logs.update(val_loss=next(scripted)))
    stamps = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: stamps.append(os.path.getmtime(best)))
    model = compiled()
    fit(model, 3, [script, AtomicModelCheckpoint(best, save_best_only=True, monitor="val_loss"),
                   AtomicModelCheckpoint(every, save_weights_only=True), record])
    assert stamps[1] > stamps[0] and stamps[2] == stamps[1]  # epoch 3 was not better
    assert sorted(os.listdir(tmp_path / "run")) == ["best.keras", "epochs"]  # no staging left
    assert sorted(os.listdir(tmp_path / "run" / "epochs")) == ["01", "02", "03"]
    assert os.listdir(tmp_path / "run" / "epochs" / "03") == ["model-3.weights.h5"]
    assert isinstance(keras.saving.load_model(best), keras.Sequential)
    with pytest.raises(ValueError, match="must end in `.weights.h5`"):
        AtomicModelCheckpoint(str(tmp_path / "w.keras"), save_weights_only=True)
