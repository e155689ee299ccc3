"""Export a kerasseq model as a SavedModel that translates strings end to end,
or a Transformer as a CTranslate2 model directory (`export_ctranslate2`).

`export_translator(model, path)` saves a `kerasseq.Translator` (the one
inference path that `Seq2SeqModel.translate`, `kerasseq.translate` and the
CLI use, with the same `SearchConfig` defaults: beam search, 4 beams) as a
TensorFlow SavedModel: tokenize the source text, encode it, run greedy or
beam search (the `tf.while_loop` of `kerasseq.decoding`, XLA-compiled with
`jit_compile="auto"`, rows and columns padded to buckets) and turn the target
ids back into text. The result needs TensorFlow only: no kerasseq, no Keras
model class, no Python vocabulary.

Signatures (batch size unknown until serving time):

| name              | input                      | outputs                                                        |
|-------------------|----------------------------|----------------------------------------------------------------|
| `serving_default` | `text`: `tf.string (None,)` | `translation`: `tf.string (None,)`, `score`: `float32 (None,)` |
| `translate_nbest` | `text`: `tf.string (None,)` | `translations`: `tf.string (None, num_return)`, `scores`: `float32 (None, num_return)` |
| `translate_alignments` (`alignments=True`) | `text`: `tf.string (None,)` | `translation`, `score` as `serving_default`, `alignment`: `tf.string (None,)` |

Bad input never crashes the graph (blank texts, unknown tokens, long
sources, invalid UTF-8, an empty batch): see `Translator.translate_tensor`.

The SavedModel is written with Keras' `keras.export.ExportArchive` (see
`ServingModule`) and runs in both of TensorFlow's loaders:
`tf.saved_model.load`, and the session-based loader of TF Serving, the C
API, the Java and Go bindings and `saved_model_cli run`. The latter restores
only the variables of the saved object graph, so that graph holds the model's
`tf.Variable`s themselves, not their Keras wrappers (`ServingModule` says
why).
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf

from kerasseq import _ctranslate2
from kerasseq._ctranslate2 import CTranslate2Translator, is_ctranslate2_model
from kerasseq._files import read_format_json, replace_directory_atomically
from kerasseq._messages import first_line
from kerasseq._validation import is_int
from kerasseq.alignment.merge import check_alignable, resolve_alignment_head
from kerasseq.decoding import contract
from kerasseq.decoding.config import SearchConfig, SearchConfigError
from kerasseq.translator import Translator

__all__ = [
    "CTranslate2Translator",
    "EXPORT_MAX_SOURCE_LENGTH",
    "ServingModule",
    "check_export_path",
    "export_ctranslate2",
    "export_translator",
    "is_ctranslate2_model",
    "is_saved_model",
    "load_translator",
    "make_translator",
    "read_metadata",
]

EXPORT_METHODS = ("greedy", "beam")
# Source tokens an export keeps per text when no `max_source_length` is given.
EXPORT_MAX_SOURCE_LENGTH = 256
SERVING_SIGNATURE = "serving_default"
NBEST_SIGNATURE = "translate_nbest"
ALIGNMENTS_SIGNATURE = "translate_alignments"
METADATA_PATH = os.path.join("assets.extra", "kerasseq_export.json")
# The "format" field of the metadata: how `kerasseq translate` tells a
# kerasseq translator from any other SavedModel.
METADATA_FORMAT = "kerasseq-translator"
TEXT_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="text")


def export_translator(model, path, config=None, *, overwrite=True, alignments=False,
                      alignment_layer=None, alignment_head=None, **settings):
    """Write a SavedModel that maps source strings to translations and scores.

    The exported functions are those of `kerasseq.Translator(model, config,
    **settings)`: tokenization, `model.encode`, the search and
    detokenization all run inside the graph, so the SavedModel can be served
    by plain TensorFlow (`tf.saved_model.load`) or TF Serving without
    kerasseq. The search settings are fixed at export time; they default to
    `SearchConfig()`'s (beam search, 4 beams, `jit_compile="auto"`), like
    every other entry point, with the export's two defaults and one rule of
    `make_translator`. With XLA, each new `(rows bucket, source-length
    bucket)` shape is compiled on its first call in the serving process.

    The export is atomic (`kerasseq._files.replace_directory_atomically`)
    and replaces only a SavedModel or an empty directory (`check_export_path`).

    Args:
        model: a `kerasseq.decoding.Seq2SeqDecodable` with
            `source_tokenizer` and `target_tokenizer` (a kerasseq model).
        path: str or path-like, the SavedModel directory to create.
        config: optional `kerasseq.SearchConfig`; `settings` replace its fields.
        overwrite: bool; True (default) replaces an existing SavedModel
            directory or empty directory at `path`; with False any existing
            `path` raises `FileExistsError`. Nothing else is replaced in
            either case.
        alignments: bool, default False. Also export the signature
            `translate_alignments`: `text` → `translation`, `score` and
            `alignment`, the best hypothesis's word links from the attention
            as `"i-j ..."` strings (source word i, target word j; see
            `kerasseq.alignment`). Needs a model with attention.
        alignment_layer, alignment_head: the attention that aligns (an index
            or `"mean"`; default: the model's, `kerasseq.alignment.default_alignment_head`:
            the guided head of a model trained with guided alignment, else the
            mean over every layer and head).
        **settings: `kerasseq.SearchConfig` fields (`method`, `num_beams`,
            `length_penalty`, `max_length`, `num_return`,
            `max_source_length`, `jit_compile`, ...); method `"beam"` or
            `"greedy"`. `num_return` (the columns of `translate_nbest`)
            defaults to `num_beams`; `max_source_length` (source tokens kept
            per text, the first ones) to `EXPORT_MAX_SOURCE_LENGTH` (256) or
            a Transformer's smaller `max_positions` (`make_translator` says
            why). Both are in the export's metadata.

    Returns:
        The absolute path of the export (a str).

    Raises (each before anything is written):
        ValueError: a bad argument (the message names it), a model without
            tokenizers, or `alignments=True` for a model without attention.
        TypeError: `model` does not meet the decoding contract, or a
            setting is not a `SearchConfig` field.
        FileExistsError: `path` exists and is not a SavedModel directory or
            an empty directory, or it exists and `overwrite=False`.

    Example:

    >>> export_translator(model, "/tmp/g2p_export", num_beams=4)   # doctest: +SKIP
    >>> import tensorflow as tf                                     # doctest: +SKIP
    >>> translator = tf.saved_model.load("/tmp/g2p_export")         # doctest: +SKIP
    >>> translator.signatures["serving_default"](
    ...     text=tf.constant(["hello"]))["translation"]              # doctest: +SKIP
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'HH AH L OW'], dtype=object)>
    """
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite must be a bool. Received: overwrite={overwrite!r}")
    translator = make_translator(model, config, **settings)
    path = os.path.abspath(os.fspath(path))
    check_export_path(path, overwrite=overwrite)  # before tracing: fail fast
    module = ServingModule(translator)
    if alignments:
        module.add_alignments(alignment_layer, alignment_head)
    replace_directory_atomically(
        path, module.write_out, check=lambda existing: check_export_path(existing, overwrite=overwrite))
    return path


def export_ctranslate2(model, path, quantization=None, *, overwrite=True):
    """Write a CTranslate2 model directory of a kerasseq Transformer.

    CTranslate2 (`pip install 'kerasseq[ctranslate2]'`) runs it from C++:
    `ctranslate2.Translator(path).translate_batch(tokens)`, or text in and
    out with `kerasseq.export.CTranslate2Translator(path)` and `kerasseq
    translate PATH`. The directory holds CTranslate2's `model.bin`,
    `config.json`, `source_vocabulary.json` and `target_vocabulary.json`
    (token `i` is kerasseq's id `i`; `[UNK]`, `[START]` and `[END]` are
    CTranslate2's unknown, start and end tokens), and
    `kerasseq_ctranslate2.json`, the tokenizers that turn text into those
    tokens. Post-norm and pre-norm models, shared embeddings and a tied
    output projection all convert; the weight mapping is in
    `kerasseq._ctranslate2`. No search settings are stored: they are
    options of each CTranslate2 call.

    The export is atomic (`kerasseq._files.replace_directory_atomically`)
    and replaces only an earlier CTranslate2 export or an empty directory
    (`check_export_path(path, kind="ctranslate2")`).

    Args:
        model: a `kerasseq.models.TransformerSeq2Seq` with `source_tokenizer`
            and `target_tokenizer`.
        path: str or path-like, the directory to create.
        quantization: None (the weights as they are, float32) or a
            CTranslate2 weight type: `"int8"`, `"int8_float32"`,
            `"int8_float16"`, `"int8_bfloat16"`, `"int16"`, `"float16"`,
            `"bfloat16"`, `"float32"`.
        overwrite: bool, as `export_translator`'s.

    Returns:
        The absolute path of the export (a str).

    Raises (each before anything is written):
        ValueError: an RNN model, an ensemble or any model that is not a
            kerasseq Transformer; a model without tokenizers; a bad
            `quantization`.
        ImportError: ctranslate2 is not installed.
        FileExistsError: as `export_translator`'s.
    """
    if not isinstance(overwrite, bool):
        raise ValueError(f"overwrite must be a bool. Received: overwrite={overwrite!r}")
    _ctranslate2.check_convertible(model)
    _ctranslate2.check_quantization(quantization)
    _ctranslate2.import_ctranslate2()
    path = os.path.abspath(os.fspath(path))
    check_export_path(path, overwrite=overwrite, kind="ctranslate2")
    replace_directory_atomically(
        path, lambda directory: _ctranslate2.write_model(model, quantization, directory),
        check=lambda existing: check_export_path(existing, overwrite=overwrite,
                                                 kind="ctranslate2"))
    return path


# --------------------------------------------------------------------------
# The serving module.
# --------------------------------------------------------------------------


class ServingModule:
    """What a SavedModel of a `Translator` holds, built with Keras' `ExportArchive`.

    `archive` (a `keras.export.ExportArchive`) has one endpoint per
    signature, each a `tf.function` with the input signature
    `text: tf.string (None,)`: `serving_default` → `{"translation",
    "score"}` (the best hypothesis; the attribute `translate`) and
    `translate_nbest` → `{"translations", "scores"}` (`num_return`
    columns), both running `Translator.translate_tensor`, and
    `translate_alignments` after `add_alignments`. Give it a translator from
    `make_translator`, which sets the source limit a served request needs;
    `write_out(path)` saves it with its metadata.

    What the archive saves, tracked Keras' way: the tokenizers' lookup
    tables (`track`; an untracked table makes `tf.saved_model.save` fail, or
    the vocabulary comes back empty), the variables the endpoints capture
    (collected by `write_out`), and the model's variables as the collection
    `model_variables` (`add_variable_collection`). That collection holds the
    TensorFlow variables (`variable.value`), not the Keras `Variable`
    wrappers: a wrapper is saved as a new `tf.Variable` initialized from its
    own (`_export_to_saved_model_graph`), so a SavedModel that tracks only
    the wrappers restores those new variables while its functions read the
    wrapped ones. `tf.saved_model.load` copes; the session-based loader (TF
    Serving, the C API, `saved_model_cli run`) fails every request with
    "Could not find variable ...". `track(model)`, as `model.export` does,
    would add the wrappers next to the captured variables and store every
    weight twice. The translator, the Keras model and the tokenizer objects
    stay out of the object graph (this module is a plain object, not a
    `tf.Module`), so loading needs neither Keras nor kerasseq.

    Raises:
        ValueError: the translator's model has no tokenizers
            (`Translator.text_tokenizers`, the one check).
    """

    def __init__(self, translator):
        self.translator = translator
        self.alignment = None  # (layer, head) of `translate_alignments`, once added
        # `keras.export.ExportArchive` is a factory (its `__new__` returns the
        # backend's archive), so the module holds one rather than subclassing.
        self.archive = keras.export.ExportArchive()
        # The archive saves the lookup tables it finds under what it tracks (a
        # tokenizer's Keras variables, it has none, would join `variables`).
        for tokenizer in translator.text_tokenizers:
            self.archive.track(tokenizer)
        # `.value`: the tf.Variables the endpoints capture, saved once (see above).
        self.archive.add_variable_collection(
            "model_variables", [variable.value for variable in translator.model.variables])
        self.translate = self._add_endpoint(SERVING_SIGNATURE, self._serve_best)
        self.translate_nbest = self._add_endpoint(NBEST_SIGNATURE, self._serve_nbest)
        self.translate_alignments = None

    def add_alignments(self, layer=None, head=None):
        """Add `translate_alignments` (text → translation, score, alignment).

        Raises:
            ValueError: a model without attention, before anything is traced.
        """
        check_alignable(self.translator.model)
        self.alignment = (layer, head)
        self.translate_alignments = self._add_endpoint(ALIGNMENTS_SIGNATURE,
                                                       self._serve_alignments)
        return self.translate_alignments

    def write_out(self, path):
        """Save the SavedModel at `path`, every endpoint a signature of its name,
        and its metadata (`read_metadata`)."""
        self.archive.write_out(path, verbose=False)
        _write_metadata(path, self.translator, self.alignment)

    def _add_endpoint(self, name, function):
        # A `tf.function(function, input_signature, autograph=False)`.
        return self.archive.add_endpoint(name, function, input_signature=[TEXT_SPEC])

    def _serve_alignments(self, text):
        translations, scores, links = self.translator.align_tensor(text, *self.alignment)
        return {"translation": translations, "score": scores, "alignment": links}

    def _serve_best(self, text):
        translations, scores = self.translator.translate_tensor(text, num_return=1)
        return {"translation": translations[:, 0], "score": scores[:, 0]}

    def _serve_nbest(self, text):
        translations, scores = self.translator.translate_tensor(text)
        return {"translations": translations, "scores": scores}


def make_translator(model, config=None, **settings):
    """The `Translator` an export saves: `config` with `settings` replacing its fields.

    `SearchConfig` checks every setting, the `Translator` the model (the
    decoding contract, and its own limits through `check_search_config`).
    The export adds one rule and two defaults:

    - only greedy or beam search: a served translation should not change
      from one request to the next;
    - `num_return` defaults to `num_beams`, the columns of `translate_nbest`:
      the search keeps that many hypotheses anyway, so the n-best signature
      costs only their detokenization, and `kerasseq translate EXPORT --nbest
      N` can read up to `num_beams` of them (a config's own `num_return`
      other than 1 is kept);
    - `max_source_length` defaults to `EXPORT_MAX_SOURCE_LENGTH` (256), or
      the position table of a model with a smaller one: a served request is
      arbitrary text, and the cut bounds what one request costs (and the
      shapes compiled) and keeps a Transformer from failing a whole batch on
      one source longer than its table (a larger value is the model's error).

    Raises:
        ValueError: naming the first bad setting.
        TypeError: a setting that is not a `SearchConfig` field, or a model
            without the decoding contract.
    """
    config = SearchConfig.from_kwargs(config, **settings)  # the one validator
    if config.method not in EXPORT_METHODS:  # SearchConfig allows "sample"
        raise SearchConfigError("method", f"method must be one of {list(EXPORT_METHODS)}. "
                                          f"Received: method={config.method!r}")
    defaults = {}
    if config.method == "beam" and config.num_return == 1 and "num_return" not in settings:
        defaults["num_return"] = config.num_beams  # every beam
    if config.max_source_length is None:
        position_limit = contract.optional(model, "max_positions")
        defaults["max_source_length"] = (min(EXPORT_MAX_SOURCE_LENGTH, position_limit)
                                         if is_int(position_limit) else EXPORT_MAX_SOURCE_LENGTH)
    return Translator(model, config.replace(**defaults))


# --------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------


def _write_metadata(directory, translator, alignment=None):
    """Record the export settings in `assets.extra/kerasseq_export.json`.

    TF Serving ignores `assets.extra`; the `kerasseq translate` command reads
    it to tell which search a SavedModel runs. Every `SearchConfig` field is
    written, four as the translator resolved them.
    """
    config, model = translator.config, translator.model
    metadata = {
        "format": METADATA_FORMAT,
        "signatures": {
            SERVING_SIGNATURE: {"inputs": ["text"], "outputs": ["translation", "score"]},
            NBEST_SIGNATURE: {"inputs": ["text"], "outputs": ["translations", "scores"]},
        },
        "model_class": type(model).__name__,
        **dataclasses.asdict(config),
        "num_beams": config.effective_num_beams,
        "max_length": translator.max_length,
        "max_source_length": translator.source_limit,
        "jit_compile": translator.jit_compile,
    }
    if alignment is not None:  # the attention that `translate_alignments` reads
        layer, head = resolve_alignment_head(model, *alignment)
        metadata["signatures"][ALIGNMENTS_SIGNATURE] = {
            "inputs": ["text"], "outputs": ["translation", "score", "alignment"]}
        metadata.update({name: value if value == "mean" else int(value)
                         for name, value in (("alignment_layer", layer), ("alignment_head", head))})
    target = os.path.join(directory, METADATA_PATH)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as handle:
        json.dump(metadata, handle, indent=2)


def read_metadata(path):
    """The settings an export was written with, or `None` if it is no kerasseq export.

    The one reader of the export format (`kerasseq translate` asks it): a
    file that is missing, unreadable, not JSON or without the
    `"kerasseq-translator"` format gives `None`.

    Args:
        path: a SavedModel directory written by `export_translator`.

    Returns:
        A dict with the search settings (every `SearchConfig` field:
        `method`, `num_beams`, `num_return`, `length_penalty`, ...; with
        `num_beams` 1 for greedy search, and `max_length`,
        `max_source_length` and `jit_compile` as the translator resolved
        them), `signatures` (name → inputs and outputs; with
        `translate_alignments`, also `alignment_layer` / `alignment_head`)
        and `model_class`; or `None`.
    """
    return read_format_json(os.path.join(path, METADATA_PATH), METADATA_FORMAT)


def is_saved_model(path):
    """True for a SavedModel directory (one holding `saved_model.pb`)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "saved_model.pb"))


# The output each signature must have, besides its tf.string input `text`.
_SIGNATURE_OUTPUTS = {SERVING_SIGNATURE: "translation", NBEST_SIGNATURE: "translations",
                      ALIGNMENTS_SIGNATURE: "alignment"}


def load_translator(path, signature=SERVING_SIGNATURE):
    """Load an export of `export_translator`: `(translate, metadata)`.

    The one loader of the export format, with plain TensorFlow (kerasseq's
    classes are not needed to serve; `kerasseq translate EXPORT_DIR` uses
    this). Checks, each a `ValueError` naming `path` and what to do: the
    directory is a kerasseq export (`read_metadata`), it loads, and the
    signature exists and maps a `tf.string` `text` to its output
    (`translation`, `translations` or `alignment`).

    Args:
        path: str, the SavedModel directory.
        signature: `"serving_default"`, `"translate_nbest"` or
            `"translate_alignments"`.

    Returns:
        `translate(texts) -> {output name: numpy array}` for a list of str,
        and the metadata dict (`read_metadata`).

    Raises:
        ValueError: as above.
    """
    if signature not in _SIGNATURE_OUTPUTS:
        raise ValueError(f"signature must be one of {sorted(_SIGNATURE_OUTPUTS)}. "
                         f"Received: signature={signature!r}")
    metadata = read_metadata(path)
    if metadata is None:
        raise ValueError(f"{path!r} is a SavedModel but not a kerasseq translator (no "
                         f"{METADATA_PATH} with format {METADATA_FORMAT!r}); export one with "
                         "`kerasseq export MODEL_DIR EXPORT_DIR`")
    try:
        loaded = tf.saved_model.load(path)
    except Exception as error:  # noqa: BLE001  (reported as one line)
        raise ValueError(f"{path!r} is not a loadable SavedModel: {first_line(error)}") from None
    if signature not in loaded.signatures:  # the SavedModel's own list, not the metadata's
        hint = ("; re-export with `kerasseq export MODEL_DIR EXPORT_DIR --alignments`"
                if signature == ALIGNMENTS_SIGNATURE else "")
        raise ValueError(f"{path!r} has no {signature} signature{hint}")
    function = loaded.signatures[signature]
    output = _SIGNATURE_OUTPUTS[signature]
    _, inputs = function.structured_input_signature
    text = inputs.get("text")
    if (set(inputs) != {"text"} or text.dtype != tf.string
            or output not in function.structured_outputs):
        raise ValueError(f"{path!r}: the {signature} signature does not map a tf.string 'text' "
                         f"to '{output}' ({METADATA_PATH} may have been copied from another "
                         "export)")

    def translate(texts):
        outputs = function(text=tf.constant(list(texts), tf.string))
        return {name: value.numpy() for name, value in outputs.items()}

    translate.saved_model = loaded  # keeps the loaded object (and its tables) alive
    return translate, metadata


# What each kind of export may replace: (is an export, the file that marks one,
# the phrase of the error message).
_EXPORT_KINDS = {
    "saved_model": (is_saved_model, "saved_model.pb",
                    "a SavedModel directory (one holding saved_model.pb)"),
    "ctranslate2": (is_ctranslate2_model, "model.bin",
                    "a CTranslate2 model directory (one holding model.bin and config.json)"),
}


def _unreplaceable_content(path, kind="saved_model"):
    """What an existing `path` holds when an export may not replace it, else None.

    Replaceable: an export of the same kind (a SavedModel directory, holding
    `saved_model.pb`, or a CTranslate2 model directory), an empty directory,
    or a symbolic link to such an export (the link is replaced; its target
    is kept).

    Returns:
        None, or a phrase for the error message.
    """
    is_export, marker, _ = _EXPORT_KINDS[kind]
    if os.path.islink(path):
        if is_export(path):
            return None
        target = os.readlink(path)
        if not os.path.exists(path):
            return f"a symbolic link to {target!r}, which does not exist"
        content = _unreplaceable_content(os.path.realpath(path), kind) or "an empty directory"
        return f"a symbolic link to {target!r}, which holds {content}"
    if os.path.isdir(path):
        if is_export(path):
            return None
        try:
            entries = sorted(os.listdir(path))
        except OSError as error:
            return f"a directory that cannot be listed ({error.strerror})"
        if not entries:
            return None
        shown = ", ".join(repr(entry) for entry in entries[:3])
        more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
        return f"a non-empty directory without {marker} ({shown}{more})"
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return "a file (a .keras model)"
        return "a file"
    return "something that is neither a file nor a directory"


def check_export_path(path, overwrite=True, kind="saved_model"):
    """Raise unless an export may be written at `path`.

    An export never destroys what is not an export: an existing `path` is
    replaced only when it is an export of the same kind (`"saved_model"`: a
    SavedModel directory, one holding `saved_model.pb`; `"ctranslate2"`: a
    CTranslate2 model directory, holding `model.bin` and `config.json`;
    through a symbolic link, the link is replaced and its target kept) or
    an empty directory, and only with `overwrite=True`. Anything else (a
    `.keras` model file, any other file, a non-empty directory that is no
    such export, a symbolic link to anything else) raises, with or without
    `overwrite`.

    Args:
        path: str, the export path.
        overwrite: bool; with False any existing `path` raises.
        kind: `"saved_model"` (`export_translator`) or `"ctranslate2"`
            (`export_ctranslate2`).

    Raises:
        FileExistsError: naming `path`, what it holds and what is expected
            (one line).
    """
    if kind not in _EXPORT_KINDS:
        raise ValueError(f"kind must be one of {sorted(_EXPORT_KINDS)}. Received: kind={kind!r}")
    if not os.path.lexists(path):
        return
    content = _unreplaceable_content(path, kind)
    if content is not None:
        raise FileExistsError(
            f"Export path {path!r} holds {content}; an export only replaces "
            f"{_EXPORT_KINDS[kind][2]} or an empty directory, "
            "with or without overwrite: choose another path"
        )
    if not overwrite:
        raise FileExistsError(
            f"Export path {path!r} already exists. Pass overwrite=True to replace it."
        )
