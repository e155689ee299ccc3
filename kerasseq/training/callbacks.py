"""Keras callbacks for sequence training."""

import math
import time

import keras
import numpy as np

from kerasseq._validation import check_int
from kerasseq.evaluation import corpus_bleu

SCHEDULES = ("constant", "linear", "exponential", "inverse_sigmoid")


def teacher_forcing_probability(schedule, index, decay):
    """Bengio et al. (2015) schedules for ε_i, the probability of feeding the truth.

    * linear:          ε_i = max(0, 1 - decay · i)
    * exponential:     ε_i = decay^i                 (decay < 1)
    * inverse_sigmoid: ε_i = decay / (decay + exp(i / decay))   (decay >= 1)
    * constant:        ε_i = 1 - decay  (a fixed sampling probability `decay`)
    """
    if schedule == "linear":
        return max(0.0, 1.0 - decay * index)
    if schedule == "exponential":
        return decay ** index
    if schedule == "inverse_sigmoid":
        return decay / (decay + math.exp(min(index / decay, 700.0)))
    return 1.0 - decay


class ScheduledSampling(keras.callbacks.Callback):
    """Anneals the decoder's scheduled-sampling probability during `fit`.

    At the start of each epoch (or batch, with `update="batch"`) it sets every
    decoder's `sampling_probability` variable to
    `min(max_probability, 1 - ε_i)`, where ε_i is the teacher-forcing
    probability of `teacher_forcing_probability(schedule, i, decay)` and i
    counts epochs (or batches) from 0. Early in training the decoder is fed the
    ground truth (teacher forcing); later, more and more often its own
    predictions, which narrows the gap between training and inference
    (exposure bias).

    Args:
        schedule: "linear", "exponential", "inverse_sigmoid" or "constant".
        decay: float, the schedule's parameter (see above).
        max_probability: float in [0, 1], cap on the sampling probability.
        update: "epoch" or "batch".
        decoder: optional layer with a `sampling_probability` variable; by
            default every such layer of the model.
    """

    def __init__(self, schedule="inverse_sigmoid", decay=10.0, max_probability=0.25,
                 update="epoch", decoder=None):
        super().__init__()
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {list(SCHEDULES)}. Received: schedule={schedule!r}")
        if update not in ("epoch", "batch"):
            raise ValueError(f"update must be 'epoch' or 'batch'. Received: update={update!r}")
        if not 0.0 <= max_probability <= 1.0:
            raise ValueError(
                f"max_probability must be in [0, 1]. Received: max_probability={max_probability!r}"
            )
        if schedule == "exponential" and not 0.0 < decay < 1.0:
            raise ValueError(f"exponential decay must be in (0, 1). Received: decay={decay!r}")
        if schedule == "inverse_sigmoid" and decay < 1.0:
            raise ValueError(f"inverse_sigmoid decay must be >= 1. Received: decay={decay!r}")
        self.schedule = schedule
        self.decay = float(decay)
        self.max_probability = float(max_probability)
        self.update = update
        self.decoder = decoder
        self.history = []
        self._batches_seen = 0

    def _decoders(self):
        if self.decoder is not None:
            return [self.decoder]
        found = [layer for layer in self.model.layers if hasattr(layer, "sampling_probability")
                 and isinstance(layer.sampling_probability, keras.Variable)]
        if not found:
            raise ValueError("ScheduledSampling found no layer with a sampling_probability variable.")
        return found

    def probability(self, index):
        """The sampling probability used at epoch/batch `index`."""
        teacher = teacher_forcing_probability(self.schedule, index, self.decay)
        return min(self.max_probability, 1.0 - teacher)

    def _set(self, index):
        value = self.probability(index)
        for decoder in self._decoders():
            decoder.sampling_probability.assign(value)
        self.history.append(value)

    def on_epoch_begin(self, epoch, logs=None):
        if self.update == "epoch":
            self._set(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if self.update == "batch":
            self._set(self._batches_seen)
            self._batches_seen += 1


class TimeLimit(keras.callbacks.Callback):
    """Stops `fit` after a wall-clock budget, at the end of the running batch.

    Useful to compare models trained for the same time rather than the same
    number of epochs. `stopped_at_epoch` records where it stopped (None if the
    budget was not used up).

    Args:
        seconds: float > 0, the training time budget.
    """

    def __init__(self, seconds):
        super().__init__()
        if not seconds > 0:
            raise ValueError(f"seconds must be > 0. Received: seconds={seconds!r}")
        self.seconds = float(seconds)
        self.stopped_at_epoch = None
        self._epoch = 0
        self._started = None

    def on_train_begin(self, logs=None):
        self._started = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self._started >= self.seconds:
            self.model.stop_training = True
            self.stopped_at_epoch = self._epoch


class DevBleuEarlyStopping(keras.callbacks.Callback):
    """Greedy dev BLEU after every epoch, early stopping on it, best weights restored.

    After every epoch the model translates `sources` (`model.translate`,
    greedy search) and scores them against `references` with corpus BLEU
    (sacreBLEU, `kerasseq.evaluation.corpus_bleu`). The score goes into the
    epoch's logs as `logs[log_name]` (so `History`, `CSVLogger` and the
    learning-curve plot `kerasseq.plotting.plot_learning_curves` see it).
    Training stops after `patience` epochs without a better score, and the
    weights of the best epoch are put back when training ends (like
    `keras.callbacks.EarlyStopping(restore_best_weights=True)` on a metric
    that `fit` itself cannot compute).

    Args:
        sources: list of str, the dev source texts.
        references: list of str (one reference per source) or of lists of
            str (several), as `corpus_bleu` takes them.
        patience: int >= 1, epochs without improvement before stopping.
        batch_size: int, texts translated per batch.
        lowercase: bool, case-insensitive BLEU.
        log_name: str, the key of the score in the epoch logs.
        verbose: 0 (silent) or 1 (one line per epoch: score and seconds).
        **search: more `model.translate` arguments (`max_length`,
            `max_source_length`, `jit_compile`, ...); the method is greedy.

    Attributes:
        best: the best dev BLEU so far (-1.0 before the first epoch).
        best_epoch: its epoch, counted from 1 (None before the first epoch).

    A run resumed from a checkpoint (`fit(initial_epoch=N)`) goes on with
    the state of the interrupted one: `resume(scores, best_weights)` before
    that `fit`, with the N scores the earlier epochs logged and the weights
    of the best of them.

    Example:

    >>> stopper = DevBleuEarlyStopping(["ein Haus"], ["a house"], patience=3)
    >>> # model.fit(..., callbacks=[stopper]); stopper.best, stopper.best_epoch
    """

    def __init__(self, sources, references, patience=4, batch_size=64, lowercase=False,
                 log_name="dev_bleu", verbose=1, **search):
        super().__init__()
        self.sources, self.references = list(sources), list(references)
        if len(self.sources) != len(self.references):
            raise ValueError("sources and references must have the same length. Received: "
                             f"{len(self.sources)} sources, {len(self.references)} references")
        check_int("patience", patience)
        search.pop("method", None)
        self.patience, self.batch_size, self.lowercase = patience, batch_size, bool(lowercase)
        self.log_name, self.verbose, self.search = log_name, verbose, search
        self.best, self.best_epoch, self.best_weights, self.wait = -1.0, None, None, 0
        self._resumed = None  # set by `resume`, taken by the next `on_train_begin`

    def on_train_begin(self, logs=None):
        resumed, self._resumed = self._resumed, None
        self.best, self.best_epoch, self.best_weights, self.wait = resumed or (-1.0, None, None, 0)

    def resume(self, scores, best_weights):
        """Start the next `fit` where a run that logged `scores` left off.

        Args:
            scores: list of float, the dev BLEU of every finished epoch, in
                order (the `log_name` column of their history); the next
                `fit` starts at epoch `len(scores)`.
            best_weights: list of arrays (`model.get_weights()`), the weights
                of the epoch with the best score (the first one of a tie, as
                an uninterrupted run keeps it).

        The next `on_train_begin` takes `best`, `best_epoch` and the epochs
        waited since from `scores` instead of starting afresh; early stopping
        and the weights restored at the end are then those of an
        uninterrupted run.
        """
        scores = [float(score) for score in scores]
        if not scores or not all(math.isfinite(score) for score in scores):
            raise ValueError("scores must be the finite dev BLEU of at least one finished "
                             f"epoch. Received: scores={scores!r}")
        if best_weights is None:
            raise ValueError("best_weights must be the weights of the best epoch, "
                             "model.get_weights() of its checkpoint. Received: None")
        best_epoch = self.best_epoch_of(scores)
        best = scores[best_epoch - 1]
        wait = len(scores) - best_epoch
        if wait >= self.patience:
            raise ValueError(
                f"the run stopped early already: its best score {best:.2f} (epoch {best_epoch}) "
                f"is {wait} epochs old, and patience={self.patience} ends a run after "
                f"{self.patience} epochs without a better one")
        self._resumed = (best, best_epoch, [np.array(w) for w in best_weights], wait)

    @staticmethod
    def best_epoch_of(scores):
        """The epoch (from 1) this callback keeps as the best of `scores`.

        The highest score; of a tie, the first epoch (a later equal score is
        not better, so the weights kept are the earlier ones). None when
        `scores` is empty.
        """
        scores = [float(score) for score in scores]
        return scores.index(max(scores)) + 1 if scores else None

    def on_epoch_end(self, epoch, logs=None):
        started = time.time()
        hypotheses = self.model.translate(self.sources, method="greedy",
                                          batch_size=self.batch_size, **self.search)
        bleu = corpus_bleu(hypotheses, self.references, lowercase=self.lowercase)
        if logs is not None:
            logs[self.log_name] = bleu
        if self.verbose:
            print(f"  epoch {epoch + 1}: dev BLEU {bleu:.2f} ({time.time() - started:.0f} s)",
                  flush=True)
        if bleu > self.best:
            self.best, self.best_epoch, self.wait = bleu, epoch + 1, 0
            self.best_weights = self.model.get_weights()
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


class NonFiniteLossError(RuntimeError):
    """Raised by `StopOnNonFiniteLoss` when training produced NaN or inf.

    Attributes:
        epoch: 1-based epoch in which it happened.
        batch: 1-based batch of that epoch, or None when it was found at the
            end of the epoch (in the weights or the validation loss).
        value: the non-finite value, or None for non-finite weights.
    """

    def __init__(self, message, epoch, batch=None, value=None):
        super().__init__(message)
        self.epoch, self.batch, self.value = epoch, batch, value


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops `fit` at the first non-finite loss, before anything is saved.

    Keras' `TerminateOnNaN` only sets `stop_training`: the epoch still ends,
    so `on_epoch_end` callbacks (`CSVLogger`, `ModelCheckpoint`,
    `BackupAndRestore`) record the broken epoch and its NaN weights. This
    callback raises `NonFiniteLossError` instead, at the end of the batch whose
    training loss is NaN or inf, and at the end of an epoch whose weights or
    validation loss are not finite (an update of the last batch can break the
    weights while the loss it reported was still finite). Put it FIRST in the
    callback list: the callbacks after it never see the broken epoch, so the
    last checkpoint, backup and history row are those of the last finite
    epoch.

    Example:

    >>> try:                                                    # doctest: +SKIP
    ...     model.fit(data, epochs=10, callbacks=[StopOnNonFiniteLoss(), backup])
    ... except NonFiniteLossError as error:
    ...     print(error.epoch, error.batch)
    """

    def __init__(self):
        super().__init__()
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(float(np.asarray(loss))):
            value = float(np.asarray(loss))
            raise NonFiniteLossError(
                f"the training loss became {value} at epoch {self._epoch + 1}, batch "
                f"{batch + 1}; training stopped before that epoch was recorded (lower the "
                "learning rate or clip the gradients)",
                epoch=self._epoch + 1, batch=batch + 1, value=value,
            )

    def on_epoch_end(self, epoch, logs=None):
        for name in ("loss", "val_loss"):
            value = (logs or {}).get(name)
            if value is not None and not np.isfinite(float(np.asarray(value))):
                raise NonFiniteLossError(
                    f"the {name} of epoch {epoch + 1} is {float(np.asarray(value))}; training "
                    "stopped before that epoch was recorded",
                    epoch=epoch + 1, value=float(np.asarray(value)),
                )
        if not all_weights_finite(self.model):
            raise NonFiniteLossError(
                f"the weights hold NaN or inf after epoch {epoch + 1}; training stopped "
                "before that epoch was recorded (lower the learning rate or clip the "
                "gradients)", epoch=epoch + 1,
            )


def all_weights_finite(model):
    """True when every weight of `model` is finite (no NaN, no inf)."""
    return all(
        np.all(np.isfinite(keras.ops.convert_to_numpy(weight)))
        for weight in model.weights
        if np.issubdtype(np.dtype(weight.dtype), np.floating)
    )
