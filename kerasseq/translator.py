"""The one inference path: `SearchConfig` and `Translator`.

Every way text (or source ids) reaches a search in kerasseq goes through a
`Translator`: `kerasseq.translate`, `Seq2SeqModel.translate` and `generate`,
the `kerasseq translate` / `evaluate` commands and `export_translator` (which
saves the translator's own serving `tf.function`). They share one set of
defaults, the fields of `SearchConfig`: beam search with 4 beams.

Pipeline (eager, `Translator.translate`):

    input checks → tokenize → sort by length, cut into batches → pad each batch
    to a bucket (rows: power of two; columns: multiple of 8) → one compiled
    function [model.encode → search] → drop the padding → detokenize → restore
    the input order

The compiled function is a `tf.function` with `jit_compile` (XLA) resolved
from `SearchConfig.jit_compile`; because every batch is padded to a bucket,
the number of compiled shapes stays small (about log2(batch_size) row buckets
times the source-length buckets that occur).

The translator only needs the decoding contract
(`kerasseq.decoding.Seq2SeqDecodable`: `encode` and `decode_step`) plus,
for text, `source_tokenizer` / `target_tokenizer`; models do not import it.
"""

import dataclasses
import numbers
import types
from typing import Any, Optional, Union

import keras
import numpy as np
import tensorflow as tf

from kerasseq import decoding
from kerasseq._validation import check_int

METHODS = ("beam", "greedy", "sample")
SOURCE_BUCKETS = ("geometric", "multiple")
DEFAULT_MAX_SOURCE_LENGTH = 256
PAD_ID, START_ID, END_ID = 0, 2, 3

# A string is "blank" when it holds nothing but the characters Python's
# `str.strip()` removes: ASCII whitespace, vertical tab, the separators
# U+001C..U+001F and U+0085, and every Unicode space/line/paragraph separator
# (category Z). RE2 syntax (used by `tf.strings.regex_full_match`).
BLANK_PATTERN = r"[\s\v\x{1c}-\x{1f}\x{85}\p{Z}]*"
TEXT_SPEC = tf.TensorSpec(shape=[None], dtype=tf.string, name="text")


def source_bucket_edges(multiple, scheme="geometric", up_to=1 << 16):
    """The source-length buckets, increasing: multiples of `multiple`.

    `"multiple"`: m, 2m, 3m, ...; `"geometric"`: m, 2m, 3m, 4m, 6m, 8m, 12m,
    16m, ... (2^k m and 3 * 2^k m). Both the eager path and the exported
    graph pad to these edges (`source_bucket_length`,
    `Translator._search_graph`).
    """
    if scheme == "multiple":
        return list(range(multiple, up_to + multiple, multiple))
    edges, power = [multiple], multiple
    while edges[-1] < up_to:
        power *= 2
        edges += [power, power * 3 // 2]  # 2m, 3m, 4m, 6m, 8m, 12m, ...
    return edges


def source_bucket_length(length, multiple, scheme="geometric"):
    """Smallest bucket edge >= `length` (and >= `multiple`): Python int."""
    for edge in source_bucket_edges(multiple, scheme, up_to=max(length, multiple)):
        if edge >= length:
            return edge
    return -(-length // multiple) * multiple


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# --------------------------------------------------------------------------
# SearchConfig.
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Every setting of a search, checked once, with kerasseq's one set of defaults.

    Fields:
        method: `"beam"` (default), `"greedy"` or `"sample"`.
        num_beams: int >= 1, alive hypotheses per text (beam only; default 4).
        num_return: int in `[1, num_beams]`, hypotheses returned per text
            (beam only; default 1). With `num_return > 1`, `translate` returns
            n-best lists.
        length_penalty: float alpha >= 0, GNMT length penalty (beam only).
        coverage_penalty: float beta >= 0, GNMT coverage penalty (beam only;
            needs a model that reports attention weights).
        max_length: int >= 1, most target tokens generated; `None` takes the
            model's `max_target_length`.
        min_length: int >= 0, the end token is forbidden before this many
            tokens.
        temperature, top_k, top_p, seed: sampling settings (sample only, see
            `kerasseq.decoding.sample`). `seed=None` draws a new seed per call.
        return_log_probs: bool, beam only: `generate` also returns the
            unpenalised log-probabilities.
        jit_compile: `"auto"` (default), True or False. `"auto"` compiles the
            encoder and the search with XLA when TensorFlow sees a GPU, and
            not on CPU, where a compile per bucket shape (5-10 s for a
            3-layer Transformer) costs more than XLA saves on a corpus
            translated once (`benchmarks/translate_long.py`; see
            `resolve_jit_compile`). With XLA, the first call for each bucket
            shape pays the trace and compile time.
        batch_size: int >= 1, texts decoded at once.
        batch_buckets: `"pow2"` (default), an increasing tuple of ints, or
            `None`: every batch is padded to the smallest bucket holding it,
            so a few compiled shapes serve every batch size.
        max_source_length: int >= 1 or `None`: source tokens kept per text
            (longer sources are cut; `None` keeps the source tokenizer's
            `max_length`, or every token).
        source_buckets: `"geometric"` (default) or `"multiple"`. Every batch
            is padded to a source-length bucket, and each bucket is compiled
            once. `"multiple"` rounds up to a multiple m of the model's
            `source_length_multiple` (8): one compile per 8 tokens of
            length. `"geometric"` uses m, 2m, 3m, 4m, 6m, 8m, 12m, 16m, ...
            (each at most 1.5 times the one before): a corpus of sources up
            to 256 tokens compiles at most 10 shapes instead of 32, for at
            most a third more padding.
        max_length_a, max_length_b: float >= 0 and int >= 0, fairseq's
            `--max-len-a` / `--max-len-b`. With `max_length_a > 0`, a batch
            whose sources are padded to S tokens generates at most
            `min(max_length, ceil(max_length_a * S + max_length_b))` tokens:
            the search stops, and the Transformer's self-attention cache
            ends, there. Off by default (`max_length_a=0`: every batch
            gets `max_length`).

    Example:

    >>> config = SearchConfig(num_beams=8, length_penalty=0.6)
    >>> config.replace(method="greedy").method
    'greedy'
    """

    method: str = "beam"
    num_beams: int = 4
    num_return: int = 1
    length_penalty: float = 0.0
    coverage_penalty: float = 0.0
    max_length: Optional[int] = None
    min_length: int = 0
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: Optional[int] = None
    return_log_probs: bool = False
    jit_compile: Union[bool, str] = "auto"
    batch_size: int = 64
    batch_buckets: Any = "pow2"
    max_source_length: Optional[int] = None
    source_buckets: str = "geometric"
    max_length_a: float = 0.0
    max_length_b: int = 10

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}. Received: method={self.method!r}")
        self._check_int("num_beams", 1)
        self._check_int("num_return", 1)
        if self.method == "beam" and self.num_return > self.num_beams:
            raise ValueError(
                f"num_return must be <= num_beams={self.num_beams}. "
                f"Received: num_return={self.num_return}"
            )
        for name in ("length_penalty", "coverage_penalty"):
            value = getattr(self, name)
            if not _is_real(value) or not value >= 0 or not np.isfinite(value):
                raise ValueError(f"{name} must be a finite float >= 0. Received: {name}={value!r}")
        if self.max_length is not None:
            self._check_int("max_length", 1)
        self._check_int("min_length", 0)
        if self.max_length is not None and self.min_length > self.max_length:
            raise ValueError(
                f"min_length must be <= max_length={self.max_length}. "
                f"Received: min_length={self.min_length}"
            )
        if not _is_real(self.temperature) or not self.temperature > 0 or not np.isfinite(self.temperature):
            raise ValueError(f"temperature must be a float > 0. Received: temperature={self.temperature!r}")
        self._check_int("top_k", 0)
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be a float in (0, 1]. Received: top_p={self.top_p!r}")
        if self.seed is not None and not _is_int(self.seed):
            raise ValueError(f"seed must be an int or None. Received: seed={self.seed!r}")
        if not isinstance(self.return_log_probs, bool):
            raise ValueError(
                f"return_log_probs must be a bool. Received: return_log_probs={self.return_log_probs!r}"
            )
        if not (isinstance(self.jit_compile, bool) or self.jit_compile == "auto"):
            raise ValueError(
                "jit_compile must be True, False or 'auto'. "
                f"Received: jit_compile={self.jit_compile!r}"
            )
        self._check_int("batch_size", 1)
        buckets = self.batch_buckets
        if buckets is not None and buckets != "pow2":
            if isinstance(buckets, (str, bool)) or not isinstance(buckets, (tuple, list)) or not buckets \
                    or not all(_is_int(b) and b >= 1 for b in buckets):
                raise ValueError(
                    "batch_buckets must be 'pow2', None or a sequence of ints >= 1. "
                    f"Received: batch_buckets={buckets!r}"
                )
            object.__setattr__(self, "batch_buckets", tuple(sorted(int(b) for b in buckets)))
        if self.max_source_length is not None:
            self._check_int("max_source_length", 1)
        if self.source_buckets not in SOURCE_BUCKETS:
            raise ValueError(f"source_buckets must be one of {list(SOURCE_BUCKETS)}. "
                             f"Received: source_buckets={self.source_buckets!r}")
        if not _is_real(self.max_length_a) or not self.max_length_a >= 0 or not np.isfinite(
                self.max_length_a):
            raise ValueError("max_length_a must be a finite float >= 0. "
                             f"Received: max_length_a={self.max_length_a!r}")
        self._check_int("max_length_b", 0)

    def _check_int(self, name, minimum):
        object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))

    # ------------------------------------------------------------ helpers
    @classmethod
    def fields(cls):
        """Names of the settings, in declaration order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def from_kwargs(cls, config=None, **kwargs):
        """`config` (or the defaults) with `kwargs` replacing fields.

        Raises:
            TypeError: a keyword is not a `SearchConfig` field (the message
                lists the valid ones).
        """
        if config is not None and not isinstance(config, cls):
            raise TypeError(
                f"config must be a kerasseq.SearchConfig. Received: config of type "
                f"{type(config).__name__}"
            )
        unknown = sorted(set(kwargs) - set(cls.fields()))
        if unknown:
            raise TypeError(
                f"Unknown search setting(s) {unknown}. Valid settings: {list(cls.fields())}"
            )
        base = config if config is not None else cls()
        return dataclasses.replace(base, **kwargs) if kwargs else base

    def replace(self, **kwargs):
        """A copy with some fields replaced (checked again)."""
        return SearchConfig.from_kwargs(self, **kwargs)

    @property
    def beams(self):
        """Hypotheses the search keeps per text: `num_beams` for beam, else 1."""
        return self.num_beams if self.method == "beam" else 1

    @property
    def returns(self):
        """Hypotheses returned per text: `num_return` for beam, else 1."""
        return self.num_return if self.method == "beam" else 1


def resolve_jit_compile(jit_compile="auto"):
    """`"auto"` → a bool: XLA on a GPU, plain graphs on CPU.

    On CPU XLA pays back only on shapes decoded many times:
    `benchmarks/translate_long.py` (300 Bible verses, a 3+3-layer
    Transformer, 2 cores) measured greedy 49.8 s with XLA against 26.8 s
    without for the first pass over the verses (compiles included), 12.3 s
    against 20.9 s for a second pass; beam 4: 75.7 s against 65.1 s, then
    46.8 s against 55.6 s. Translating a corpus once is the common case on
    CPU, so "auto" leaves XLA to GPUs there (`jit_compile=True` forces it).
    """
    if isinstance(jit_compile, bool):
        return jit_compile
    if jit_compile != "auto":
        raise ValueError(f"jit_compile must be True, False or 'auto'. Received: jit_compile={jit_compile!r}")
    return bool(tf.config.list_physical_devices("GPU"))


# --------------------------------------------------------------------------
# Input checks.
# --------------------------------------------------------------------------


def check_texts(texts):
    """Validate translation inputs: every item a `str` (blank ones are allowed).

    Raises:
        TypeError: an item is not a `str` (named by its index).
    """
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] must be a str. Received: {type(text).__name__}")


def is_blank(text):
    """True for a text with nothing to translate: empty or whitespace only.

    "Whitespace" is what `str.strip()` removes; exports use the same set of
    characters (`BLANK_PATTERN`), so the rule is the same everywhere.
    """
    return not text.strip()


def check_source_ids(source_ids, vocab_size):
    """Validate concrete source ids: integers, rank 2, each in `[0, vocab_size)`.

    Returns:
        The ids as an int NumPy array `(batch_size, source_length)`.

    Raises:
        TypeError: the ids are not integers.
        ValueError: the shape is not `(batch_size, source_length)`, or an id is
            negative or `>= vocab_size` (the message names the first one).
    """
    if isinstance(source_ids, tf.RaggedTensor):
        source_ids = source_ids.to_tensor()
    array = np.asarray(source_ids)
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"source_ids must be integer token ids. Received: source_ids with dtype {array.dtype}"
        )
    if array.ndim != 2:
        raise ValueError(
            "source_ids must have shape (batch_size, source_length). "
            f"Received shape: {array.shape}"
        )
    if vocab_size is not None:
        bad = (array < 0) | (array >= vocab_size)  # (batch_size, source_length)
        if bad.any():
            row, column = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"source_ids must hold ids in the range [0, {vocab_size - 1}] (0 = padding; "
                f"source_vocab_size={vocab_size}). Received: source_ids[{row}, {column}]="
                f"{int(array[row, column])}"
            )
    return array


def check_model(model):
    """Raise a `TypeError` unless `model` meets the decoding contract."""
    for attribute in ("encode", "decode_step"):
        if not callable(getattr(model, attribute, None)):
            raise TypeError(
                "model must follow the kerasseq decoding contract (encode and "
                f"decode_step, see kerasseq.decoding.Seq2SeqDecodable). Received: model of "
                f"type {type(model).__name__} without {attribute}()"
            )


# --------------------------------------------------------------------------
# Translator.
# --------------------------------------------------------------------------


class Translator:
    """Text or ids in, translations out: the one inference path of kerasseq.

    It owns the input checks, tokenization, batching by length with row and
    column buckets, the compiled `encode` + search function and
    detokenization. `kerasseq.translate`, `Seq2SeqModel.translate` /
    `generate`, the CLI and `export_translator` all use it;
    `serving_module()` wraps its graph path (`translate_tensor`) for
    `tf.saved_model.save`, so a SavedModel of a translator loads with
    TensorFlow alone.

    Args:
        model: a `Seq2SeqDecodable` (`encode`, `decode_step`), e.g. a kerasseq
            `Seq2SeqModel`; text needs `source_tokenizer`/`target_tokenizer`.
        config: a `SearchConfig` (default: `SearchConfig()`, beam 4).
        **overrides: `SearchConfig` fields replacing those of `config`.

    Example:

    >>> translator = Translator(model, SearchConfig(num_beams=4))   # doctest: +SKIP
    >>> translator.translate(["cat", "dog"])                         # doctest: +SKIP
    ['K AE T', 'D AO G']
    """

    def __init__(self, model, config=None, **overrides):
        check_model(model)
        config = SearchConfig.from_kwargs(config, **overrides)
        check_search = getattr(model, "check_search_config", None)
        if callable(check_search):
            check_search(config)
        max_length = config.max_length
        if max_length is None:
            max_length = getattr(model, "max_target_length", None)
            if not _is_int(max_length) or max_length < 1:
                raise ValueError(
                    "max_length must be given in the SearchConfig: the model has no "
                    f"max_target_length. Received: max_length={config.max_length!r}"
                )
            if config.min_length > max_length:
                raise ValueError(
                    f"min_length must be <= max_length={max_length}. "
                    f"Received: min_length={config.min_length}"
                )
        # Everything lives in one namespace (see `ServingModule`, which keeps
        # the translator out of a SavedModel's object graph the same way).
        self._python = types.SimpleNamespace(
            model=model,
            config=config,
            max_length=int(max_length),
            jit_compile=resolve_jit_compile(config.jit_compile),
            source_tokenizer=getattr(model, "source_tokenizer", None),
            target_tokenizer=getattr(model, "target_tokenizer", None),
            start_id=int(getattr(model, "start_id", START_ID)),
            end_id=int(getattr(model, "end_id", END_ID)),
            source_vocab_size=getattr(model, "source_vocab_size", None),
            length_multiple=int(getattr(model, "source_length_multiple", 8) or 1),
            compiled={},  # (rows, source_length) or None -> tf.function
            traces=0,
        )

    # ------------------------------------------------------------ properties
    @property
    def model(self):
        return self._python.model

    @property
    def config(self):
        """The `SearchConfig` (with `max_length` possibly still `None`)."""
        return self._python.config

    @property
    def max_length(self):
        """Most target tokens generated (the config's, or the model's)."""
        return self._python.max_length

    @property
    def jit_compile(self):
        """Whether the encode + search function is XLA-compiled (bool)."""
        return self._python.jit_compile

    @property
    def trace_count(self):
        """Times the compiled encode + search function was traced."""
        return self._python.traces

    @property
    def max_source_length(self):
        """Source tokens kept per text, or `None` for all of them."""
        config_limit = self.config.max_source_length
        tokenizer_limit = getattr(self._python.source_tokenizer, "max_length", None)
        limits = [limit for limit in (config_limit, tokenizer_limit) if limit]
        return min(limits) if limits else None

    # --------------------------------------------------------- the compute
    def _search_ids(self, source_ids, seed):
        """`model.encode` then the search, as one function (XLA-compiled or not).

        Args:
            source_ids: int32 `(rows, source_length)`, 0 = padding.
            seed: int32 `()`, the sampling seed (unused by the other methods).

        Returns:
            `(token_ids, scores, lengths, log_probs)`: int32
            `(rows, num_return, max_length)`, float32 `(rows, num_return)`,
            int32 `(rows, num_return)`, float32 `(rows, num_return)`.
        """
        self._python.traces += 1
        model, config = self._python.model, self._python.config
        max_length = self._bucket_max_length(source_ids.shape[1])
        state = decoding.encode_for_search(model, source_ids, max_length)
        common = dict(
            batch_size=None, start_id=self._python.start_id, end_id=self._python.end_id,
            max_length=max_length, min_length=config.min_length,
            jit_compile=False,  # the enclosing function decides
        )
        outputs = self._search(model, state, seed, common)
        if max_length < self._python.max_length:  # every caller sees max_length columns
            width = self._python.max_length - max_length
            outputs = (tf.pad(outputs[0], [[0, 0], [0, 0], [0, width]]),) + tuple(outputs[1:])
        return outputs

    def _bucket_max_length(self, source_length):
        """Most tokens generated for sources padded to `source_length` (a Python
        int, or `None` in the graph path: then `max_length`)."""
        config, max_length = self._python.config, self._python.max_length
        if not config.max_length_a or source_length is None:
            return max_length
        limit = int(np.ceil(config.max_length_a * source_length + config.max_length_b))
        return max(min(max_length, limit), config.min_length, 1)

    def _search(self, model, state, seed, common):
        """The configured search over `state`; returns ids with a `num_return` axis."""
        config = self._python.config
        if config.method == "beam":
            token_ids, scores, lengths, log_probs = decoding.beam_search(
                model.decode_step, state, num_beams=config.num_beams,
                length_penalty=config.length_penalty, coverage_penalty=config.coverage_penalty,
                num_return=config.num_return, return_log_probs=True,
                shared_state=tuple(getattr(model, "shared_state_keys", ())), **common,
            )  # (rows, num_return, max_length), (rows, num_return) x 3
            return token_ids, scores, lengths, log_probs
        if config.method == "greedy":
            token_ids, scores, lengths = decoding.greedy(model.decode_step, state, **common)
        else:
            token_ids, scores, lengths = decoding.sample(
                model.decode_step, state, temperature=config.temperature, top_k=config.top_k,
                top_p=config.top_p, seed=seed, **common,
            )
        # (rows, max_length), (rows,), (rows,) -> one hypothesis per row
        return token_ids[:, None, :], scores[:, None], lengths[:, None], scores[:, None]

    def _compiled(self, shape):
        """The `tf.function` of `_search_ids` for one bucket shape.

        One function per `(rows, source_length)` bucket (each traced once, so
        TensorFlow never warns about retracing), and one with an unknown
        shape, `None`, for the graph path of exports.
        """
        function = self._python.compiled.get(shape)
        if function is None:
            signature = None
            if shape is None:
                signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)]
            def search_ids(source_ids, seed):
                return self._search_ids(source_ids, seed)

            # One function per bucket, each traced once by design. TensorFlow
            # counts traces per code object and would report the buckets as
            # "frequent retracing": each bucket gets a code object of its own.
            name = "search_ids" if shape is None else "search_ids_{}x{}".format(*shape)
            search_ids = types.FunctionType(search_ids.__code__.replace(co_name=name),
                                            search_ids.__globals__, name,
                                            search_ids.__defaults__, search_ids.__closure__)
            function = tf.function(search_ids, jit_compile=self._python.jit_compile,
                                   input_signature=signature)
            self._python.compiled[shape] = function
        return function

    def _next_seed(self):
        """The sampling seed of one call; 0 (unused) for greedy and beam search,
        so those never draw from NumPy's global generator."""
        seed = self.config.seed
        if self.config.method != "sample":
            seed = 0
        elif seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        return tf.constant(int(seed) % (2**31 - 1), tf.int32)

    # ------------------------------------------------------------ ids, eager
    def _prepare_ids(self, array):
        """Valid ids (checked by `generate`, or from the tokenizer) → trimmed,
        column-bucketed int32 ids `(rows, padded_length)`."""
        limit = self.max_source_length
        if limit is not None:
            array = array[:, :limit]
        trim = getattr(self.model, "_trim_source_ids", None)
        if callable(trim):
            array = np.asarray(trim(array))
        length = array.shape[1]
        padded = source_bucket_length(length, self._python.length_multiple,
                                      self.config.source_buckets)
        if padded != length:
            array = np.pad(array, [(0, 0), (0, padded - length)])
        return array.astype(np.int32)

    def _run_batch(self, source_ids):
        """Decode one batch of prepared ids, padded to a row bucket and back.

        Returns:
            NumPy `(token_ids, scores, lengths, log_probs)` with `rows` rows.
        """
        rows = source_ids.shape[0]
        buckets = self.config.batch_buckets
        padded = rows if buckets is None else decoding.bucket_size(rows, buckets)
        if padded != rows:  # extra rows repeat row 0: valid inputs, outputs dropped
            source_ids = np.concatenate([source_ids, np.repeat(source_ids[:1], padded - rows, 0)])
        function = self._compiled(source_ids.shape)
        outputs = function(tf.constant(source_ids), self._next_seed())
        return tuple(np.asarray(output)[:rows] for output in outputs)

    def generate(self, source_ids):
        """Decode source ids in batches of `batch_size`.

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding (NumPy,
                nested list, `tf.Tensor` or `tf.RaggedTensor`).

        Returns:
            NumPy arrays `(token_ids, scores, lengths)`, plus `log_probs` when
            `return_log_probs=True` (beam): greedy and sample give
            `(n, max_length)`, `(n,)`, `(n,)`; beam gives `(n, num_return,
            max_length)`, `(n, num_return)`, `(n, num_return)`.
        """
        array = check_source_ids(source_ids, self._python.source_vocab_size)
        if array.shape[0] == 0:
            raise ValueError("source_ids holds no rows: there is nothing to translate.")
        parts = [self._run_batch(self._prepare_ids(array[start:start + self.config.batch_size]))
                 for start in range(0, array.shape[0], self.config.batch_size)]
        token_ids, scores, lengths, log_probs = (np.concatenate(p, axis=0) for p in zip(*parts, strict=True))
        if self.config.method != "beam":
            return token_ids[:, 0], scores[:, 0], lengths[:, 0]
        if self.config.return_log_probs:
            return token_ids, scores, lengths, log_probs
        return token_ids, scores, lengths

    # ------------------------------------------------------------ text, eager
    def _check_text_model(self):
        if self._python.source_tokenizer is None or self._python.target_tokenizer is None:
            raise ValueError(
                "translate() needs a model built with source_tokenizer and "
                "target_tokenizer; for token ids use generate(source_ids)."
            )

    def translate(self, texts, return_scores=False, verbose=0, return_alignments=False,
                  alignment_layer=-1, alignment_head="mean"):
        """Translate strings end to end.

        Texts are sorted by token length before batching (less padding, fewer
        shapes) and returned in the input order.

        Blank texts. An empty or whitespace-only text (or one that yields no
        token) translates to `""` with score 0.0 and is never searched, as in
        an export and in `kerasseq translate`: one blank line does not stop a
        corpus.

        Args:
            texts: a `str` or a list of `str` (anything else raises
                `TypeError`); unknown characters/words map to `[UNK]`.
            return_scores: also return the search scores.
            verbose: 1 shows a Keras progress bar over the texts.
            return_alignments: also return each hypothesis's word alignment:
                a list of `(source_word, target_word)` index pairs, target
                word j linked to the source word it attended to most (subword
                pieces merged into words; see `kerasseq.alignment`). Needs a
                model with attention.
            alignment_layer, alignment_head: which cross-attention of a
                Transformer the alignment reads: an index or `"mean"` each
                (default: the last layer, averaged over heads).

        Returns:
            A string for a single string, else a list of strings; with
            `num_return > 1` (beam) n-best lists instead of strings. With
            `return_scores=True`, a `(translations, scores)` pair whose
            scores mirror the translations: a float per string (the beam
            score s(Y, X), or log P(Y | X) for greedy and sampling), a list
            of floats per n-best list. With `return_alignments=True` the
            alignments come last, mirroring the translations (a list of
            links per string, a list of such lists per n-best list; `[]` for
            a blank text).
        """
        self._check_text_model()
        if return_alignments:  # fail before the search, not after it
            from kerasseq.alignment import check_alignable

            check_alignable(self.model)
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        check_texts(texts)
        source = self._python.source_tokenizer.encode(texts) if texts else None
        lengths = source.row_lengths().numpy() if texts else np.zeros([0], np.int64)
        blank = np.array([is_blank(text) for text in texts], bool) | (lengths == 0)
        # One rule for blank texts everywhere (API, CLI, exports): "" with score 0.0.
        empty = [""] * self.config.returns if self.config.returns > 1 else ""
        empty_score = [0.0] * self.config.returns if self.config.returns > 1 else 0.0
        translations = [empty if is_empty else None for is_empty in blank]
        scores = [empty_score if is_empty else None for is_empty in blank]
        empty_links = [[] for _ in range(self.config.returns)] if self.config.returns > 1 else []
        links = [empty_links if is_empty else None for is_empty in blank]
        order = [row for row in np.argsort(lengths, kind="stable") if not blank[row]]
        progress = keras.utils.Progbar(len(texts), verbose=verbose) if verbose else None
        if progress is not None and blank.any():
            progress.add(int(blank.sum()))
        for start in range(0, len(order), self.config.batch_size):
            rows = order[start:start + self.config.batch_size]
            ids = tf.gather(source, rows).to_tensor(default_value=PAD_ID).numpy()
            prepared = self._prepare_ids(ids)
            token_ids, batch_scores, batch_lengths = self._run_batch(prepared)[:3]
            for row, text, score in zip(rows, self._detokenize(token_ids), batch_scores, strict=True):
                translations[row] = text
                # a score mirrors its translation: a float, or a list for n-best lists
                scores[row] = score.tolist() if self.config.returns > 1 else float(score[0])
            if return_alignments:
                batch_links = self._align(prepared, token_ids, batch_lengths,
                                          alignment_layer, alignment_head)
                for row, row_links in zip(rows, batch_links, strict=True):
                    links[row] = row_links if self.config.returns > 1 else row_links[0]
            if progress is not None:
                progress.add(len(rows))
        if single:
            translations, scores, links = translations[0], scores[0], links[0]
        outputs = (translations,) + ((scores,) if return_scores else ()) + (
            (links,) if return_alignments else ())
        return outputs if len(outputs) > 1 else translations

    __call__ = translate

    def _align(self, source_ids, token_ids, lengths, layer, head):
        """Word links of every returned hypothesis of one batch.

        Args:
            source_ids: int32 `(rows, source_length)` as searched, 0 = padding.
            token_ids: int32 `(rows, num_return, max_length)`.
            lengths: int32 `(rows, num_return)`, tokens before the end token.

        Returns:
            A list (rows) of lists (the `config.returns` hypotheses) of links.
        """
        from kerasseq import alignment

        returns = self.config.returns
        sources, targets = [], []
        for row in range(token_ids.shape[0]):
            source = source_ids[row][source_ids[row] != PAD_ID]
            for rank in range(returns):
                sources.append(source)
                targets.append(token_ids[row, rank, :lengths[row, rank]])
        links = []
        for start in range(0, len(sources), self.config.batch_size):
            stop = start + self.config.batch_size
            links.extend(result["links"] for result in alignment.align_ids(
                self.model, sources[start:stop], targets[start:stop], layer=layer, head=head,
                start_id=self._python.start_id))
        return [links[row * returns:(row + 1) * returns] for row in range(token_ids.shape[0])]

    def _detokenize(self, token_ids):
        """`(rows, num_return, max_length)` ids → strings, or n-best lists of strings."""
        rows, num_return, length = token_ids.shape
        flat = self._python.target_tokenizer.decode_to_strings(token_ids.reshape(-1, length))
        nbest = [flat[i * num_return:(i + 1) * num_return] for i in range(rows)]
        return [items[0] for items in nbest] if self.config.returns == 1 else nbest

    # --------------------------------------------------------- text, graph
    def translate_tensor(self, text, num_return=None):
        """Graph-mode translation of a `tf.string` batch (what exports serve).

        Bad input never fails: blank texts (or texts without tokens) give `""`
        and score 0.0, unknown tokens become `[UNK]`, sources are cut to
        `max_source_length` (default 256 tokens), invalid UTF-8 is replaced by
        U+FFFD, an empty batch gives empty outputs. Rows are padded to a power
        of two and columns to a multiple of 8 before the compiled search, so
        XLA compiles a bounded set of shapes.

        Args:
            text: `tf.string` `(batch_size,)`.
            num_return: int <= `config.returns` (default: `config.returns`).

        Returns:
            `(translations, scores)`: `tf.string` and float32
            `(batch_size, num_return)`.
        """
        token_ids, scores, _ = self._translate_tensor_ids(text, num_return)
        num_return, max_length = token_ids.shape[1], self.max_length
        texts = self._python.target_tokenizer.detokenize(tf.reshape(token_ids, [-1, max_length]))
        # (batch_size * num_return,)
        return tf.reshape(texts, [-1, num_return]), scores  # (batch_size, num_return)

    def align_tensor(self, text, layer=-1, head="mean"):
        """Graph-mode translation with word alignments (the `translate_alignments` export).

        Args:
            text: `tf.string` `(batch_size,)`.
            layer, head: the attention that aligns (`kerasseq.alignment`).

        Returns:
            `(translations, scores, alignments)`: `tf.string`, float32 and
            `tf.string`, each `(batch_size,)`; an alignment reads
            `"0-0 2-1 ..."` (source word - target word).
        """
        from kerasseq import alignment

        alignment.check_alignable(self.model)
        token_ids, scores, source_ids = self._translate_tensor_ids(text, 1)
        best = token_ids[:, 0, :]  # (batch_size, max_length)
        links = alignment.alignment_strings(self.model, source_ids, best, layer, head,
                                            start_id=self._python.start_id)
        return self._python.target_tokenizer.detokenize(best), scores[:, 0], links

    def _translate_tensor_ids(self, text, num_return=None):
        """The graph path up to the ids: `(token_ids, scores, source_ids)`.

        Returns:
            int32 `(batch_size, num_return, max_length)`, float32
            `(batch_size, num_return)` and the searched source ids, int32
            `(batch_size, source_length)` (all 0 for blank texts).
        """
        self._check_text_model()
        returns = self.config.returns
        num_return = returns if num_return is None else num_return
        max_length = self.max_length
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        batch_size = tf.shape(text)[0]
        source_ids = self._python.source_tokenizer.encode(text)  # ragged (batch_size, None)
        source_ids = source_ids[:, : self._graph_source_limit()]
        blank = tf.strings.regex_full_match(text, BLANK_PATTERN)  # (batch_size,)
        has_tokens = tf.logical_and(tf.logical_not(blank), source_ids.row_lengths() > 0)
        rows = tf.cast(tf.where(has_tokens)[:, 0], tf.int32)  # (kept,)
        kept_ids = tf.gather(source_ids, rows).to_tensor(default_value=PAD_ID)  # (kept, length)

        def search():
            token_ids, scores = self._search_graph(tf.cast(kept_ids, tf.int32))
            return token_ids[:, :num_return], scores[:, :num_return]

        def nothing_to_search():
            return (tf.zeros([0, num_return, max_length], tf.int32),
                    tf.zeros([0, num_return], tf.float32))

        token_ids, scores = tf.cond(tf.size(rows) > 0, search, nothing_to_search)
        # (kept, num_return, max_length), (kept, num_return)
        token_ids = tf.scatter_nd(rows[:, None], token_ids,
                                  tf.stack([batch_size, num_return, max_length]))
        # (batch_size, num_return, max_length), blank rows all 0
        scores = tf.scatter_nd(rows[:, None], scores, tf.stack([batch_size, num_return]))
        # (batch_size, num_return), blank rows 0.0
        source_ids = tf.scatter_nd(rows[:, None], tf.cast(kept_ids, tf.int32),
                                   tf.stack([batch_size, tf.shape(kept_ids)[1]]))
        # (batch_size, source_length), blank rows all 0
        return token_ids, scores, source_ids

    def _graph_source_limit(self):
        """Source tokens kept in the graph path: never unbounded, never past a
        position table (the Transformer's `max_length`)."""
        limit = self.max_source_length or DEFAULT_MAX_SOURCE_LENGTH
        position_limit = getattr(self.model, "max_length", None)
        if _is_int(position_limit):
            limit = min(limit, position_limit)
        return limit

    def _search_graph(self, source_ids):
        """Bucket `(kept, length)` ids in the graph, run the compiled search, unpad.

        Returns:
            int32 `(kept, num_return, max_length)`, float32 `(kept, num_return)`.
        """
        rows = tf.shape(source_ids)[0]
        length = tf.shape(source_ids)[1]
        edges = tf.constant(source_bucket_edges(self._python.length_multiple,
                                                self.config.source_buckets,
                                                up_to=self._graph_source_limit()), tf.int32)
        padded_length = tf.boolean_mask(edges, edges >= tf.maximum(length, 1))[0]
        # the same buckets as the eager path (source_bucket_length)
        padded_rows = rows
        if self.config.batch_buckets == "pow2":
            padded_rows = tf.cast(
                2 ** tf.math.ceil(tf.math.log(tf.cast(rows, tf.float64)) / np.log(2.0)), tf.int32
            )
            padded_rows = tf.maximum(padded_rows, rows)  # guards float rounding
        elif self.config.batch_buckets is not None:
            buckets = tf.constant(self.config.batch_buckets, tf.int32)
            fitting = tf.boolean_mask(buckets, buckets >= rows)
            padded_rows = tf.cond(tf.size(fitting) > 0, lambda: fitting[0], lambda: rows)
        source_ids = tf.pad(source_ids, [[0, 0], [0, padded_length - length]])
        # (rows, padded_length)
        repeat_first = tf.zeros([padded_rows - rows], tf.int32)
        source_ids = tf.gather(source_ids, tf.concat([tf.range(rows), repeat_first], 0))
        # (padded_rows, padded_length): extra rows repeat row 0
        token_ids, scores, _, _ = self._compiled(None)(source_ids, self._next_seed_graph())
        return token_ids[:rows], scores[:rows]

    def _next_seed_graph(self):
        if self.config.method != "sample":
            return tf.constant(0, tf.int32)  # unused by greedy and beam search
        if self.config.seed is not None:
            return tf.constant(int(self.config.seed) % (2**31 - 1), tf.int32)
        return tf.random.uniform([], 0, 2**31 - 1, dtype=tf.int32)

    # ------------------------------------------------------------- export
    def serving_module(self):
        """A `tf.Module` to save with `tf.saved_model.save` (see `ServingModule`)."""
        self._check_text_model()
        return ServingModule(self)


class ServingModule(tf.Module):
    """What a SavedModel of a `Translator` holds.

    Two `tf.function`s with the input signature `text: tf.string (None,)`:
    `translate` → `{"translation", "score"}` (the best hypothesis) and
    `translate_nbest` → `{"translations", "scores"}` (`num_return` columns),
    both running `Translator.translate_tensor`. It tracks exactly what they
    capture: the model's variables and the tokenizers' lookup tables (an
    untracked table makes `tf.saved_model.save` fail, or the vocabulary comes
    back empty). The translator, the Keras model and the tokenizer objects
    stay out of the object graph, so loading needs neither Keras nor kerasseq.
    """

    def __init__(self, translator):
        super().__init__(name="kerasseq_translator")
        self._python = types.SimpleNamespace(translator=translator)
        self.model_variables = list(translator.model.variables)
        self.lookup_tables = (_lookup_tables(translator._python.source_tokenizer)
                              + _lookup_tables(translator._python.target_tokenizer))
        self.translate = tf.function(self._serve_best, input_signature=[TEXT_SPEC])
        self.translate_nbest = tf.function(self._serve_nbest, input_signature=[TEXT_SPEC])
        self.translate_alignments = None

    def add_alignments(self, layer=-1, head="mean"):
        """Add `translate_alignments` (text → translation, score, alignment)."""
        self._python.alignment = (layer, head)
        self.translate_alignments = tf.function(self._serve_alignments,
                                                input_signature=[TEXT_SPEC])
        return self.translate_alignments

    def _serve_alignments(self, text):
        layer, head = self._python.alignment
        translations, scores, links = self._python.translator.align_tensor(text, layer, head)
        return {"translation": translations, "score": scores, "alignment": links}

    def _serve_best(self, text):
        translations, scores = self._python.translator.translate_tensor(text, num_return=1)
        return {"translation": translations[:, 0], "score": scores[:, 0]}

    def _serve_nbest(self, text):
        translations, scores = self._python.translator.translate_tensor(text)
        return {"translations": translations, "scores": scores}


def _lookup_tables(tokenizer):
    """Every lookup table (a `TrackableResource`) reachable from `tokenizer`.

    A `tf.function` that uses a hash table can only be saved if the table is
    an attribute of a tracked object; the translator keeps these in a list.
    """
    return [
        trackable
        for trackable in tf.train.TrackableView(tokenizer).descendants()
        if isinstance(trackable, tf.saved_model.experimental.TrackableResource)
    ]


def get_translator(model, config=None, **overrides):
    """The cached `Translator` of `model` for these settings (one per config).

    Re-using the translator re-uses its compiled functions, so repeated
    `model.translate(...)` calls with the same settings trace and compile
    once per bucket shape.
    """
    config = SearchConfig.from_kwargs(config, **overrides)
    cache = model.__dict__.get("_kerasseq_translators") if hasattr(model, "__dict__") else None
    if cache is None:
        cache = {}
        try:
            object.__setattr__(model, "_kerasseq_translators", cache)
        except (AttributeError, TypeError):
            return Translator(model, config)
    translator = cache.get(config)
    if translator is None:
        translator = Translator(model, config)
        cache[config] = translator
        while len(cache) > 8:
            cache.pop(next(iter(cache)))
    return translator

