"""The one inference path: `Translator` (what uses it and what only it does:
the class docstring and docs/design.md).

Pipeline (eager, `Translator.translate`):

    input checks → tokenize → sort by length, cut into batches → pad each batch
    to a bucket (rows: power of two; columns: multiple of 8) → one compiled
    function [model.encode → search] → drop the padding → detokenize → restore
    the input order

The compiled function is a `tf.function` with `jit_compile` (XLA) resolved
from `SearchConfig.jit_compile`; because every batch is padded to a bucket,
the number of compiled shapes stays small (about log2(batch_size) row buckets
times the source-length buckets that occur).

It runs `kerasseq.decoding`'s loops, which keep no compiled functions, with
the settings of a `kerasseq.SearchConfig` (the one validator); the serving
module lives in `kerasseq.export`. It needs only the decoding contract
(`kerasseq.decoding.Seq2SeqDecodable`) plus the optional attributes of
`kerasseq.decoding.contract.OPTIONAL_ATTRIBUTES`, read through
`contract.optional`; models do not import it.
"""

import functools

import keras
import numpy as np
import tensorflow as tf

from kerasseq._buckets import pad_rows, row_edges, smallest_edge, source_bucket_edges
from kerasseq._validation import is_int
from kerasseq.alignment.merge import align_ids, alignment_strings, check_alignable
from kerasseq.data.tokenizer import END_ID, PAD_ID, START_ID, UNK_ID
from kerasseq.decoding import _common, contract
from kerasseq.decoding.beam_search import beam_search_loop
from kerasseq.decoding.config import SearchConfig
from kerasseq.decoding.contract import encode_for_search
from kerasseq.decoding.greedy import greedy_loop
from kerasseq.decoding.sampling import sample_loop, sampling_seed

# Source-length buckets laid out for a graph whose source length is known only
# at run time (an export without `max_source_length`): longer sources are
# padded to their own length.
GRAPH_BUCKET_LIMIT = 1024
# A string is "blank" when it holds nothing but the characters Python's
# `str.strip()` removes: ASCII whitespace, vertical tab, the separators
# U+001C..U+001F and U+0085, and every Unicode space/line/paragraph separator
# (category Z). RE2 syntax (used by `tf.strings.regex_full_match`).
BLANK_PATTERN = r"[\s\v\x{1c}-\x{1f}\x{85}\p{Z}]*"


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
    # `SearchConfig` has checked the value (True, False or "auto").
    if jit_compile == "auto":
        return bool(tf.config.list_physical_devices("GPU"))
    return bool(jit_compile)


def check_source_ids(source_ids, vocab_size):
    """Concrete source ids as an int NumPy array `(batch_size, source_length)`.

    Raises:
        TypeError: the ids are not integers.
        ValueError: another shape, or an id outside `[0, vocab_size)` (the
            message names the first one).
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


class Translator:
    """Text or ids in, translations out: the one inference path of kerasseq.

    It owns the input checks, tokenization, batching by length with row and
    column buckets, the compiled `encode` + search function and
    detokenization. `kerasseq.translate`, `Seq2SeqModel.translate` /
    `generate`, the CLI and `export_translator` all use it;
    `kerasseq.export.ServingModule(translator)` wraps its graph path
    (`translate_tensor`) in a `keras.export.ExportArchive`, so a SavedModel of a
    translator loads with TensorFlow alone.

    Args:
        model: a `Seq2SeqDecodable` (`encode`, `decode_step`), e.g. a kerasseq
            `Seq2SeqModel`; text needs `source_tokenizer`/`target_tokenizer`.
        config: a `SearchConfig` (default: `SearchConfig()`, beam 4).
        **overrides: `SearchConfig` fields replacing those of `config`.

    Attributes (set once; a plain object, TensorFlow tracks none of it):
        model, config: as given (`config.max_length` may still be `None`).
        max_length: most target tokens generated (the config's, or the
            model's `max_target_length`).
        jit_compile: bool, whether the encode + search function is XLA-compiled.
        source_tokenizer, target_tokenizer: the model's, or `None` (ids only).
        start_id, end_id: the model's, or the reserved ids.
        banned_ids: the ids no search of this translator generates
            (`kerasseq.decoding._common.never_generated`): `[PAD]` (0) and
            `start_id`, plus the target tokenizer's `unk_id` (else 1) with
            `config.ban_unk`.
        source_limit: source tokens kept per text, or `None` for all: the one
            rule, read by the eager path (`translate`, `generate`) and the
            graph path (an export) alike. The smaller of
            `config.max_source_length` and the source tokenizer's
            `max_length`. Past it nothing is cut: a Transformer refuses a
            source longer than its position table (`trim_source_ids`),
            eagerly and in a graph. `export_translator` states its own
            default (`kerasseq.export.EXPORT_MAX_SOURCE_LENGTH`) in the config
            it exports.
        trace_count: times the compiled encode + search function was traced.

    Example:

    >>> translator = Translator(model, SearchConfig(num_beams=4))   # doctest: +SKIP
    >>> translator.translate(["cat", "dog"])                         # doctest: +SKIP
    ['K AE T', 'D AO G']
    """

    def __init__(self, model, config=None, **overrides):
        check_model(model)
        config = SearchConfig.from_kwargs(config, **overrides)
        check_search = contract.optional(model, "check_search_config")
        if callable(check_search):
            check_search(config)
        max_length = config.max_length
        if max_length is None:
            max_length = contract.optional(model, "max_target_length")
            if not is_int(max_length) or max_length < 1:
                raise ValueError(
                    "max_length must be given in the SearchConfig: the model has no "
                    f"max_target_length. Received: max_length={config.max_length!r}"
                )
        self.model, self.config, self.max_length = model, config, int(max_length)
        # What the search runs with (checks min_length against the model's
        # max_length); `config` keeps max_length=None as given (a cache key).
        self._search_config = config.with_max_length(self.max_length)
        self.jit_compile = resolve_jit_compile(config.jit_compile)
        self.source_tokenizer = contract.optional(model, "source_tokenizer")
        self.target_tokenizer = contract.optional(model, "target_tokenizer")
        self.start_id = int(contract.optional(model, "start_id", START_ID))
        self.end_id = int(contract.optional(model, "end_id", END_ID))
        unk_id = int(getattr(self.target_tokenizer, "unk_id", UNK_ID))
        self.banned_ids = _common.never_generated(self.start_id, self.end_id,
                                                  (unk_id,) if config.ban_unk else ())
        limits = (config.max_source_length, getattr(self.source_tokenizer, "max_length", None))
        self.source_limit = min(filter(None, limits), default=None)
        self.trace_count = 0
        self._source_vocab_size = contract.optional(model, "source_vocab_size")
        self._length_multiple = int(contract.optional(model, "source_length_multiple", 8) or 1)
        self._functions = {}  # (rows, source_length) or None -> tf.function

    @property
    def compiled_shapes(self):
        """The `(rows, source_length)` bucket shapes compiled so far, sorted."""
        return sorted(shape for shape in self._functions if shape is not None)

    @functools.cached_property
    def text_tokenizers(self):
        """`(source_tokenizer, target_tokenizer)`, checked once: text needs both.

        Raises:
            ValueError: the model lacks one (token ids need neither: `generate`).
        """
        for name in ("source_tokenizer", "target_tokenizer"):
            if getattr(self, name) is None:
                raise ValueError(
                    "Translating text needs a model built with source_tokenizer and "
                    "target_tokenizer (the text is tokenized and detokenized; for token ids "
                    f"use generate(source_ids)). Received: model.{name}=None"
                )
        return self.source_tokenizer, self.target_tokenizer

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
        self.trace_count += 1
        max_length = self._bucket_max_length(source_ids.shape[1])
        state = encode_for_search(self.model, source_ids, max_length)
        rows = source_ids.shape[0] if source_ids.shape[0] is not None else tf.shape(source_ids)[0]
        start_tokens = tf.fill([rows], tf.constant(self.start_id, tf.int32))
        outputs = self._search(start_tokens, state, seed, max_length)
        if max_length < self.max_length:  # every caller sees max_length columns
            width = self.max_length - max_length
            outputs = (tf.pad(outputs[0], [[0, 0], [0, 0], [0, width]]),) + tuple(outputs[1:])
        return outputs

    def _bucket_max_length(self, source_length):
        """Most tokens generated for sources padded to `source_length` (a Python
        int, or `None` in the graph path: then `max_length`)."""
        config, max_length = self.config, self.max_length
        if not config.max_length_a or source_length is None:
            return max_length
        limit = int(np.ceil(config.max_length_a * source_length + config.max_length_b))
        return max(min(max_length, limit), config.min_length, 1)

    def _search(self, start_tokens, state, seed, max_length):
        """The configured search loop over `state`; ids with a `num_return` axis."""
        config = self._search_config
        if max_length != config.max_length:  # a batch's own limit (max_length_a)
            config = config.with_max_length(max_length)
        step_fn, end_id, banned = self.model.decode_step, self.end_id, self.banned_ids
        if config.method == "beam":
            shared = tuple(contract.optional(self.model, "shared_state_keys", ()))
            return beam_search_loop(step_fn, start_tokens, state, config, end_id, shared, banned)
            # (rows, num_return, max_length), (rows, num_return) x 3
        if config.method == "greedy":
            token_ids, scores, lengths = greedy_loop(step_fn, start_tokens, state, config, end_id,
                                                     banned)
        else:
            token_ids, scores, lengths = sample_loop(step_fn, start_tokens, state, config,
                                                     end_id, seed, banned)
        # (rows, max_length), (rows,), (rows,) -> one hypothesis per row
        return token_ids[:, None, :], scores[:, None], lengths[:, None], scores[:, None]

    def _compiled(self, shape):
        """The `tf.function` of `_search_ids` for one bucket shape.

        One function per `(rows, source_length)` bucket, each traced once, and
        one with an unknown shape, `None`, for the graph path of exports.
        TensorFlow counts the traces of a plain function per code object and
        would report the buckets as "frequent retracing"; a `functools.partial`
        is counted as a function of its own.
        """
        function = self._functions.get(shape)
        if function is None:
            signature = None
            if shape is None:
                signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)]
            function = tf.function(functools.partial(self._search_ids),
                                   jit_compile=self.jit_compile, input_signature=signature,
                                   autograph=False)
            self._functions[shape] = function
        return function

    def _pad_to_bucket(self, source_ids):
        """Pad int32 ids `(rows, length)` to their bucket shape: the one bucketing step.

        Columns go to the smallest source-length bucket (`source_bucket_edges`,
        at least one multiple), rows to the smallest row bucket of
        `batch_buckets` (extra rows repeat row 0, see `pad_rows`). TensorFlow
        ops: eagerly (`generate`, `translate`) the padded shape is concrete
        and picks a compiled function; inside an export's graph it is known
        only at run time.
        """
        rows, length = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        up_to = source_ids.shape[1]
        if up_to is None:  # a graph: lay out buckets up to the longest source it keeps
            up_to = self.source_limit or contract.optional(self.model, "max_positions")
            up_to = up_to if is_int(up_to) else GRAPH_BUCKET_LIMIT
        edges = source_bucket_edges(self._length_multiple, self.config.source_buckets,
                                    up_to=max(up_to, 1))
        columns = smallest_edge(edges, tf.maximum(length, 1))
        source_ids = tf.pad(source_ids, [[0, 0], [0, columns - length]])  # (rows, columns)
        if self.config.batch_buckets is not None:
            source_ids = pad_rows(source_ids, smallest_edge(row_edges(self.config.batch_buckets),
                                                            rows))  # (padded_rows, columns)
        return source_ids

    def _search_bucketed(self, source_ids):
        """Pad to a bucket, run the compiled encode + search, drop the padding rows.

        Used eagerly and inside the exported function alike: a concrete
        bucket shape gets its own compiled function, an unknown one (a
        graph) the function of shape `None`. The sampling seed follows the
        one rule (`decoding.sampling.sampling_seed`).

        Returns:
            `(token_ids, scores, lengths, log_probs)` with the rows of
            `source_ids`: int32 `(rows, num_return, max_length)`, float32
            `(rows, num_return)`, int32 and float32 `(rows, num_return)`.
        """
        source_ids = tf.cast(source_ids, tf.int32)
        rows = tf.shape(source_ids)[0]
        padded = self._pad_to_bucket(source_ids)
        shape = tuple(padded.shape) if padded.shape.is_fully_defined() else None
        seed = sampling_seed(self.config.seed, self.config.method)
        return tuple(output[:rows] for output in self._compiled(shape)(padded, seed))

    # ------------------------------------------------------------ eager
    def _prepare_ids(self, array):
        """Valid ids (checked by `generate`, or from the tokenizer) → int32 ids
        cut to `source_limit` and to what the model reads."""
        if self.source_limit is not None:
            array = array[:, :self.source_limit]
        trim = contract.optional(self.model, "trim_source_ids")
        if callable(trim):
            array = np.asarray(trim(array))
        return array.astype(np.int32)

    def _run_batch(self, source_ids):
        """Decode one batch of prepared ids eagerly: NumPy `(token_ids, scores,
        lengths, log_probs)`, as `_search_bucketed`."""
        return tuple(np.asarray(output) for output in self._search_bucketed(source_ids))

    def generate(self, source_ids):
        """Decode source ids in batches of `batch_size`.

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding (NumPy,
                nested list, `tf.Tensor` or `tf.RaggedTensor`).

        Returns:
            NumPy arrays `(token_ids, scores, lengths)`: `(n, num_return,
            max_length)`, `(n, num_return)`, `(n, num_return)` for every
            method (`num_return` is 1 for greedy search and sampling), plus
            `log_probs` when `return_log_probs=True` (beam search).

        Raises:
            TypeError, ValueError: bad ids (`check_source_ids`), or no rows.
        """
        array = check_source_ids(source_ids, self._source_vocab_size)
        if array.shape[0] == 0:
            raise ValueError("source_ids holds no rows: there is nothing to translate.")
        size = self.config.batch_size
        parts = [self._run_batch(self._prepare_ids(array[start:start + size]))
                 for start in range(0, array.shape[0], size)]
        outputs = tuple(np.concatenate(part, axis=0) for part in zip(*parts, strict=True))
        log_probs = self.config.method == "beam" and self.config.return_log_probs
        return outputs if log_probs else outputs[:3]

    def translate(self, texts, *, return_scores=False, verbose=0, return_alignments=False,
                  alignment_layer=None, alignment_head=None):
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
                (default: the model's, `kerasseq.alignment.default_alignment_head`:
                the guided head of a model trained with guided alignment, else
                the mean over every layer and head).

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
        source_tokenizer, target_tokenizer = self.text_tokenizers
        if return_alignments:  # fail before the search, not after it
            check_alignable(self.model)
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{index}] must be a str. Received: {type(text).__name__}")
        source = source_tokenizer.encode(texts) if texts else None
        lengths = source.row_lengths().numpy() if texts else np.zeros([0], np.int64)
        # Per text, its hypotheses' (texts, scores, links). One rule for blank
        # texts everywhere (API, CLI, exports): what `str.strip()` removes (the
        # characters of `BLANK_PATTERN`) or no token gives "", 0.0 and no link.
        returns = self.config.num_return
        results = [([""] * returns, [0.0] * returns, [[] for _ in range(returns)])
                   for _ in texts]
        order = [row for row in np.argsort(lengths, kind="stable")
                 if lengths[row] and texts[row].strip()]
        progress = keras.utils.Progbar(len(texts), verbose=verbose)  # verbose=0: silent
        if len(order) < len(texts):
            progress.add(len(texts) - len(order))  # the blank texts
        for start in range(0, len(order), self.config.batch_size):
            rows = order[start:start + self.config.batch_size]
            ids = self._prepare_ids(tf.gather(source, rows).to_tensor(default_value=PAD_ID).numpy())
            token_ids, scores, found = self._run_batch(ids)[:3]
            # (rows, num_return, max_length), (rows, num_return) x 2; flat lists, row by row:
            strings = target_tokenizer.decode_to_strings(token_ids.reshape(-1, self.max_length))
            links = (self._align(ids, token_ids, found, alignment_layer, alignment_head)
                     if return_alignments else [None] * len(strings))
            for index, row in enumerate(rows):
                hypotheses = slice(index * returns, (index + 1) * returns)
                results[row] = (strings[hypotheses], scores[index].tolist(), links[hypotheses])
            progress.add(len(rows))
        # n-best lists, or each text's one hypothesis
        columns = [0] + [1] * bool(return_scores) + [2] * bool(return_alignments)
        outputs = [[result[column] if returns > 1 else result[column][0] for result in results]
                   for column in columns]
        outputs = [output[0] for output in outputs] if single else outputs
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    __call__ = translate

    def _align(self, source_ids, token_ids, lengths, layer, head):
        """Word links of every returned hypothesis of one batch: a flat list, row by row.

        Args:
            source_ids: int32 `(rows, source_length)` as searched, 0 = padding.
            token_ids: int32 `(rows, num_return, max_length)`.
            lengths: int32 `(rows, num_return)`, tokens before the end token.
        """
        rows, returns = lengths.shape
        sources = [ids[ids != PAD_ID] for ids in source_ids for _ in range(returns)]
        targets = [token_ids[row, rank, :lengths[row, rank]]
                   for row in range(rows) for rank in range(returns)]
        size = self.config.batch_size
        return [result["links"] for start in range(0, len(sources), size)
                for result in align_ids(
                    self.model, sources[start:start + size], targets[start:start + size],
                    layer=layer, head=head, start_id=self.start_id)]

    # ------------------------------------------------------------ graph
    def translate_tensor(self, text, num_return=None):
        """Graph-mode translation of a `tf.string` batch (what exports serve).

        Blank texts (or texts without tokens) give `""` and score 0.0,
        unknown tokens become `[UNK]`, sources are cut to `source_limit`,
        invalid UTF-8 is replaced by U+FFFD, an empty batch gives empty
        outputs. A translator without a `source_limit` keeps every token, as
        the eager path does: a Transformer then fails the call on a source
        longer than its position table, so a served translator needs one
        (`kerasseq.export.make_translator` always sets it). Rows are padded to a power
        of two and columns to a multiple of 8 before the compiled search, so
        XLA compiles a bounded set of shapes.

        Args:
            text: `tf.string` `(batch_size,)`.
            num_return: int <= `config.num_return` (default: `config.num_return`).

        Returns:
            `(translations, scores)`: `tf.string` and float32
            `(batch_size, num_return)`.
        """
        token_ids, scores, _ = self._translate_tensor_ids(text, num_return)
        texts = self.text_tokenizers[1].detokenize(tf.reshape(token_ids, [-1, self.max_length]))
        # (batch_size * num_return,)
        return tf.reshape(texts, [-1, token_ids.shape[1]]), scores  # (batch_size, num_return)

    def align_tensor(self, text, alignment_layer=None, alignment_head=None):
        """Graph-mode translation with word alignments (the `translate_alignments` export).

        Args:
            text: `tf.string` `(batch_size,)`.
            alignment_layer, alignment_head: the attention that aligns, as in
                `translate` (`None`: the model's, see
                `kerasseq.alignment.default_alignment_head`).

        Returns:
            `(translations, scores, alignments)`: `tf.string`, float32 and
            `tf.string`, each `(batch_size,)`; an alignment reads
            `"0-0 2-1 ..."` (source word - target word), `""` for a blank
            text (also in a batch of blank texts only, or an empty batch).

        Raises:
            ValueError: a model without attention (`kerasseq.alignment.merge.check_alignable`).
        """
        token_ids, scores, source_ids = self._translate_tensor_ids(text, 1)
        best = token_ids[:, 0, :]  # (batch_size, max_length)

        def align():
            return alignment_strings(self.model, source_ids, best, alignment_layer,
                                     alignment_head, start_id=self.start_id)

        def nothing_to_align():  # an empty batch or only blank texts: no source column,
            return tf.fill(tf.shape(best)[:1], "")  # on which the models' passes fail

        links = tf.cond(tf.size(source_ids) > 0, align, nothing_to_align)
        return self.text_tokenizers[1].detokenize(best), scores[:, 0], links

    def _translate_tensor_ids(self, text, num_return=None):
        """The graph path up to the ids: `(token_ids, scores, source_ids)`.

        Returns:
            int32 `(batch_size, num_return, max_length)`, float32
            `(batch_size, num_return)` and the searched source ids, int32
            `(batch_size, source_length)` (all 0 for blank texts).
        """
        source_tokenizer, _ = self.text_tokenizers
        num_return = self.config.num_return if num_return is None else num_return
        max_length = self.max_length
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        batch_size = tf.shape(text)[0]
        source_ids = source_tokenizer.encode(text)[:, :self.source_limit]  # ragged (batch_size, None)
        blank = tf.strings.regex_full_match(text, BLANK_PATTERN)  # (batch_size,)
        has_tokens = tf.logical_and(tf.logical_not(blank), source_ids.row_lengths() > 0)
        rows = tf.cast(tf.where(has_tokens)[:, 0], tf.int32)  # (kept,)
        kept_ids = tf.gather(source_ids, rows).to_tensor(default_value=PAD_ID)  # (kept, length)
        trim = contract.optional(self.model, "trim_source_ids")
        if callable(trim):  # what the model reads, checked as on the eager path
            kept_ids = trim(kept_ids)

        def search():
            token_ids, scores = self._search_bucketed(kept_ids)[:2]
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


def get_translator(model, config=None, **overrides):
    """The cached `Translator` of `model` for these settings (one per config).

    Re-using the translator re-uses its compiled functions, so repeated
    `model.translate(...)` calls with the same settings trace and compile
    once per bucket shape. The cache is the model's own `translator_cache`
    (a dict; every kerasseq model has one, see
    `kerasseq.decoding.contract.OPTIONAL_ATTRIBUTES`), so it lives and dies
    with the model; it keeps the 8 configs used last. An object without one
    gets a new `Translator` on every call.
    """
    config = SearchConfig.from_kwargs(config, **overrides)
    cache = contract.optional(model, "translator_cache")
    if not isinstance(cache, dict):
        return Translator(model, config)
    translator = cache.pop(config, None)
    if translator is None:
        translator = Translator(model, config)
    cache[config] = translator  # most recently used last
    while len(cache) > 8:
        cache.pop(next(iter(cache)))
    return translator
