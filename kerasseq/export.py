"""Export a kerasseq model as a SavedModel that translates strings end to end.

`export_translator(model, path)` writes a TensorFlow SavedModel whose graph
does everything `Seq2SeqModel.translate` does: tokenize the source text,
encode it, run greedy or beam search (the `tf.while_loop` of
`kerasseq.decoding`) and turn the target ids back into text. The result needs
TensorFlow only: no kerasseq, no Keras model class, no Python vocabulary.

Signatures (batch size unknown until serving time):

| name              | input                      | outputs                                                        |
|-------------------|----------------------------|----------------------------------------------------------------|
| `serving_default` | `text`: `tf.string (None,)` | `translation`: `tf.string (None,)`, `score`: `float32 (None,)` |
| `translate_nbest` | `text`: `tf.string (None,)` | `translations`: `tf.string (None, num_return)`, `scores`: `float32 (None, num_return)` |

Bad input never crashes the graph:

* empty or whitespace-only strings translate to `""` with score `0.0`;
* characters or words outside the vocabulary become `[UNK]` and are
  translated like any other token;
* sources longer than `max_source_length` tokens are cut to their first
  `max_source_length` tokens;
* invalid UTF-8 bytes are replaced by U+FFFD before tokenization;
* an empty batch (shape `(0,)`) gives empty outputs.
"""

import collections
import json
import numbers
import os
import re
import shutil
import types
import uuid

import tensorflow as tf

from kerasseq import decoding

EXPORT_METHODS = ("greedy", "beam")
DEFAULT_MAX_SOURCE_LENGTH = 256
SERVING_SIGNATURE = "serving_default"
NBEST_SIGNATURE = "translate_nbest"
METADATA_PATH = os.path.join("assets.extra", "kerasseq_export.json")
# The "format" field of the metadata: how `kerasseq translate` tells a
# kerasseq translator from any other SavedModel.
METADATA_FORMAT = "kerasseq-translator"
TEXT_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="text")

# A string is "blank" when it holds nothing but the characters Python's
# `str.strip()` removes: ASCII whitespace, vertical tab, the separators
# U+001C..U+001F and U+0085, and every Unicode space/line/paragraph separator
# (category Z). RE2 syntax (used by `tf.strings.regex_full_match`).
_BLANK_PATTERN = r"[\s\v\x{1c}-\x{1f}\x{85}\p{Z}]*"

ExportSettings = collections.namedtuple("ExportSettings", [
    "method", "num_beams", "num_return", "length_penalty", "max_length",
    "max_source_length", "jit_compile",
])
ExportSettings.__doc__ = """Search and input settings frozen into an export.

Fields:
    method: `"greedy"` or `"beam"`.
    num_beams: int >= 1 (1 for greedy).
    num_return: int, columns of the `translate_nbest` outputs.
    length_penalty: float alpha >= 0 (GNMT length penalty, beam only).
    max_length: int, most target tokens generated.
    max_source_length: int, source tokens kept per text.
    jit_compile: bool, XLA-compile the search loop.
"""


def export_translator(
    model,
    path,
    *,
    method="beam",
    num_beams=4,
    length_penalty=0.0,
    max_length=None,
    num_return=None,
    max_source_length=None,
    jit_compile=False,
    overwrite=True,
):
    """Write a SavedModel that maps source strings to translations and scores.

    Tokenization, `model.encode`, the search and detokenization all run inside
    the exported graph, so the SavedModel can be served by plain TensorFlow
    (`tf.saved_model.load`) or TF Serving without kerasseq. The search
    settings are fixed at export time.

    The export is atomic: the SavedModel is first written to a temporary
    directory next to `path` (same file system), then renamed into place. An
    existing export at `path` (with `overwrite=True`) is moved aside, replaced
    and only then deleted. If anything fails, the previous content of `path`
    is left as it was and no temporary directory remains (a process killed
    with SIGKILL may leave one, never a half-written `path`; the next export
    to `path` removes it: see `write_atomically`).

    Args:
        model: a `kerasseq.models.Seq2SeqModel` (any model with `encode`,
            `decode_step`, `source_tokenizer` and `target_tokenizer`).
        path: str or path-like, the SavedModel directory to create.
        method: `"beam"` (default) or `"greedy"`.
        num_beams: int >= 1, beams kept by beam search (ignored for greedy).
        length_penalty: float alpha >= 0, GNMT length penalty (beam only).
        max_length: int >= 1, most target tokens per translation (default:
            the model's `max_target_length`).
        num_return: int, hypotheses returned per text by `translate_nbest`,
            in `[1, num_beams]`; default `num_beams` (1 for greedy, which can
            only return 1).
        max_source_length: int >= 1, source tokens kept per text; longer
            sources are truncated to their first `max_source_length` tokens
            (default: the source tokenizer's `max_length`, or 256, capped at
            the model's `max_length` for models with a position table such
            as the Transformer).
        jit_compile: bool, compile the search loop with XLA.
        overwrite: bool; with False an existing `path` raises
            `FileExistsError`.

    Returns:
        The absolute path of the export (a str).

    Raises:
        ValueError: a bad argument (the message names it), or a model without
            tokenizers.
        FileExistsError: `path` exists and `overwrite=False`.

    Example:

    >>> export_translator(model, "/tmp/g2p_export", num_beams=4)   # doctest: +SKIP
    >>> import tensorflow as tf                                     # doctest: +SKIP
    >>> translator = tf.saved_model.load("/tmp/g2p_export")         # doctest: +SKIP
    >>> translator.signatures["serving_default"](
    ...     text=tf.constant(["hello"]))["translation"]              # doctest: +SKIP
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'HH AH0 L OW1'], dtype=object)>
    """
    settings = resolve_settings(
        model, method=method, num_beams=num_beams, length_penalty=length_penalty,
        max_length=max_length, num_return=num_return,
        max_source_length=max_source_length, jit_compile=jit_compile,
    )
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite must be a bool. Received: overwrite={overwrite!r}")
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(
            f"Export path {path!r} already exists. Pass overwrite=True to replace it."
        )
    translator = Translator(model, settings)

    def write(directory):
        tf.saved_model.save(translator, directory, signatures=translator.signatures())
        _write_metadata(directory, model, settings)

    write_atomically(path, write, overwrite=overwrite)
    return path


# --------------------------------------------------------------------------
# Arguments.
# --------------------------------------------------------------------------


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1. Received: {name}={value!r}")
    return int(value)


def resolve_settings(model, *, method="beam", num_beams=4, length_penalty=0.0,
                     max_length=None, num_return=None, max_source_length=None,
                     jit_compile=False):
    """Check the `export_translator` arguments and fill in the defaults.

    Args:
        model: the model to export.
        method, num_beams, length_penalty, max_length, num_return,
            max_source_length, jit_compile: see `export_translator`.

    Returns:
        An `ExportSettings`.

    Raises:
        ValueError: naming the first bad argument.
    """
    for attribute in ("encode", "decode_step"):
        if not callable(getattr(model, attribute, None)):
            raise ValueError(
                "model must follow the kerasseq decoding contract (encode and "
                f"decode_step). Received: model of type {type(model).__name__} "
                f"without {attribute}()"
            )
    for attribute in ("source_tokenizer", "target_tokenizer"):
        if getattr(model, attribute, None) is None:
            raise ValueError(
                "export_translator needs a model built with source_tokenizer and "
                f"target_tokenizer (the text is tokenized inside the SavedModel). "
                f"Received: model.{attribute}=None"
            )
    if method not in EXPORT_METHODS:
        raise ValueError(
            f"method must be one of {list(EXPORT_METHODS)}. Received: method={method!r}"
        )
    num_beams = _check_positive_int("num_beams", num_beams)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real) \
            or not length_penalty >= 0:
        raise ValueError(
            f"length_penalty must be a float >= 0. Received: length_penalty={length_penalty!r}"
        )
    # A model with a fixed position table (the Transformer) exposes its size
    # as `max_length`; neither sources nor targets may be longer.
    position_limit = getattr(model, "max_length", None)
    if isinstance(position_limit, bool) or not isinstance(position_limit, numbers.Integral):
        position_limit = None
    if max_length is None:
        max_length = getattr(model, "max_target_length", None)
    max_length = _check_positive_int("max_length", max_length)
    if position_limit is not None and max_length > position_limit:
        raise ValueError(
            f"max_length must be <= the model's max_length={position_limit} (its "
            f"position table). Received: max_length={max_length}"
        )
    if method == "greedy":
        num_beams = 1
    if num_return is None:
        num_return = num_beams
    num_return = _check_positive_int("num_return", num_return)
    if num_return > num_beams:
        raise ValueError(
            f"num_return must be <= num_beams={num_beams} (method={method!r}). "
            f"Received: num_return={num_return}"
        )
    if max_source_length is None:
        max_source_length = getattr(model.source_tokenizer, "max_length", None)
        max_source_length = max_source_length or DEFAULT_MAX_SOURCE_LENGTH
        if position_limit is not None:
            max_source_length = min(max_source_length, position_limit)
    max_source_length = _check_positive_int("max_source_length", max_source_length)
    if position_limit is not None and max_source_length > position_limit:
        raise ValueError(
            f"max_source_length must be <= the model's max_length={position_limit} "
            f"(its position table). Received: max_source_length={max_source_length}"
        )
    if not isinstance(jit_compile, bool):
        raise ValueError(f"jit_compile must be a bool. Received: jit_compile={jit_compile!r}")
    return ExportSettings(
        method, num_beams, num_return, float(length_penalty), max_length,
        max_source_length, jit_compile,
    )


# --------------------------------------------------------------------------
# The exported module.
# --------------------------------------------------------------------------


def _lookup_tables(tokenizer):
    """Every lookup table (a `TrackableResource`) reachable from `tokenizer`.

    A `tf.function` that uses a hash table can only be saved if the table is
    an attribute of a tracked object; `Translator` keeps these in a list.
    """
    return [
        trackable
        for trackable in tf.train.TrackableView(tokenizer).descendants()
        if isinstance(trackable, tf.saved_model.experimental.TrackableResource)
    ]


class Translator(tf.Module):
    """The `tf.Module` that `export_translator` saves.

    It tracks exactly what the serving functions capture: the model's
    variables and the tokenizers' lookup tables (an untracked table makes
    `tf.saved_model.save` fail, or the vocabulary comes back empty). The
    Keras model and tokenizer objects themselves stay out of the saved object
    graph, so loading needs neither Keras classes nor kerasseq.

    Args:
        model: a kerasseq seq2seq model with tokenizers.
        settings: an `ExportSettings` (see `resolve_settings`).

    Call arguments (of `translate` and `translate_nbest`):
        text: `tf.string` `(batch_size,)`.

    Returns:
        `translate`: `{"translation": tf.string (batch_size,),
        "score": float32 (batch_size,)}`; `translate_nbest`:
        `{"translations": tf.string (batch_size, num_return),
        "scores": float32 (batch_size, num_return)}`.

    Example:

    >>> translator = Translator(model, resolve_settings(model))   # doctest: +SKIP
    >>> translator.translate(tf.constant(["cat"]))["translation"]  # doctest: +SKIP
    """

    def __init__(self, model, settings):
        super().__init__(name="kerasseq_translator")
        # A plain namespace is not a trackable container: the Keras objects
        # are used while tracing but not written to the object graph.
        self._python = types.SimpleNamespace(
            model=model, source_tokenizer=model.source_tokenizer,
            target_tokenizer=model.target_tokenizer, settings=settings,
        )
        self.model_variables = list(model.variables)
        self.lookup_tables = (
            _lookup_tables(model.source_tokenizer) + _lookup_tables(model.target_tokenizer)
        )
        self.translate = tf.function(self._translate, input_signature=[TEXT_SPEC])
        self.translate_nbest = tf.function(self._translate_nbest, input_signature=[TEXT_SPEC])

    def signatures(self):
        """`{signature name: concrete function}` for `tf.saved_model.save`."""
        return {
            SERVING_SIGNATURE: self.translate.get_concrete_function(),
            NBEST_SIGNATURE: self.translate_nbest.get_concrete_function(),
        }

    # ------------------------------------------------------------ serving
    def _translate(self, text):
        translations, scores = self._translate_texts(text, num_return=1)
        return {"translation": translations[:, 0], "score": scores[:, 0]}

    def _translate_nbest(self, text):
        num_return = self._python.settings.num_return
        translations, scores = self._translate_texts(text, num_return=num_return)
        return {"translations": translations, "scores": scores}

    def _translate_texts(self, text, num_return):
        """Translate a batch; blank texts (or texts without tokens) give "" and 0.0.

        Returns:
            `(translations, scores)`: `tf.string` and float32
            `(batch_size, num_return)`.
        """
        model = self._python.model
        source_tokenizer = self._python.source_tokenizer
        target_tokenizer = self._python.target_tokenizer
        max_length = self._python.settings.max_length
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        batch_size = tf.shape(text)[0]
        source_ids = source_tokenizer.encode(text)  # ragged (batch_size, None)
        source_ids = source_ids[:, : self._python.settings.max_source_length]
        blank = tf.strings.regex_full_match(text, _BLANK_PATTERN)  # (batch_size,)
        has_tokens = tf.logical_and(tf.logical_not(blank), source_ids.row_lengths() > 0)
        rows = tf.cast(tf.where(has_tokens)[:, 0], tf.int32)  # (kept,)
        kept_ids = tf.gather(source_ids, rows)  # ragged (kept, None)

        def search():
            return self._search(model, kept_ids.to_tensor(default_value=0), num_return)

        def nothing_to_search():
            return (
                tf.zeros([0, num_return, max_length], tf.int32),
                tf.zeros([0, num_return], tf.float32),
            )

        token_ids, scores = tf.cond(tf.size(rows) > 0, search, nothing_to_search)
        # (kept, num_return, max_length), (kept, num_return)
        token_ids = tf.scatter_nd(
            rows[:, None], token_ids, tf.stack([batch_size, num_return, max_length])
        )  # (batch_size, num_return, max_length), blank rows all 0
        scores = tf.scatter_nd(
            rows[:, None], scores, tf.stack([batch_size, num_return])
        )  # (batch_size, num_return), blank rows 0.0
        texts = target_tokenizer.detokenize(tf.reshape(token_ids, [-1, max_length]))
        # (batch_size * num_return,)
        return tf.reshape(texts, [-1, num_return]), scores  # (batch_size, num_return)

    def _search(self, model, source_ids, num_return):
        """Encode padded ids `(kept, source_length)` and run the search.

        Returns:
            int32 `(kept, num_return, max_length)` and float32
            `(kept, num_return)`.
        """
        settings = self._python.settings
        source_ids = _pad_length_to_multiple(
            source_ids, getattr(model, "source_length_multiple", 1)
        )
        state = model.encode(source_ids)
        common = dict(
            batch_size=None, start_id=int(model.start_id), end_id=int(model.end_id),
            max_length=settings.max_length, jit_compile=settings.jit_compile,
        )
        if settings.method == "beam":
            token_ids, scores, _ = decoding.beam_search(
                model.decode_step, state, num_beams=settings.num_beams,
                length_penalty=settings.length_penalty, num_return=num_return, **common,
            )
            return token_ids, scores
        token_ids, scores, _ = decoding.greedy(model.decode_step, state, **common)
        return token_ids[:, None, :], scores[:, None]  # (kept, 1, max_length), (kept, 1)


def _pad_length_to_multiple(source_ids, multiple):
    """Right-pad `(batch_size, source_length)` ids with 0 to a multiple of `multiple`.

    The graph version of `kerasseq.models.base.pad_to_multiple`, for a length
    only known at run time; it keeps the exported numbers identical to
    `Seq2SeqModel.translate`.
    """
    length = tf.shape(source_ids)[1]
    padded = tf.maximum(multiple, (length + multiple - 1) // multiple * multiple)
    return tf.pad(source_ids, [[0, 0], [0, padded - length]])


# --------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------


def _write_metadata(directory, model, settings):
    """Record the export settings in `assets.extra/kerasseq_export.json`.

    TF Serving ignores `assets.extra`; the `kerasseq translate` command reads
    it to tell which search a SavedModel runs.
    """
    metadata = {
        "format": METADATA_FORMAT,
        "signatures": {
            SERVING_SIGNATURE: {"inputs": ["text"], "outputs": ["translation", "score"]},
            NBEST_SIGNATURE: {"inputs": ["text"], "outputs": ["translations", "scores"]},
        },
        "model_class": type(model).__name__,
        **settings._asdict(),
    }
    target = os.path.join(directory, METADATA_PATH)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as handle:
        json.dump(metadata, handle, indent=2)


def read_metadata(path):
    """The settings an export was written with, or `None` if not recorded.

    Args:
        path: a SavedModel directory written by `export_translator`.

    Returns:
        A dict with the `ExportSettings` fields (and `signatures`,
        `model_class`), or `None`.
    """
    target = os.path.join(path, METADATA_PATH)
    if not os.path.isfile(target):
        return None
    with open(target) as handle:
        return json.load(handle)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _process_is_running(pid):
    """False only when no process `pid` runs on this machine (probed with signal 0).

    Outside POSIX (where `os.kill(pid, 0)` would send a signal) and for this
    process itself the answer is always True, so nothing is cleaned up.
    """
    if os.name != "posix" or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return False  # not a valid pid: no process can own the directory
    except OSError:
        return True  # e.g. PermissionError: the process exists, owned by another user
    return True


def stale_siblings(path):
    """Leftovers of `write_atomically(path, ...)` calls whose process was killed.

    Only hidden siblings named after `path` count: `.NAME.export-PID-TOKEN`
    (a temporary directory) and `.NAME.old-PID-TOKEN` (a previous export set
    aside), and only when no process `PID` is running.

    Args:
        path: absolute str, the export path.

    Returns:
        `{"export": [paths], "old": [paths]}`, sorted.
    """
    parent, name = os.path.split(path)
    pattern = re.compile(rf"\.{re.escape(name)}\.(export|old)-(\d{{1,10}})-[0-9a-f]{{12}}")
    stale = {"export": [], "old": []}
    try:
        entries = sorted(os.listdir(parent))
    except FileNotFoundError:
        return stale
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match and not _process_is_running(int(match.group(2))):
            stale[match.group(1)].append(os.path.join(parent, entry))
    return stale


def write_atomically(path, write, overwrite=True):
    """Create the directory `path` with `write(directory)`, all or nothing.

    `write` fills a fresh temporary directory `.NAME.export-PID-TOKEN` next to
    `path` (NAME its base name, PID this process); the directory is then
    renamed to `path` (one `rename` on the same file system). An existing
    `path` is first renamed aside to `.NAME.old-PID-TOKEN` and deleted after
    the new one is in place; if the final rename fails it is renamed back.

    A process killed outright (SIGKILL, so no `finally` runs) never leaves a
    half-written directory at `path`:

    * killed while `write` runs: `path` is untouched; a partial
      `.NAME.export-PID-TOKEN` remains;
    * killed between the two renames: `path` is briefly absent. The previous
      export sits complete in `.NAME.old-PID-TOKEN` and the new one complete
      in `.NAME.export-PID-TOKEN` (same token); rename either to `path` to
      recover by hand;
    * killed after the second rename: `path` is the new export; the old one
      remains in `.NAME.old-PID-TOKEN`.

    The next call for the same `path` removes such leftovers (see
    `stale_siblings`): stale temporary directories before writing, stale
    set-aside exports only once the new export is in place (until then one
    may be the only complete copy). Directories of processes that still run
    (a concurrent export) and siblings of other paths are left alone. PIDs
    are checked on this machine only.

    Args:
        path: absolute str, the directory to create or replace.
        write: callable taking the temporary directory path.
        overwrite: bool; with False an existing `path` raises
            `FileExistsError` (checked again right before the rename).

    Raises:
        Whatever `write` raises; `path` is then untouched and the temporary
        directory removed.
    """
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    stale = stale_siblings(path)
    for directory in stale["export"]:
        _remove(directory)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    temporary = os.path.join(parent, f".{name}.export-{token}")
    aside = os.path.join(parent, f".{name}.old-{token}")
    os.mkdir(temporary)
    try:
        write(temporary)
        if os.path.lexists(path):
            if not overwrite:
                raise FileExistsError(
                    f"Export path {path!r} already exists. Pass overwrite=True to replace it."
                )
            os.rename(path, aside)
            # A SIGKILL here leaves `path` absent and both exports complete.
            try:
                os.rename(temporary, path)
            except BaseException:
                os.rename(aside, path)
                raise
            _remove(aside)
        else:
            os.rename(temporary, path)
        for directory in stale["old"]:  # the new export is in place
            _remove(directory)
    finally:
        _remove(temporary)
