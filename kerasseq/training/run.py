"""`TrainingRun`: the files of one training run in a directory, and their rules.

What `kerasseq train` guarantees, for a Python user too:

* **resume** — a rerun of an interrupted run continues at its first
  unfinished epoch (weights and optimizer state from `backup/`);
* **nothing lost** — a rerun of a finished run with the same number of
  epochs does nothing; with more epochs it continues from the backup and
  appends to `history.csv`; only `clear()` (`--overwrite`) starts over, and it
  deletes the run's own files, nothing else;
* **nothing silently wrong** — a NaN or inf loss stops training before the
  broken epoch reaches any file, and `model.keras` is never written with
  non-finite weights;
* **atomic files** — every file is replaced atomically (`kerasseq._files`).

| file | content |
|---|---|
| `backup/` | weights + optimizer state of the last finished epoch (kept) |
| `checkpoints/` | `epoch_XXX.keras`, the last N epochs, with `keep_checkpoints=N` (`kerasseq.training.average_checkpoints`) |
| `tokenizers.json` | the vocabularies the run was trained with |
| `history.csv` | one row per finished epoch |
| `best.keras` | the model of the best `val_loss` so far |
| `model.keras`, `summary.json` | written when the requested epochs are done |
| `backup-worker-{i}/` | worker i's backup (multi-worker runs, i >= 1) |

Multi-worker runs (`strategy=` a `tf.distribute.MultiWorkerMirroredStrategy`,
every worker running the same code with the same `output_dir`, shared or
not): only the chief (worker 0) writes the files above; worker i writes
nothing but its own `backup-worker-{i}/`, so on a shared file system nothing
of the chief's is clobbered. Every backup keeps the last two epochs. On a
restart the workers agree (a collective) on the last epoch *all* of them
backed up, restore it and go on from there: no epoch is lost or run twice,
whichever worker died and when.

Example:

>>> run = TrainingRun("runs/g2p")                        # doctest: +SKIP
>>> if run.status(epochs=10) != "complete":               # doctest: +SKIP
...     source, target = run.tokenizers(source, target)
...     model = build(...); model.compile(...)
...     history = run.fit(model, train_data, dev_data, epochs=10)
...     run.finish(model, {"epochs": 10})
"""

import functools
import json
import os
import shutil

import keras
import tensorflow as tf

from kerasseq._files import save_model_atomically, write_text_atomically
from kerasseq._validation import ArgumentError, check_positive_int
from kerasseq.data import make_dataset
from kerasseq.training.averaging import (
    CHECKPOINT_PATTERN,
    KeepLastCheckpoints,
    epoch_checkpoints,
)
from kerasseq.training.callbacks import (
    NonFiniteLossError,
    StopOnNonFiniteLoss,
    all_weights_finite,
)
from kerasseq.training.checkpoints import (
    AtomicBackupAndRestore,
    AtomicModelCheckpoint,
    HistoryCSVLogger,
    best_value,
    read_history,
    truncate_history,
)
from kerasseq.training.distribute import check_global_batch_size, read_tf_config
from kerasseq.training.trainer import (
    DistributedTrainer,
    max_over_workers,
    min_over_workers,
    sharded_dataset_fn,
)

RUN_FILES = ("model.keras", "summary.json", "best.keras", "history.csv", "tokenizers.json")
BACKUP_DIR = "backup"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINTS_DIR = "checkpoints"


def _is_multi_worker(strategy):
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


class TrainingRun:
    """The output directory of one training run.

    Args:
        output_dir: str or path-like; created if missing.
        overwrite: bool; True deletes the run's own files first (start over).
        strategy: optional `tf.distribute.Strategy`. A
            `MultiWorkerMirroredStrategy` makes this a multi-worker run (see
            above; `TF_CONFIG` says which worker this process is), and `fit`
            then trains with `DistributedTrainer`.

    Raises:
        ValueError: `output_dir` exists and is not a directory, or cannot be
            created (a `kerasseq._validation.ArgumentError` naming it in
            `.field`, which `kerasseq train` maps to `--output-dir`).
    """

    def __init__(self, output_dir, overwrite=False, strategy=None):
        self.strategy = strategy
        self.worker_index, self.num_workers = 0, 1
        if strategy is not None and _is_multi_worker(strategy):
            cluster = read_tf_config()
            self.worker_index, self.num_workers = cluster["worker_index"], cluster["workers"]
        self.output_dir = os.fspath(output_dir)
        if os.path.lexists(self.output_dir) and not os.path.isdir(self.output_dir):
            raise ArgumentError("output_dir", f"output_dir {self.output_dir!r} exists and is "
                                              "not a directory")
        try:
            os.makedirs(self.output_dir, exist_ok=True)
        except OSError as error:
            raise ArgumentError("output_dir", f"cannot create output_dir {self.output_dir!r}: "
                                              f"{error.strerror or error}") from None
        if overwrite:
            self.clear()
        backup_dir = BACKUP_DIR if self.is_chief else f"{BACKUP_DIR}-worker-{self.worker_index}"
        self.backup = AtomicBackupAndRestore(self.path(backup_dir), delete_checkpoint=False,
                                             keep_previous=self.multi_worker)
        self._agreed_epochs = None

    @property
    def is_chief(self):
        """True for the process that writes the run's files (always, on one machine)."""
        return self.worker_index == 0

    @property
    def multi_worker(self):
        return self.num_workers > 1 or (self.strategy is not None and _is_multi_worker(self.strategy))

    # ------------------------------------------------------------- files
    def path(self, name):
        return os.path.join(self.output_dir, name)

    @property
    def model_path(self):
        return self.path("model.keras")

    @property
    def history_path(self):
        return self.path("history.csv")

    def clear(self):
        """Delete the run's own files (`RUN_FILES`, `backup/`, `tensorboard/`, the epoch
        checkpoints of `checkpoints/`), nothing else.

        A worker other than the chief deletes only its own backup.
        """
        if not self.is_chief:
            shutil.rmtree(self.path(f"{BACKUP_DIR}-worker-{self.worker_index}"), ignore_errors=True)
            return
        shutil.rmtree(self.path(TENSORBOARD_DIR), ignore_errors=True)
        for name in RUN_FILES:
            if os.path.isfile(self.path(name)) or os.path.islink(self.path(name)):
                os.remove(self.path(name))
        shutil.rmtree(self.path(BACKUP_DIR), ignore_errors=True)
        for path in self.epoch_checkpoints():
            os.remove(path)
        if os.path.isdir(self.path(CHECKPOINTS_DIR)) and not os.listdir(self.path(CHECKPOINTS_DIR)):
            os.rmdir(self.path(CHECKPOINTS_DIR))

    def epoch_checkpoints(self, last=None):
        """The kept `checkpoints/epoch_XXX.keras` files, oldest first (see `fit`)."""
        return epoch_checkpoints(self.path(CHECKPOINTS_DIR), last=last)

    def completed_epochs(self):
        """Epochs finished and backed up (0 for a new run).

        In a multi-worker run: the last epoch that every worker backed up
        (agreed on by a collective the first time it is asked: every worker
        must call it, as `status` and `fit` do).
        """
        if not self.multi_worker:
            return self.backup.completed_epochs()
        if self._agreed_epochs is None:
            self._agreed_epochs = min_over_workers(self.strategy, self.backup.completed_epochs())
            self.backup.resume_epoch = self._agreed_epochs
        return self._agreed_epochs

    def is_finished(self):
        """True once `finish` wrote `model.keras` and `summary.json` (the chief's, in a
        multi-worker run: a collective there)."""
        finished = os.path.exists(self.model_path) and os.path.exists(self.path("summary.json"))
        if not self.multi_worker:
            return finished

        return bool(max_over_workers(self.strategy, int(finished and self.is_chief)))

    def status(self, epochs):
        """`"new"`, `"resume"` (interrupted or to be continued) or `"complete"`.

        Raises:
            ValueError: a finished run without the backup needed to continue it.
        """
        completed = self.completed_epochs()
        if self.is_finished():  # (both collectives in a multi-worker run, in this order)
            if completed == 0:
                raise ValueError(
                    f"{self.output_dir!r} holds a finished run without the backup/ needed to "
                    "continue it; pass --overwrite to start over, or use a new --output-dir")
            return "complete" if epochs <= completed else "resume"
        return "resume" if completed else "new"

    # -------------------------------------------------------- tokenizers
    def tokenizers(self, source_tokenizer, target_tokenizer):
        """The run's tokenizers: the saved ones when resuming, else these (saved).

        Raises:
            ValueError: resuming with data whose vocabularies differ (an
                `ArgumentError` naming `output_dir`).
        """
        path = self.path("tokenizers.json")
        if not self.is_chief:
            # Built by every worker from the same data: the chief's, which it saves.
            return source_tokenizer, target_tokenizer
        if self.completed_epochs() and os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                saved = [keras.saving.deserialize_keras_object(config)
                         for config in json.load(handle)]
            for side, fresh, old in zip(("source", "target"), (source_tokenizer, target_tokenizer),
                                        saved, strict=True):
                if fresh.get_vocabulary() != old.get_vocabulary():
                    raise ArgumentError("output_dir", (
                        f"{self.output_dir!r} holds an interrupted run trained with a different "
                        f"{side} vocabulary ({old.vocabulary_size} tokens; this data gives "
                        f"{fresh.vocabulary_size}): was the data changed? Use another "
                        "output_dir, or overwrite=True to start over."))
            return tuple(saved)
        write_text_atomically(path, json.dumps(
            [keras.saving.serialize_keras_object(tokenizer)
             for tokenizer in (source_tokenizer, target_tokenizer)]))
        return source_tokenizer, target_tokenizer

    # ---------------------------------------------------------- training
    def callbacks(self, extra=(), keep_checkpoints=0):
        """`[StopOnNonFiniteLoss, CSVLogger, best.keras checkpoint, (epoch
        checkpoints,) backup, *extra]`.

        With `keep_checkpoints=N` (N >= 1) the model of every epoch is saved
        as `checkpoints/epoch_XXX.keras` and the newest N are kept
        (`KeepLastCheckpoints`), for `kerasseq.training.average_checkpoints`.
        Also drops the `history.csv` rows of epochs that will run again.
        """
        completed = self.completed_epochs()
        if not self.is_chief:  # writes nothing of the run's: its own backup only
            return [StopOnNonFiniteLoss(), self.backup, *extra]
        best_so_far = self.discard_epochs_from(completed)
        epochs = ([KeepLastCheckpoints(self.path(CHECKPOINTS_DIR), keep=keep_checkpoints)]
                  if keep_checkpoints else [])
        return [
            StopOnNonFiniteLoss(),  # first: a NaN epoch never reaches the ones below
            HistoryCSVLogger(self.history_path),
            AtomicModelCheckpoint(self.path("best.keras"), monitor="val_loss",
                                  save_best_only=True, initial_value_threshold=best_so_far),
            *epochs,  # before the backup: a recorded epoch always has its checkpoint
            self.backup,  # after the loggers: a recorded epoch always has its history row
            *extra,
        ]

    def discard_epochs_from(self, completed):
        """Remove what the chief wrote for epochs `>= completed` (they run again).

        A process killed after an epoch's files were written but before its
        backup, or a multi-worker rollback (the workers agree on the last
        epoch *all* of them backed up, which may be one before the chief's),
        leaves files of epochs that the resumed `fit` runs again: their
        `history.csv` rows, their `checkpoints/epoch_XXX.keras` (kept, they
        would be refused by `KeepLastCheckpoints` or averaged as the newest)
        and a `best.keras` they wrote. All three go.

        Returns:
            The best `val_loss` of the kept epochs while `best.keras` holds
            one of them (the threshold of the next `best.keras`), else None.
        """
        best_before = best_value(read_history(self.history_path))
        truncate_history(self.history_path, completed)
        best_kept = best_value(read_history(self.history_path))
        best_path = self.path("best.keras")
        if os.path.exists(best_path) and self._best_is_from_a_discarded_epoch(
                best_path, completed, best_before != best_kept):
            os.remove(best_path)
        for path in self.epoch_checkpoints():
            number = int(CHECKPOINT_PATTERN.fullmatch(os.path.basename(path)).group(1))
            if number > completed:  # epoch_XXX.keras is epoch XXX - 1 (0-based)
                os.remove(path)
        return best_kept if os.path.exists(best_path) else None

    def _best_is_from_a_discarded_epoch(self, best_path, completed, best_row_discarded):
        """Whether `best.keras` was written by an epoch `>= completed`.

        The epoch that ends at `completed` wrote `best.keras` (if it was the
        best) *before* its backup file: a `best.keras` newer than that backup
        file comes from a later epoch. Without the backup file (none kept),
        the history says it: the best row was among the discarded ones.
        """
        if completed == 0:
            return True
        weights = self.backup.backed_up_epochs().get(completed)
        if weights is None:
            return best_row_discarded
        backup_file = os.path.join(self.backup.backup_dir, weights)
        return os.path.getmtime(best_path) > os.path.getmtime(backup_file)

    def datasets(self, train_pairs, dev_pairs, source_tokenizer, target_tokenizer, batch_size,
                 seed=0, bucket_boundaries="auto", fixed_shapes=True, batch_tokens=None):
        """The training and dev data `fit` wants for this run's strategy.

        One machine: `kerasseq.data.make_dataset` batches (training batches
        shuffled with `seed` and bucketed by length, dev batches in order),
        each a multiple of the replicas (`batch_multiple`). Multi-worker:
        dataset *functions* (`sharded_dataset_fn`) with which each worker
        batches its own shard (`pairs[i::workers]`) at `batch_size /
        replicas`. A Python user gets what `kerasseq train` gets by calling
        this.

        Args:
            train_pairs, dev_pairs: lists of `(source, target)` str pairs
                (`dev_pairs` may be empty or None: no validation data).
            source_tokenizer, target_tokenizer: fitted tokenizers.
            batch_size: int, the global batch (a multiple of the replicas);
                with `batch_tokens`, the most rows of a training batch, or
                None for no limit (dev batches then have 64 rows).
            seed: int, the shuffle seed of the training data.
            bucket_boundaries: as in `make_dataset` (`"auto"`: by length).
            fixed_shapes: as in `make_dataset`: True (a few batch shapes, what
                XLA wants) or False (each batch as long as its longest
                sequence: less padding where no XLA compiles; `kerasseq train`
                passes the compiled model's `jit_compile`).
            batch_tokens: optional int, training batches by token count
                (`make_dataset`'s `batch_tokens`: each length bucket's
                batches hold about this many tokens, padding included;
                rows a multiple of the replicas). One machine only.

        Returns:
            `(train_data, dev_data)`; `dev_data` is None without dev pairs.

        Raises:
            ValueError: `batch_size` is not a multiple of the replicas
                (`check_global_batch_size`); `batch_tokens` under a
                multi-worker strategy, or `batch_size` None without it.
        """
        replicas = self.strategy.num_replicas_in_sync if self.strategy is not None else 1
        if batch_tokens is not None:
            batch_tokens = check_positive_int("batch_tokens", batch_tokens)
            if self.multi_worker:
                raise ValueError(
                    "batch_tokens works on one machine only: under MultiWorkerMirroredStrategy "
                    "every worker must step with the same global batch rows, which batches by "
                    "token count do not keep. Received: batch_tokens="
                    f"{batch_tokens} with {replicas} replicas on several workers; use batch_size")
        elif batch_size is None:
            raise ValueError("batch_size must be an int (examples per batch); only with "
                             "batch_tokens may it be None. Received: batch_size=None")
        if batch_size is not None:
            check_global_batch_size(batch_size, replicas)
        if self.multi_worker:  # each worker batches its shard at batch_size / replicas
            batches = sharded_dataset_fn
        else:  # global batches, each a multiple of the replicas
            batches = functools.partial(make_dataset, batch_multiple=replicas)
        tokenizers = (source_tokenizer, target_tokenizer)
        by_tokens = {} if batch_tokens is None else {"batch_tokens": batch_tokens}
        train_data = batches(train_pairs, *tokenizers, batch_size, seed=seed,
                             bucket_boundaries=bucket_boundaries, fixed_shapes=fixed_shapes,
                             **by_tokens)
        dev_rows = batch_size if batch_size is not None else 64
        dev_data = (batches(dev_pairs, *tokenizers, dev_rows, shuffle=False, fixed_shapes=fixed_shapes)
                    if dev_pairs else None)
        return train_data, dev_data

    def fit(self, model, train_data, validation_data=None, epochs=1, verbose="auto", callbacks=(),
            keep_checkpoints=0):
        """`model.fit` with the run's callbacks; resumes / continues from the backup.

        `keep_checkpoints=N` keeps the models of the last N epochs in
        `checkpoints/` (see `callbacks`).

        Raises:
            NonFiniteLossError: the loss became NaN or inf (nothing of that
                epoch was written; the message says what the run keeps).
        """
        # The backup restores the state after `completed` epochs; fit goes on from there.
        completed = self.completed_epochs()
        callbacks = self.callbacks(callbacks, keep_checkpoints)
        try:
            if self.multi_worker:
                # Keras 3's fit cannot run under MultiWorkerMirroredStrategy.
                return DistributedTrainer(model, self.strategy).fit(
                    train_data, validation_data=validation_data, epochs=epochs,
                    initial_epoch=completed, callbacks=callbacks,
                    verbose=verbose if self.is_chief else 0)
            # shuffle=False: datasets are shuffled by their pipeline; Keras
            # ignores (and warns about) `shuffle` for a tf.data.Dataset.
            return model.fit(train_data, validation_data=validation_data, epochs=epochs,
                             initial_epoch=completed, callbacks=callbacks, verbose=verbose,
                             shuffle=False)
        except NonFiniteLossError as error:
            finished = self.backup.completed_epochs()
            kept = (f"the {finished} finished epoch(s) (backup and history.csv)"
                    if finished else "no finished epoch")
            raise NonFiniteLossError(
                f"{error}. Nothing of that epoch was saved: {self.output_dir!r} keeps {kept}",
                error.epoch, error.batch, error.value,
            ) from None

    def finish(self, model, summary):
        """Write `model.keras` and `summary.json` (with the whole history).

        Returns:
            The summary dict written (with `history` of all epochs).

        In a multi-worker run only the chief writes; the other workers return
        the summary without writing anything.

        Raises:
            ValueError: the model holds NaN or inf weights (nothing written).
        """
        if not self.is_chief:
            return {**summary, "history": {}}
        if not all_weights_finite(model):
            raise ValueError("training ended with NaN or inf weights; model.keras was not written")
        save_model_atomically(model, self.model_path)
        history = read_history(self.history_path)
        history.pop("epoch", None)
        summary = {**summary, "history": history}
        write_text_atomically(self.path("summary.json"),
                              json.dumps(summary, indent=2, default=float))
        return summary
