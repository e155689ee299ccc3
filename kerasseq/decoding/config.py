"""`SearchConfig`: every setting of a search, checked in one place.

The one validator of search settings (docs/design.md). `kerasseq.Translator`
takes a `SearchConfig`; the decoders of `kerasseq.decoding` (`greedy`,
`beam_search`, `sample`), called directly, check their search limits by
building one, and `kerasseq.export` builds one too: every message about a
bad `num_beams`, `max_length` or `temperature` comes from here. The command
line's parser is the one exception: it refuses a search flag outside its own
range (`--beam 0`, `--length-penalty -1`) before TensorFlow is imported, with
the bounds of the fields here; the commands then build a `SearchConfig`, for
the rules between fields, and report its message with the flag.
Its public addresses are `kerasseq.SearchConfig` and
`kerasseq.decoding.SearchConfig`; kerasseq's own modules import it from here.
"""

import copy
import dataclasses
import math
import numbers
from typing import Any, Optional, Union

from kerasseq._validation import ArgumentError, check_int, is_int

METHODS = ("beam", "greedy", "sample")
SOURCE_BUCKETS = ("geometric", "multiple")


class SearchConfigError(ArgumentError):
    """A bad search setting: a `ValueError` whose `.field` names the
    `SearchConfig` field (for a rule between fields, the one to change).

    The command line maps `.field` to the flag that set it.
    """


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_finite_non_negative(name, value):
    if not _is_real(value) or not value >= 0 or not math.isfinite(value):
        raise SearchConfigError(name, f"{name} must be a finite float >= 0. "
                                      f"Received: {name}={value!r}")


def _check_min_length(min_length, max_length):
    if min_length > max_length:
        raise SearchConfigError("min_length", f"min_length must be <= max_length={max_length}. "
                                              f"Received: min_length={min_length}")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Every setting of a search, checked once, with kerasseq's one set of defaults.

    Fields:
        method: `"beam"` (default), `"greedy"` or `"sample"`.
        num_beams: int >= 1, alive hypotheses per text (beam only; default 4).
        num_return: int in `[1, num_beams]`, hypotheses returned per text
            (default 1). More than 1 needs `method="beam"` (greedy and sampling
            give one hypothesis; `SearchConfigError` otherwise). With
            `num_return > 1`, `translate` returns n-best lists.
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
        jit_compile: `"auto"` (default), True or False: XLA-compile the
            encoder and the search; `"auto"` on a GPU only (why:
            `kerasseq.translator.resolve_jit_compile`). With XLA, the first
            call for each bucket shape pays the trace and compile time (5-10 s
            for a 3-layer Transformer).
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
        no_repeat_ngram_size: int n >= 0, fairseq's `--no-repeat-ngram-size`:
            no n-gram of token ids occurs twice in a hypothesis. At each step
            a token that would complete an n-gram the hypothesis already holds
            gets log-probability `-inf` (every search; beam search per beam).
            Only generated tokens count, never the start token. With WordPiece
            the n-grams are of pieces: n=3 allows a piece at most 3 times in a
            row ("##f ##f ##f"), which also ends loops inside a word, but it
            bans fair repeats too ("of the ... of the" with n=2): choose n
            on dev data. 0 (default) turns it off, at no cost.
        ban_unk: bool, never generate the target tokenizer's `[UNK]` (id 1),
            as `banned_ids` of the decoders in `kerasseq.decoding` bans it:
            its log-probability is set to `-inf` at every step of every
            search (the others are not renormalised). `[PAD]` (0) and
            `[START]` are never generated in any case. False (default)
            lets the model emit `[UNK]`.

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
    no_repeat_ngram_size: int = 0
    ban_unk: bool = False

    def __post_init__(self):
        if self.method not in METHODS:
            raise SearchConfigError("method", f"method must be one of {list(METHODS)}. "
                                              f"Received: method={self.method!r}")
        self._check_int("num_beams", 1)
        self._check_int("num_return", 1)
        if self.method != "beam" and self.num_return > 1:
            raise SearchConfigError(
                "num_return",
                f"num_return > 1 needs method='beam' ({self.method} search gives one "
                f"hypothesis per text). Received: method={self.method!r}, "
                f"num_return={self.num_return}"
            )
        if self.num_return > self.num_beams:
            raise SearchConfigError(
                "num_return",
                f"num_return must be <= num_beams={self.num_beams}. "
                f"Received: num_return={self.num_return}"
            )
        for name in ("length_penalty", "coverage_penalty"):
            _check_finite_non_negative(name, getattr(self, name))
        if self.max_length is not None:
            self._check_int("max_length", 1)
        self._check_int("min_length", 0)
        if self.max_length is not None:
            _check_min_length(self.min_length, self.max_length)
        if not _is_real(self.temperature) or not self.temperature > 0 or not math.isfinite(self.temperature):
            raise SearchConfigError("temperature", f"temperature must be a float > 0. Received: temperature={self.temperature!r}")
        self._check_int("top_k", 0)
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise SearchConfigError("top_p", f"top_p must be a float in (0, 1]. Received: top_p={self.top_p!r}")
        if self.seed is not None and not is_int(self.seed):
            raise SearchConfigError("seed", f"seed must be an int or None. Received: seed={self.seed!r}")
        if not isinstance(self.return_log_probs, bool):
            raise SearchConfigError(
                "return_log_probs",
                f"return_log_probs must be a bool. Received: return_log_probs={self.return_log_probs!r}"
            )
        if not (isinstance(self.jit_compile, bool) or self.jit_compile == "auto"):
            raise SearchConfigError(
                "jit_compile",
                "jit_compile must be True, False or 'auto'. "
                f"Received: jit_compile={self.jit_compile!r}"
            )
        self._check_int("batch_size", 1)
        buckets = self.batch_buckets
        if buckets is not None and buckets != "pow2":
            if isinstance(buckets, (str, bool)) or not isinstance(buckets, (tuple, list)) or not buckets \
                    or not all(is_int(b) and b >= 1 for b in buckets):
                raise SearchConfigError(
                    "batch_buckets",
                    "batch_buckets must be 'pow2', None or a sequence of ints >= 1. "
                    f"Received: batch_buckets={buckets!r}"
                )
            object.__setattr__(self, "batch_buckets", tuple(sorted(int(b) for b in buckets)))
        if self.max_source_length is not None:
            self._check_int("max_source_length", 1)
        if self.source_buckets not in SOURCE_BUCKETS:
            raise SearchConfigError("source_buckets", f"source_buckets must be one of {list(SOURCE_BUCKETS)}. "
                             f"Received: source_buckets={self.source_buckets!r}")
        _check_finite_non_negative("max_length_a", self.max_length_a)
        self._check_int("max_length_b", 0)
        self._check_int("no_repeat_ngram_size", 0)
        if not isinstance(self.ban_unk, bool):
            raise SearchConfigError("ban_unk", f"ban_unk must be a bool. Received: ban_unk={self.ban_unk!r}")

    def _check_int(self, name, minimum):
        try:
            value = check_int(name, getattr(self, name), minimum)
        except ArgumentError as error:
            raise SearchConfigError(name, str(error)) from None
        object.__setattr__(self, name, value)

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

    def with_max_length(self, max_length):
        """A copy with `max_length` set, checking that field alone.

        The other fields were checked when this config was made. The
        `Translator` fills in a model's `max_target_length` with it, and a
        batch's own limit under `max_length_a`.

        Raises:
            SearchConfigError: `max_length` is not an int >= 1 and >= `min_length`.
        """
        try:
            max_length = check_int("max_length", max_length, 1)
        except ArgumentError as error:
            raise SearchConfigError("max_length", str(error)) from None
        _check_min_length(self.min_length, max_length)
        resolved = copy.copy(self)  # no __post_init__: nothing else to check
        object.__setattr__(resolved, "max_length", max_length)
        return resolved

    @property
    def effective_num_beams(self):
        """Hypotheses the search keeps per text: `num_beams` for beam search, 1
        for greedy search and sampling (whose `num_beams` field is unused)."""
        return self.num_beams if self.method == "beam" else 1

