"""Crash-safe checkpoints for resumable training.

Keras writes its checkpoints in place: a process killed while
`BackupAndRestore` or `ModelCheckpoint` is writing leaves a truncated file
behind, and `BackupAndRestore` writes the weights and the epoch number as two
separate files, so a kill between the two pairs the weights of one epoch with
the epoch number of another. The callbacks here write every file to a
temporary name in the same directory and `os.replace` it into place (an atomic
rename on POSIX and Windows), so a reader sees either the old or the new file,
never a partial one.

    backup = AtomicBackupAndRestore("runs/g2p/backup")
    completed = backup.completed_epochs()          # 0 on a fresh run
    truncate_history("runs/g2p/history.csv", completed)
    model.fit(..., initial_epoch=completed, callbacks=[
        keras.callbacks.CSVLogger("runs/g2p/history.csv", append=True),
        AtomicModelCheckpoint("runs/g2p/best.keras", monitor="val_loss",
                              save_best_only=True),
        backup,                                    # last: see below
    ])

Pass `initial_epoch=backup.completed_epochs()`: see `AtomicBackupAndRestore`.
Put the backup *after* the loggers: callbacks run in list order at the end of
an epoch, so a kill between them leaves a history row for an epoch the backup
does not record yet (the epoch is then rerun and `truncate_history` drops the
stale row) rather than a recorded epoch with no row.
"""

import csv
import json
import math
import os
import shutil

import keras
import numpy as np

from kerasseq._files import (
    remove_stale_siblings,
    replace_atomically,
    temporary_path,
    write_text_atomically,
)
from kerasseq._validation import check_positive_int

METADATA_FILE = "training_metadata.json"


class AtomicBackupAndRestore(keras.callbacks.Callback):
    """A `keras.callbacks.BackupAndRestore` whose backup is never half-written.

    Like the Keras callback, it backs up the weights *and* the optimizer state
    at the end of every epoch (or every `save_freq` batches) and restores them
    in `on_train_begin` of the next `fit` with the same `backup_dir`. Each
    backup is a new weights file `epoch-{E}-batch-{B}.weights.h5` (E finished
    epochs; B is 0, or the last batch done in a backup within an epoch)
    written through a temporary name, followed by an atomic replacement of
    `training_metadata.json`, which names that weights file. The metadata is
    the commit point: a kill at any moment leaves a consistent (epoch,
    weights) pair. Older weights files are removed after the commit.

    Unlike the Keras callback, it does not move the epoch `fit` starts at
    (Keras has no public way to): pass `initial_epoch=backup.completed_epochs()`
    to `fit` (`TrainingRun.fit` does). A `fit` that starts at another epoch
    than the one restored stops with a `ValueError` before its first step.

    Args:
        backup_dir: str, a directory used by this callback only.
        save_freq: "epoch" or an int number of batches (a backup within an
            epoch restarts that epoch from its start, with those weights).
        delete_checkpoint: bool, remove `backup_dir` when `fit` ends. Pass
            False when something must still happen after `fit` (saving the
            final model) and remove it yourself afterwards.
        keep_previous: bool, also keep the backup before the last one
            (multi-worker runs: a worker killed while the others commit epoch
            E+1 has committed E, so the workers can always agree on one epoch
            that every one of them holds; see `resume_epoch`).

    Attributes:
        resume_epoch: None (resume at the last backup) or an epoch number
            that `on_train_begin` restores instead: the last or, with
            `keep_previous`, the one before.
        restored_epoch: the epoch that the last `on_train_begin` restored
            (the number of finished epochs: `fit`'s `initial_epoch`), or None
            when it restored nothing (a fresh run).
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, keep_previous=False):
        super().__init__()
        if not backup_dir:
            raise ValueError(f"backup_dir must be a directory. Received: backup_dir={backup_dir!r}")
        if save_freq != "epoch":
            save_freq = check_positive_int("save_freq", save_freq)
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = bool(delete_checkpoint)
        self.keep_previous = bool(keep_previous)
        self.resume_epoch = None
        self.restored_epoch = None
        self._epoch = 0  # finished epochs: the epoch under way (0-based)
        self._batches = 0  # batches done in that epoch
        self._unsaved_batches = 0
        self._expected_first_epoch = None  # the epoch `fit` must start at (after a restore)

    @property
    def _metadata_path(self):
        return os.path.join(self.backup_dir, METADATA_FILE)

    def read_metadata(self):
        """The committed backup as a dict (`epoch`, `batch`, `weights`), or None."""
        if not os.path.exists(self._metadata_path):
            return None
        with open(self._metadata_path) as handle:
            metadata = json.load(handle)
        weights = os.path.join(self.backup_dir, metadata.get("weights", ""))
        if "weights" not in metadata or not os.path.exists(weights):
            return None  # a plain Keras backup, or an incomplete one: start over
        return metadata

    def backed_up_epochs(self):
        """`{epoch: weights file name}` of the backups on disk (last, and previous if kept)."""
        metadata = self.read_metadata()
        if metadata is None:
            return {}
        epochs = {int(metadata["epoch"]): metadata["weights"]}
        previous = metadata.get("previous")
        if previous and os.path.exists(os.path.join(self.backup_dir, previous["weights"])):
            epochs[int(previous["epoch"])] = previous["weights"]
        return epochs

    def completed_epochs(self):
        """Epochs finished by the backed-up run: the `initial_epoch` of the resumed `fit` (0 if none).

        (With `resume_epoch` set, `fit` resumes at `resume_epoch` instead.)
        """
        metadata = self.read_metadata()
        return 0 if metadata is None else int(metadata["epoch"])

    # ------------------------------------------------------------ restore
    def on_train_begin(self, logs=None):
        self.restored_epoch = self._expected_first_epoch = None
        if not self.model.built:
            raise ValueError(
                "AtomicBackupAndRestore needs a built model before fit(). "
                f"Received: an unbuilt model {self.model.name!r}"
            )
        epochs = self.backed_up_epochs()
        epoch = max(epochs, default=0) if self.resume_epoch is None else int(self.resume_epoch)
        if epoch == 0:
            return
        if epoch not in epochs:
            raise ValueError(
                f"{self.backup_dir!r} holds no backup of epoch {epoch} (it holds epochs "
                f"{sorted(epochs) or 'none'}); the workers of a multi-worker run must share one "
                "run directory layout and be restarted together")
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)  # before its state loads
        self.model.load_weights(os.path.join(self.backup_dir, epochs[epoch]))
        self.restored_epoch = self._expected_first_epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        expected, self._expected_first_epoch = self._expected_first_epoch, None
        if expected is not None and epoch != expected:
            how = ("initial_epoch=backup.completed_epochs()" if self.resume_epoch is None
                   else "initial_epoch=backup.resume_epoch")
            raise ValueError(
                f"fit started at epoch {epoch}, but the backup in {self.backup_dir!r} restored "
                f"the state after {expected} finished epochs: pass initial_epoch={expected} to "
                f"fit (e.g. {how}), so that it goes on at the first unfinished epoch")
        self._epoch, self._batches = epoch, 0

    # ------------------------------------------------------------- backup
    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        # `batch` is the last batch done (several with `steps_per_execution`).
        self._unsaved_batches += batch + 1 - self._batches
        self._batches = batch + 1
        if self._unsaved_batches >= self.save_freq:
            self._unsaved_batches = 0
            self._save(batch)

    def on_epoch_end(self, epoch, logs=None):
        self._epoch, self._batches = epoch + 1, 0
        if self.save_freq == "epoch":
            self._save(0)

    def on_train_end(self, logs=None):
        if self.delete_checkpoint and os.path.exists(self.backup_dir):
            shutil.rmtree(self.backup_dir)

    def _save(self, batch):
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"epoch-{self._epoch}-batch-{batch}.weights.h5"
        replace_atomically(lambda temporary: self.model.save_weights(temporary, overwrite=True),
                           os.path.join(self.backup_dir, name), suffix=".weights.h5")
        metadata = {"epoch": self._epoch, "batch": batch, "weights": name}
        keep = {name}
        last = self.read_metadata() if self.keep_previous else None
        if last is not None and last["weights"] != name:
            # The previous *epoch*: a mid-epoch backup (`save_freq` batches) carries it forward.
            previous = ({"epoch": int(last["epoch"]), "weights": last["weights"]}
                        if int(last["epoch"]) < self._epoch else last.get("previous"))
            if previous:
                metadata["previous"] = previous
                keep.add(previous["weights"])
        write_text_atomically(self._metadata_path, json.dumps(metadata))
        for other in os.listdir(self.backup_dir):
            if other.endswith(".weights.h5") and other not in keep:
                os.remove(os.path.join(self.backup_dir, other))


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """`keras.callbacks.ModelCheckpoint` whose files appear whole or not at all.

    Takes the arguments of `ModelCheckpoint`. Keras' callback writes into a
    hidden staging directory next to `filepath` (its `filepath` attribute is
    that staging pattern); after each of its epoch and batch hooks, what it
    wrote is renamed into place with `os.replace`. With `save_best_only=True`
    after a resume, pass `initial_value_threshold` = the best monitored value
    of the epochs already run, or the first resumed epoch overwrites a better
    checkpoint.
    """

    def __init__(self, filepath, *args, **kwargs):
        # The staging directory sits in the last directory of `filepath`
        # without a {placeholder} (same file system: the rename is atomic).
        parts = os.path.normpath(os.fspath(filepath)).split(os.sep)
        fixed = next(i for i, part in enumerate(parts) if "{" in part or i == len(parts) - 1)
        self._target_dir = os.sep.join(parts[:fixed]) or os.curdir
        # `.checkpoint.tmp-PID-TOKEN`, kerasseq._files' one scheme; a killed
        # run's staging directory is removed by the next run in that directory.
        staged_name = os.path.join(self._target_dir, "checkpoint")
        remove_stale_siblings(staged_name)
        self._staging_dir = temporary_path(staged_name)
        super().__init__(os.path.join(self._staging_dir, *parts[fixed:]), *args, **kwargs)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self._publish()

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        self._publish()

    def _publish(self):
        """Move every file Keras wrote into the staging directory to its place."""
        if not os.path.isdir(self._staging_dir):
            return
        for directory, _, names in os.walk(self._staging_dir):
            place = os.path.join(self._target_dir, os.path.relpath(directory, self._staging_dir))
            os.makedirs(place, exist_ok=True)
            for name in names:
                os.replace(os.path.join(directory, name), os.path.join(place, name))
        shutil.rmtree(self._staging_dir)


# ------------------------------------------------------------- history.csv
def _read_rows(path):
    if not os.path.exists(path):
        return [], []
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        rows = []
        for row in reader:
            try:
                row["epoch"] = int(row["epoch"])
            except (KeyError, TypeError, ValueError):
                continue  # a torn last line
            if None in row or any(value is None for value in row.values()):
                continue
            rows.append(row)
    return fields, rows


class HistoryCSVLogger(keras.callbacks.Callback):
    """`keras.callbacks.CSVLogger(path, append=True)` that keeps columns aligned.

    Writes the file Keras' logger writes (a header `epoch,<sorted log keys>`,
    `val_` columns added when the logs have none, one row per epoch, flushed
    at once), appending to an existing file. Keras' logger, appending, writes
    its rows with the columns of the *current* run under the header of the
    *first* one: a resumed run that logs other keys (a metric added,
    validation dropped) shifts every value into the wrong column. This logger
    compares the columns first; when they differ it rewrites the file under
    one header holding the old columns and then the new ones (the old rows
    get "NA" in the new columns, the new rows "NA" in the columns they do not
    log), and appends from there. `read_history` reads "NA" as NaN. It is a
    plain `keras.callbacks.Callback` (no internals of Keras' logger).

    Args:
        filename: str, the CSV file.
    """

    def __init__(self, filename):
        super().__init__()
        self.filename = os.fspath(filename)
        self.columns = None

    def on_train_begin(self, logs=None):
        self.columns = None  # chosen from the first epoch's logs

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        header = False
        if self.columns is None:
            fields, rows = _read_rows(self.filename)
            old = [field for field in fields if field != "epoch"]
            merged = old + [key for key in _csv_logger_keys(logs) if key not in old]
            if fields and merged != old:  # new columns: one header for old and new rows
                _write_csv(self.filename, ["epoch", *merged], rows)
            self.columns = merged  # in the file's order; "NA" for keys a row lacks
            header = not fields
        row = {"epoch": epoch, **{key: _csv_value(logs.get(key, "NA")) for key in self.columns}}
        with open(self.filename, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["epoch", *self.columns])
            if header:
                writer.writeheader()
            writer.writerow(row)


def _write_csv(path, fields, rows):
    """Write `rows` (dicts) under the header `fields` atomically; "NA" where a row lacks a field."""
    def write(temporary):
        with open(temporary, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields, restval="NA")
            writer.writeheader()
            writer.writerows(rows)

    replace_atomically(write, path)


def _csv_value(value):
    """A log value as Keras' CSVLogger writes it (a sequence as "[a, b]")."""
    if isinstance(value, str) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return f"[{', '.join(map(str, value))}]"
    return value


def _csv_logger_keys(logs):
    """The columns `keras.callbacks.CSVLogger` writes for these logs (without
    "epoch"): the sorted keys, plus `val_` ones when the logs have none."""
    keys = sorted(logs)
    if keys and not any(key.startswith("val_") for key in keys):
        keys += [f"val_{key}" for key in keys]
    return keys


def truncate_history(path, completed_epochs):
    """Keep only the rows of epochs `< completed_epochs` in a CSVLogger file.

    Run it before a resumed `fit` that appends to `path`: rows of epochs that
    will run again (a kill after the row was written but before the backup),
    duplicates and torn lines are dropped, so the file ends with one row per
    finished epoch. With `completed_epochs=0` the file is removed.

    Args:
        path: str, the `CSVLogger` file.
        completed_epochs: int, the epoch the resumed `fit` starts at.
    """
    fields, rows = _read_rows(path)
    kept = {}
    for row in rows:
        if row["epoch"] < completed_epochs:
            kept[row["epoch"]] = row  # the last row of an epoch wins
    if not kept:
        if os.path.exists(path):
            os.remove(path)
        return
    _write_csv(path, fields, [kept[epoch] for epoch in sorted(kept)])


def read_history(path):
    """A CSVLogger file as `{"epoch": [...], metric: [floats]}`, one entry per epoch.

    Rows are sorted by epoch; for a repeated epoch the last row wins.
    """
    fields, rows = _read_rows(path)
    by_epoch = {row["epoch"]: row for row in rows}
    history = {field: [] for field in fields}
    for epoch in sorted(by_epoch):
        for field in fields:
            value = by_epoch[epoch][field]
            history[field].append(epoch if field == "epoch" else _to_float(value))
    return history


def _to_float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def best_value(history):
    """The smallest `val_loss` in a `read_history` dict, or None."""
    values = [value for value in history.get("val_loss", []) if not math.isnan(value)]
    return min(values) if values else None
