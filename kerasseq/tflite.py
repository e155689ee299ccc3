"""TensorFlow Lite: a kerasseq model on a phone (encode + one decoder step).

A `.tflite` file cannot hold everything a SavedModel export does, so the work
is split, and this is what runs where:

| part                                   | where it runs                                  |
|----------------------------------------|------------------------------------------------|
| text → ids (the tokenizer's lookup)    | the app (the vocabulary is a list of strings)  |
| `encode`: source ids → decoding state  | TFLite, signature `encode`                     |
| one decoder step: token, state → logits, state | TFLite, signature `decode_step`        |
| the search loop (arg-max over every token but `[PAD]` and `[START]`, stop at `[END]`) | the app: `TFLiteGreedyDecoder` here, a few lines of Kotlin/Swift there |
| ids → text                             | the app                                        |

Why not the whole translator: the tokenizers are `tf.lookup` hash tables
(`StringLookup`), which TFLite's builtin ops do not include (they need the
Flex delegate, which most apps do not ship), and the search is a
`tf.while_loop` over a dict of state tensors whose reordering (beam search)
is easier to write in the app than to convert. One decoder step, however, is
plain matrix algebra for both models: the GRU step with attention, or a
Transformer step that reads and writes its key/value cache with
`DYNAMIC_UPDATE_SLICE`.

Shapes are static: the batch size and the source length are fixed when the
file is written (LSTM loops need a static batch to become TFLite builtins;
the Transformer's caches need `max_length`). Shorter sources are padded with
0 (padding changes nothing: the masks), fewer rows are padded with empty
rows, longer sources are refused.

Example (with a trained `model` and a batch of `source_ids`):

    path = export_tflite(model, "g2p.tflite", batch_size=8, source_length=32)
    decoder = TFLiteGreedyDecoder(path)
    token_ids, lengths = decoder.greedy(source_ids, max_length=20)  # = model.generate(..., method="greedy")[0][:, 0]
"""

import os

import keras
import numpy as np
import tensorflow as tf

from kerasseq._files import replace_atomically
from kerasseq._validation import check_int, check_positive_int
from kerasseq.data.tokenizer import END_ID, START_ID, UNK_ID
from kerasseq.decoding._common import ban_repeated_ngrams, ban_tokens, never_generated
from kerasseq.decoding.config import SearchConfig, SearchConfigError

__all__ = ["TFLiteGreedyDecoder", "export_tflite"]

QUANTIZATIONS = (None, "dynamic_range")


def _interpreter_class():
    """LiteRT's interpreter (`ai-edge-litert`), or TensorFlow's older copy."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # pragma: no cover - the tflite extra is not installed
        Interpreter = tf.lite.Interpreter
    return Interpreter


def tflite_module(model, batch_size, source_length, max_length):
    """A `tf.Module` with the two `tf.function`s that become the signatures.

    Signature `encode`: `source_ids` int32 `(batch_size, source_length)` →
    the model's decoding state (one output per state key), plus two int32
    scalars that are not state: `limit_max_length` (most target tokens) and
    `limit_source_vocab_size` (-1 if unknown). Signature
    `decode_step`: `token_ids` int32 `(batch_size,)`, `step` int32 scalar and
    one input per state key → `logits` float32 `(batch_size, vocab_size)` and
    the new state (same keys).
    """
    probe = model.encode(tf.zeros((batch_size, source_length), tf.int32), max_length=max_length)
    state_specs = {
        key: tf.TensorSpec(value.shape, value.dtype, name=key) for key, value in probe.items()
    }
    keys = sorted(state_specs)
    limits = {"limit_max_length": max_length,
              "limit_source_vocab_size": getattr(model, "source_vocab_size", None) or -1}
    # The weights are traced as constants: with two signatures the converter
    # keeps variables as TFLite resource variables, which the interpreter
    # never initialises (`READ_VARIABLE ... variable != nullptr`). Inside a
    # `keras.StatelessScope` every read of a model variable returns the value
    # mapped to it.
    weights = [(variable, variable.numpy()) for variable in model.weights]

    def frozen(function, *args):
        mapping = [(variable, tf.constant(value)) for variable, value in weights]
        with keras.StatelessScope(state_mapping=mapping):
            return function(*args)

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec((batch_size, source_length), tf.int32,
                                                    name="source_ids")], autograph=False)
        def encode(self, source_ids):
            state = dict(frozen(model.encode, source_ids, max_length))
            # The file's limits, for the app (and TFLiteGreedyDecoder) to check.
            return {**state, **{key: tf.constant(value, tf.int32)
                                for key, value in limits.items()}}

        @tf.function(input_signature=[
            tf.TensorSpec((batch_size,), tf.int32, name="token_ids"),
            tf.TensorSpec((), tf.int32, name="step"),
            *[state_specs[key] for key in keys],
        ], autograph=False)
        def decode_step(self, token_ids, step, *state_values):
            state = dict(zip(keys, state_values, strict=True))
            logits, state = frozen(model.decode_step, token_ids, state, step)
            return {"logits": tf.cast(logits, tf.float32), **state}

    return Module()


def convert_to_tflite(model, batch_size=1, source_length=None, max_length=None, quantize=None):
    """The `.tflite` flatbuffer (bytes) of `model`'s `encode` and `decode_step`.

    Args:
        model: a kerasseq model (`RNNSeq2Seq`, `TransformerSeq2Seq`) or any
            object with `encode(source_ids, max_length=...)` and
            `decode_step(token_ids, state, step)`.
        batch_size: int >= 1, rows per call (fixed in the file).
        source_length: int >= 1, source tokens per row (fixed in the file;
            default: the Transformer's `max_positions`, 64 for the RNN).
        max_length: int >= 1, most target tokens (sizes the Transformer's
            cache; default: the model's `max_target_length`).
        quantize: None (float32 weights) or "dynamic_range" (int8 weights,
            float activations: about 4x smaller).

    Raises:
        ValueError: a bad size or quantization, or a source length above the
            Transformer's position table.
    """
    batch_size = check_positive_int("batch_size", batch_size)
    model_max = getattr(model, "max_positions", None)  # the Transformer's position table
    source_length = check_positive_int(
        "source_length", (model_max or 64) if source_length is None else source_length
    )
    max_length = check_positive_int(
        "max_length", getattr(model, "max_target_length", 64) if max_length is None else max_length
    )
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {QUANTIZATIONS}. Received: quantize={quantize!r}")
    check_search = getattr(model, "check_search_config", None)
    if callable(check_search):  # the model's own limits (the Transformer's position table)

        try:
            check_search(SearchConfig(method="greedy", max_length=max_length,
                                      max_source_length=source_length))
        except SearchConfigError as error:
            name = {"max_source_length": "source_length"}.get(error.field, error.field)
            raise ValueError(f"{name}: {error}") from None
    module = tflite_module(model, batch_size, source_length, max_length)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.encode.get_concrete_function(), module.decode_step.get_concrete_function()],
        module,
    )
    if quantize == "dynamic_range":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def export_tflite(model, path, batch_size=1, source_length=None, max_length=None,
                  quantize=None):
    """Write `convert_to_tflite(model, ...)` to `path`, atomically.

    Returns:
        `path` as a str. The file is written under a temporary name and
        renamed, so `path` holds the old file or the new one, never half.
    """
    content = convert_to_tflite(model, batch_size, source_length, max_length, quantize)

    def write(temporary):
        with open(temporary, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())

    return replace_atomically(write, path, suffix=".tflite")


class TFLiteGreedyDecoder:
    """Greedy search over a `.tflite` file from `export_tflite`.

    The loop an app runs around the two signatures, written in Python: it
    gives the same tokens as `model.generate(source_ids, method="greedy")[0][:, 0]`
    (with `min_length=0`: the end token is never banned here)
    (the float32 file; a quantized one may differ where two tokens were
    close). As every search of kerasseq, it never generates `[PAD]` (0) or
    `[START]` (their logits are set to `-inf` before the arg-max), nor
    `[UNK]` with `ban_unk=True`.

    Args:
        model: path of a `.tflite` file, or its bytes.
        start_id, end_id, unk_id: the target tokenizer's `[START]`/`[END]`/
            `[UNK]` ids (kerasseq's tokenizers reserve 2, 3 and 1).
    """

    def __init__(self, model, start_id=START_ID, end_id=END_ID, unk_id=UNK_ID):
        interpreter_class = _interpreter_class()
        if isinstance(model, bytes):
            self.interpreter = interpreter_class(model_content=model)
        else:
            self.interpreter = interpreter_class(model_path=str(model))
        signatures = self.interpreter.get_signature_list()
        if set(signatures) != {"encode", "decode_step"}:
            raise ValueError(
                "Expected a .tflite file with the signatures 'encode' and 'decode_step' "
                f"(kerasseq.tflite.export_tflite). Received signatures: {sorted(signatures)}"
            )
        self._encode = self.interpreter.get_signature_runner("encode")
        self._step = self.interpreter.get_signature_runner("decode_step")
        self.batch_size, self.source_length = (
            int(n) for n in self._encode.get_input_details()["source_ids"]["shape"]
        )
        self.start_id, self.end_id, self.unk_id = int(start_id), int(end_id), int(unk_id)
        limits = self._encode(source_ids=np.zeros((self.batch_size, self.source_length), np.int32))
        self.max_length = int(limits["limit_max_length"])
        self.source_vocab_size = int(limits["limit_source_vocab_size"])

    def greedy(self, source_ids, max_length, no_repeat_ngram_size=0, ban_unk=False):
        """Arg-max decoding of `source_ids`, like `kerasseq.decoding.greedy`.

        Args:
            source_ids: int `(rows, length)`, 0 = padding; rows <= the file's
                batch size, length <= its source length.
            max_length: int >= 1, most tokens generated (at most the
                `max_length` the file was written with, for a Transformer).
            no_repeat_ngram_size: int n >= 0, as `kerasseq.SearchConfig`'s:
                no n-gram of tokens twice in an output (0: off).
            ban_unk: bool, as `kerasseq.SearchConfig`'s: never generate
                `unk_id`.

        Returns:
            NumPy `(token_ids, lengths)`: int32 `(rows, max_length)` without
            the end token, 0 after it, and the tokens before the end token.

        Raises:
            ValueError: `source_ids` of the wrong rank, too many rows or tokens.
        """
        source_ids = np.asarray(source_ids)
        if source_ids.ndim != 2 or not np.issubdtype(source_ids.dtype, np.integer):
            raise ValueError(
                "source_ids must be integer ids of shape (rows, length). Received: "
                f"dtype={source_ids.dtype}, shape={source_ids.shape}"
            )
        rows, length = source_ids.shape
        if rows > self.batch_size or length > self.source_length:
            raise ValueError(
                f"This .tflite file takes at most {self.batch_size} rows of "
                f"{self.source_length} tokens (export_tflite's batch_size and "
                f"source_length). Received: source_ids of shape {source_ids.shape}"
            )
        max_length = check_positive_int("max_length", max_length)
        size = check_int("no_repeat_ngram_size", no_repeat_ngram_size, 0)
        if not isinstance(ban_unk, bool):
            raise ValueError(f"ban_unk must be a bool. Received: ban_unk={ban_unk!r}")
        banned = never_generated(self.start_id, self.end_id, (self.unk_id,) if ban_unk else ())
        if max_length > self.max_length:
            raise ValueError(
                f"max_length must be <= {self.max_length}, the max_length this .tflite file was "
                f"written with (export_tflite). Received: max_length={max_length}")
        if source_ids.size and (source_ids.min() < 0 or 0 < self.source_vocab_size
                                <= source_ids.max()):
            raise ValueError(
                f"source_ids must hold ids in [0, {self.source_vocab_size - 1}]. Received ids "
                f"from {source_ids.min()} to {source_ids.max()}")
        padded = np.zeros((self.batch_size, self.source_length), np.int32)
        padded[:rows, :length] = source_ids
        state = {key: value for key, value in self._encode(source_ids=padded).items()
                 if not key.startswith("limit_")}
        tokens = np.full((self.batch_size,), self.start_id, np.int32)
        output = np.zeros((self.batch_size, max_length), np.int32)
        lengths = np.full((self.batch_size,), max_length, np.int32)
        finished = np.zeros((self.batch_size,), bool)
        for step in range(max_length):
            result = self._step(token_ids=tokens, step=np.int32(step), **state)
            logits = result.pop("logits")
            state = result
            logits = ban_tokens(tf.constant(logits), banned).numpy()  # the searches' own ban
            if size:  # the searches' own ban, on this loop's tokens so far
                logits = ban_repeated_ngrams(tf.constant(logits), tf.constant(output),
                                             tf.constant(step, tf.int32), size).numpy()
            tokens = np.argmax(logits, axis=-1).astype(np.int32)
            ended = ~finished & (tokens == self.end_id)
            lengths[ended] = step
            finished |= ended
            output[:, step] = np.where(finished, 0, tokens)
            if finished[:rows].all():
                break
        return output[:rows], lengths[:rows]

