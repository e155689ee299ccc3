"""Checkpoint averaging: keep the last N epoch checkpoints of a run, average them.

The weights of the last few epochs of one run sit around one minimum; their
element-wise mean is often a better model than any of them (Vaswani et al.,
2017, section 6.1: "the last 5 checkpoints, written at 10-minute intervals";
Popel & Bojar, 2018, "Training Tips for the Transformer Model"). It costs
nothing at decoding time: the result is one model.

    model.fit(..., callbacks=[KeepLastCheckpoints("runs/g2p/checkpoints", keep=5)])
    averaged = average_checkpoints(epoch_checkpoints("runs/g2p/checkpoints"))

`kerasseq train --keep-checkpoints N` keeps them in `OUTPUT_DIR/checkpoints/`
and `kerasseq average OUT.keras IN.keras ...` (or a run directory) averages
them. Ensembling (`kerasseq.models.Ensemble`) is the other way to combine
models: it averages their *predictions*, works across runs and architectures,
and costs one model per member at decoding time.
"""

import os
import re
import zipfile

import keras
import numpy as np

from kerasseq._files import save_model_atomically
from kerasseq._messages import first_line
from kerasseq._validation import check_int
from kerasseq.training.callbacks import all_weights_finite

CHECKPOINT_NAME = "epoch_{epoch:03d}.keras"
CHECKPOINT_PATTERN = re.compile(r"epoch_(\d+)\.keras")

# Settings that do not change a model's weights or its computation at
# inference: checkpoints that differ only in these still average.
_NOT_ARCHITECTURE = ("name", "source_tokenizer", "target_tokenizer", "dropout",
                     "sampling_probability", "trainable", "dtype")


class KeepLastCheckpoints(keras.callbacks.Callback):
    """Save the model after every epoch as `epoch_XXX.keras`; keep the last `keep`.

    Each file is written through a temporary name and renamed into place
    (`kerasseq._files.save_model_atomically`), so a killed process never
    leaves a half-written checkpoint. After each save, the epoch checkpoints
    of `directory` beyond the newest `keep` are deleted; other files are
    never touched. `XXX` is the number of epochs finished (1-based, the
    epoch count of a resumed run included), so the files sort in training
    order. An epoch whose weights are not finite is not saved.

    Args:
        directory: str or path-like, where the checkpoints go (created).
        keep: int >= 1, epoch checkpoints kept.

    Example:

    >>> model.fit(data, epochs=30,                                   # doctest: +SKIP
    ...           callbacks=[KeepLastCheckpoints("runs/g2p/checkpoints", keep=5)])
    >>> average_checkpoints(epoch_checkpoints("runs/g2p/checkpoints"))  # doctest: +SKIP
    """

    def __init__(self, directory, keep=5):
        super().__init__()
        self.directory = os.fspath(directory)
        self.keep = check_int("keep", keep, 1)
        self._checked = False

    def on_epoch_begin(self, epoch, logs=None):
        """Refuse, before the first epoch of a `fit`, checkpoints of a later epoch.

        Epoch numbers restart with every `fit` (or go on from
        `initial_epoch` when resuming), so an `epoch_XXX.keras` numbered at
        or above the epoch being started belongs to another run: kept, it
        would count as "the newest" and join an average in place of this
        run's epochs.
        """
        if self._checked:
            return
        self._checked = True
        stale = [path for path in epoch_checkpoints(self.directory)
                 if int(CHECKPOINT_PATTERN.fullmatch(os.path.basename(path)).group(1)) > epoch]
        if stale:
            raise ValueError(
                f"{self.directory} holds epoch checkpoints of another run "
                f"({', '.join(os.path.basename(p) for p in stale[:5])}"
                f"{', ...' if len(stale) > 5 else ''}) numbered at or above epoch "
                f"{epoch + 1}, the one this fit starts: they would be kept as the newest and "
                "averaged with this run's. Remove them or choose another directory.")

    def on_train_end(self, logs=None):
        self._checked = False

    def on_epoch_end(self, epoch, logs=None):
        if not all_weights_finite(self.model):
            return
        os.makedirs(self.directory, exist_ok=True)
        save_model_atomically(self.model, os.path.join(self.directory,
                                                       CHECKPOINT_NAME.format(epoch=epoch + 1)))
        for path in epoch_checkpoints(self.directory)[:-self.keep]:
            os.remove(path)


def epoch_checkpoints(directory, last=None):
    """The `epoch_XXX.keras` files of `directory`, oldest first.

    Args:
        directory: str or path-like (a missing directory holds none).
        last: optional int >= 1: only the newest `last` of them.

    Returns:
        A list of paths (str), sorted by epoch number.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = CHECKPOINT_PATTERN.fullmatch(name)
        if match:
            found.append((int(match.group(1)), os.path.join(directory, name)))
    paths = [path for _, path in sorted(found)]
    if last is not None:
        paths = paths[-check_int("last", last, 1):]
    return paths


def average_checkpoints(paths, output=None):
    """A model whose weights are the element-wise mean of `.keras` checkpoints.

    theta = (1/n) sum_i theta_i, for every weight of the model (computed in
    float64, stored in the weight's dtype). Integer state (random seeds) is
    taken from the first checkpoint. The checkpoints must share one
    architecture: the same model class, the same config (up to its name,
    tokenizers, dropout and scheduled-sampling rate, which change no weight)
    and the same weights with the same shapes. The first checkpoint gives
    everything else: the config, the tokenizers (which must have the same
    vocabularies in every checkpoint) and the class.

    Checkpoints are loaded one at a time (memory: two models plus a float64
    sum). The result is not compiled (no optimizer state is averaged):
    compile it again to train further.

    Args:
        paths: a non-empty list of `.keras` file paths (str or path-like),
            e.g. `epoch_checkpoints(run_dir + "/checkpoints", last=5)`.
        output: optional `.keras` path: the averaged model is also saved
            there, through a temporary file renamed into place (a killed
            process leaves the previous file or none, never half of one;
            `kerasseq average` uses it).

    Returns:
        The model of `paths[0]` with the averaged weights.

    Raises:
        FileNotFoundError: a path does not exist (the message names it).
        ValueError: `paths` is empty, a file is not a loadable Keras model,
            or the checkpoints differ in architecture, weights or vocabulary
            (the message names both files and what differs).

    Example:

    >>> model = average_checkpoints(["runs/g2p/checkpoints/epoch_009.keras",  # doctest: +SKIP
    ...                              "runs/g2p/checkpoints/epoch_010.keras"])
    """
    if isinstance(paths, (str, os.PathLike)) or not hasattr(paths, "__iter__"):
        raise ValueError(
            f"paths must be a list of .keras files. Received: paths={paths!r}"
        )
    paths = [os.fspath(path) for path in paths]
    if not paths:
        raise ValueError("paths must name at least one .keras checkpoint. Received: paths=[]")
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"average_checkpoints: no checkpoint file at {path!r}")
    first = _load(paths[0])
    sums = [_as_float64(weight) for weight in first.weights]
    for path in paths[1:]:
        other = _load(path)
        check_same_architecture(first, other, paths[0], path)
        for index, weight in enumerate(other.weights):
            if sums[index] is not None:
                sums[index] += keras.ops.convert_to_numpy(weight).astype(np.float64)
        del other
    for weight, total in zip(first.weights, sums, strict=True):
        if total is not None:
            weight.assign((total / len(paths)).astype(np.dtype(weight.dtype)))
    if output is not None:
        save_model_atomically(first, os.fspath(output))
    return first


def check_same_architecture(first, other, first_name="the first model", other_name="the other"):
    """Raise a `ValueError` unless two models can be averaged weight by weight.

    Compares the class, the config (up to the settings that change no
    weight), the tokenizers' vocabularies and every weight's shape.
    """
    if type(first) is not type(other):
        raise ValueError(
            "Checkpoints to average must share one architecture: "
            f"{first_name!r} is a {type(first).__name__}, {other_name!r} is a "
            f"{type(other).__name__}"
        )
    ours, theirs = _architecture(first), _architecture(other)
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key) != theirs.get(key):
            raise ValueError(
                f"Checkpoints to average must share one architecture: they differ in {key} "
                f"({ours.get(key)!r} in {first_name!r}, {theirs.get(key)!r} in {other_name!r})"
            )
    for side in ("source_tokenizer", "target_tokenizer"):
        a, b = getattr(first, side, None), getattr(other, side, None)
        if hasattr(a, "get_vocabulary") and hasattr(b, "get_vocabulary") \
                and list(a.get_vocabulary()) != list(b.get_vocabulary()):
            raise ValueError(
                f"Checkpoints to average must share one vocabulary: the {side} of "
                f"{first_name!r} and {other_name!r} differ"
            )
    if len(first.weights) != len(other.weights):
        raise ValueError(
            "Checkpoints to average must share one architecture: "
            f"{first_name!r} has {len(first.weights)} weights, {other_name!r} has "
            f"{len(other.weights)}"
        )
    for ours, theirs in zip(first.weights, other.weights, strict=True):
        if tuple(ours.shape) != tuple(theirs.shape) or ours.dtype != theirs.dtype:
            raise ValueError(
                "Checkpoints to average must share one architecture: weight "
                f"{ours.path!r} is {tuple(ours.shape)} {ours.dtype} in {first_name!r} and "
                f"{theirs.path!r} is {tuple(theirs.shape)} {theirs.dtype} in {other_name!r}"
            )


def _load(path):
    if str(path).endswith(".keras") and os.path.isfile(path):
        # Keras reports a .keras file that is no zip archive (truncated,
        # overwritten) as "File not found"; say what is wrong with it.
        try:
            zipfile.ZipFile(path).close()
        except (zipfile.BadZipFile, OSError) as error:
            raise ValueError(f"{path!r} is corrupt or unreadable: a .keras file is a zip "
                             f"archive and this one cannot be opened ({error})") from None
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001  (Keras raises many kinds; one message)
        raise ValueError(f"{path!r} is not a loadable Keras model: {first_line(error)}") from None


def _architecture(model):
    """The scalar settings of a model's config that shape its weights or computation."""
    try:
        config = model.get_config() or {}
    except NotImplementedError:
        config = {}
    return {key: value for key, value in config.items()
            if key not in _NOT_ARCHITECTURE
            and (value is None or isinstance(value, (bool, int, float, str)))}


def _as_float64(weight):
    """A float weight as a float64 array (the running sum); None for integer state."""
    if not np.issubdtype(np.dtype(weight.dtype), np.floating):
        return None
    return keras.ops.convert_to_numpy(weight).astype(np.float64)
