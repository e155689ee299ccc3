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
    model.fit(..., callbacks=[
        keras.callbacks.CSVLogger("runs/g2p/history.csv", append=True),
        AtomicModelCheckpoint("runs/g2p/best.keras", monitor="val_loss",
                              save_best_only=True),
        backup,                                    # last: see below
    ])

Put the backup *after* the loggers: callbacks run in list order at the end of
an epoch, so a kill between them leaves a history row for an epoch the backup
does not record yet (the epoch is then rerun and `truncate_history` drops the
stale row) rather than a recorded epoch with no row.
"""

import csv
import json
import math
import os

import keras

# One atomic-write primitive for the whole package; write_text_atomically
# stays importable from here, where it used to live.
from kerasseq._files import replace_atomically, write_text_atomically


class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backup is never half-written.

    Same behaviour as the Keras callback (weights *and* optimizer state are
    backed up at the end of every epoch; the next `fit` with the same
    `backup_dir` restores them and starts at the first unfinished epoch), but
    each backup is a new weights file `epoch-{E}.weights.h5` written through a
    temporary name, followed by an atomic replacement of
    `training_metadata.json`, which names that weights file. The metadata is
    the commit point: a kill at any moment leaves a consistent
    (epoch, weights) pair. Older weights files are removed after the commit.

    Args:
        backup_dir: str, a directory used by this callback only.
        save_freq: "epoch" or an int number of batches (see the Keras callback).
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
            (the number of finished epochs: training goes on at this
            0-based epoch index), or None when it restored nothing (a fresh
            run). `kerasseq.training.DistributedTrainer` starts there.
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, keep_previous=False):
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=delete_checkpoint)
        self.keep_previous = bool(keep_previous)
        self.resume_epoch = None
        self.restored_epoch = None

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

    # Keras calls `_load_model` from `on_train_begin` and `_save_model` at the
    # end of every epoch (or every `save_freq` batches); both are overridden.
    def read_metadata(self):
        """The committed backup as a dict (`epoch`, `batch`, `weights`), or None."""
        if not os.path.exists(self._training_metadata_path):
            return None
        with open(self._training_metadata_path) as handle:
            metadata = json.load(handle)
        weights = os.path.join(self.backup_dir, metadata.get("weights", ""))
        if "weights" not in metadata or not os.path.exists(weights):
            return None  # a plain Keras backup, or an incomplete one: start over
        return metadata

    def completed_epochs(self):
        """Epochs finished by the backed-up run: the epoch `fit` resumes at (0 if none)."""
        metadata = self.read_metadata()
        return 0 if metadata is None else int(metadata["epoch"])

    def _load_model(self):
        self.restored_epoch = None
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
            self.model.optimizer.build(self.model.trainable_variables)
        self.model.load_weights(os.path.join(self.backup_dir, epochs[epoch]))
        self.restored_epoch = epoch
        self._current_epoch = epoch
        _start_keras_fit_at(self.model, epoch)

    def on_train_end(self, logs=None):
        super().on_train_end(logs)
        if self.restored_epoch is not None:
            _start_keras_fit_at(self.model, None)  # a later fit starts afresh

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        name = f"epoch-{self._current_epoch}-batch-{self._last_batch_seen}.weights.h5"
        path = os.path.join(self.backup_dir, name)
        replace_atomically(lambda temporary: self.model.save_weights(temporary, overwrite=True),
                            path, suffix=".weights.h5")
        metadata = {"epoch": self._current_epoch, "batch": self._last_batch_seen, "weights": name}
        keep = {name}
        last = self.read_metadata() if self.keep_previous else None
        if last is not None and last["weights"] != name:
            # The previous *epoch*: a mid-epoch backup (`save_freq` batches) carries it forward.
            previous = ({"epoch": int(last["epoch"]), "weights": last["weights"]}
                        if int(last["epoch"]) < self._current_epoch else last.get("previous"))
            if previous:
                metadata["previous"] = previous
                keep.add(previous["weights"])
        write_text_atomically(self._training_metadata_path, json.dumps(metadata))
        for other in os.listdir(self.backup_dir):
            if other.endswith(".weights.h5") and other not in keep:
                os.remove(os.path.join(self.backup_dir, other))


def _start_keras_fit_at(model, epoch):
    """Make `keras.Model.fit`, which is running `on_train_begin`, start at `epoch`.

    `fit` has no public way for a callback to move its first epoch: it reads
    the model's `_initial_epoch` right after `on_train_begin`, which
    `keras.callbacks.BackupAndRestore` sets when it restores. This is the one
    place kerasseq writes it (for `model.fit`); kerasseq's own code reads the
    callback's public `restored_epoch` instead. `epoch=None` resets it.
    """
    model._initial_epoch = epoch


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """`keras.callbacks.ModelCheckpoint` that writes through a temporary file.

    Takes the arguments of `ModelCheckpoint`. With `save_best_only=True` after
    a resume, pass `initial_value_threshold` = the best monitored value of
    the epochs already run, or the first resumed epoch overwrites a better
    checkpoint.
    """

    def _save_model(self, epoch, batch, logs):
        filepath = self._get_file_path(epoch, batch, logs)
        if not self._should_save_model(epoch, batch, logs, filepath):
            return
        if self.save_weights_only:
            replace_atomically(lambda temporary: self.model.save_weights(temporary, overwrite=True),
                                filepath, suffix=".weights.h5")
        else:
            suffix = ".keras" if filepath.endswith(".keras") else ".h5"
            replace_atomically(lambda temporary: self.model.save(temporary, overwrite=True),
                                filepath, suffix=suffix)


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


class HistoryCSVLogger(keras.callbacks.CSVLogger):
    """`keras.callbacks.CSVLogger(path, append=True)` that keeps columns aligned.

    Keras' logger appending to an existing file writes its rows with the
    columns of the *current* run under the header of the *first* one: a
    resumed run that logs other keys (a metric added, validation dropped)
    shifts every value into the wrong column. This logger compares the
    columns first; when they differ it rewrites the file under one header
    holding the old columns and then the new ones (the old rows get "NA" in
    the new columns, the new rows "NA" in the columns they do not log), and
    appends from there. `read_history` reads "NA" as NaN.
    """

    def __init__(self, filename):
        super().__init__(filename, append=True)

    def on_epoch_end(self, epoch, logs=None):
        if self.keys is None:
            new = _csv_logger_keys(logs or {})
            fields, rows = _read_rows(self.filename)
            if fields:
                old = [field for field in fields if field != "epoch"]
                merged = old + [key for key in new if key not in old]
                if merged != old:  # new columns: one header for old and new rows
                    self._rewrite(["epoch", *merged], rows)
                self.keys = merged  # in the file's order; "NA" for keys a row lacks
        super().on_epoch_end(epoch, logs)

    def _rewrite(self, fields, rows):
        def write(temporary):
            with open(temporary, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=fields, restval="NA")
                writer.writeheader()
                writer.writerows(rows)

        self.csv_file.close()  # opened by on_train_begin on the old file
        replace_atomically(write, self.filename)
        self.csv_file = open(self.filename, "a", newline="")  # noqa: SIM115 (closed by Keras)
        self.append_header = False


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

    def write(temporary):
        with open(temporary, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for epoch in sorted(kept):
                writer.writerow(kept[epoch])

    replace_atomically(write, path)


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


def best_value(history, monitor="val_loss", mode="min"):
    """The best `monitor` value in a `read_history` dict, or None."""
    values = [value for value in history.get(monitor, []) if not math.isnan(value)]
    if not values:
        return None
    return min(values) if mode == "min" else max(values)
