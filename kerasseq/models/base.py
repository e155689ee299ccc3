"""What every kerasseq model shares: the decoding contract and `translate`.

A kerasseq model is a functional `keras.Model` `(source_ids, target_in_ids) →
logits` trained with teacher forcing. Besides that training graph it exposes
the inference contract of DESIGN §3, built from the same layers and weights:

* `encode(source_ids) -> state`: a flat dict of tensors, batch axis first;
* `decode_step(token_ids, state, step) -> (logits, state)`: one position.

`kerasseq.decoding` drives any model through these two methods only.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kerasseq import decoding

METHODS = ("greedy", "beam", "sample")


def deserialize_tokenizer(tokenizer):
    if isinstance(tokenizer, dict):
        return keras.saving.deserialize_keras_object(tokenizer)
    return tokenizer


def serialize_tokenizer(tokenizer):
    return None if tokenizer is None else keras.saving.serialize_keras_object(tokenizer)


def resolve_vocab_sizes(source_vocab_size, target_vocab_size, source_tokenizer, target_tokenizer):
    """Vocabulary sizes given directly or taken from the tokenizers, validated.

    Returns:
        `(source_vocab_size, target_vocab_size)`, ints >= 5 (4 reserved ids and
        at least one token).
    """
    sizes = {}
    for side, size, tokenizer in (("source", source_vocab_size, source_tokenizer),
                                  ("target", target_vocab_size, target_tokenizer)):
        name = f"{side}_vocab_size"
        if size is None:
            if tokenizer is None:
                raise ValueError(f"Pass {name} or {side}_tokenizer.")
            size = tokenizer.vocabulary_size
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 5:
            raise ValueError(
                f"{name} must be an int >= 5 (4 reserved ids + at least one token). "
                f"Received: {name}={size!r}"
            )
        sizes[side] = int(size)
    return sizes["source"], sizes["target"]


def check_shared_vocabulary(share_embeddings, source_vocab_size, target_vocab_size):
    if share_embeddings and source_vocab_size != target_vocab_size:
        raise ValueError(
            "share_embeddings=True needs one vocabulary for source and target. "
            f"Received: source_vocab_size={source_vocab_size}, "
            f"target_vocab_size={target_vocab_size}"
        )


def check_texts(texts):
    """Validate translation inputs: every item a non-blank `str`.

    Args:
        texts: a list of items to translate.

    Raises:
        TypeError: an item is not a `str` (named by its index).
        ValueError: an item is empty or whitespace only.
    """
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] must be a str. Received: {type(text).__name__}")
        if not text.strip():
            raise ValueError(
                f"texts[{index}] is empty or whitespace only: there is nothing to "
                f"translate. Received: texts[{index}]={text!r}"
            )


def check_source_ids(source_ids, vocab_size):
    """Validate concrete source ids: integers, rank 2, each in `[0, vocab_size)`.

    Only concrete values (NumPy arrays, lists, eager tensors) are checked;
    symbolic tensors inside a `tf.function` are returned unchanged (an
    out-of-range id there fails inside TensorFlow's embedding gather).

    Args:
        source_ids: int `(batch_size, source_length)`, 0 = padding.
        vocab_size: int, the model's `source_vocab_size`.

    Returns:
        `source_ids`, as a NumPy array when it was concrete.

    Raises:
        TypeError: the ids are not integers.
        ValueError: the shape is not `(batch_size, source_length)`, or an id is
            negative or `>= vocab_size` (the message names the first one).
    """
    if tf.is_tensor(source_ids) and not tf.executing_eagerly():
        return source_ids
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
    bad = (array < 0) | (array >= vocab_size)  # (batch_size, source_length)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"source_ids must hold ids in the range [0, {vocab_size - 1}] (0 = padding; "
            f"source_vocab_size={vocab_size}). Received: source_ids[{row}, {column}]="
            f"{int(array[row, column])}"
        )
    return array


def pad_to_multiple(source_ids, multiple):
    """Right-pad `(batch_size, source_length)` ids with 0 to a multiple of `multiple`.

    Padding changes no result (masks), and a few distinct lengths mean a few
    traced decoding functions instead of one per source length.
    """
    length = int(source_ids.shape[1])
    padded = max(multiple, -(-length // multiple) * multiple)
    return ops.pad(source_ids, [[0, 0], [0, padded - length]]) if padded != length else source_ids


class Seq2SeqModel(keras.Model):
    """Base class of kerasseq's functional encoder–decoder models.

    Subclasses build their layers and the functional training graph, call
    `super().__init__(inputs=..., outputs=...)` and implement `encode` and
    `decode_step`. The optional `source_tokenizer` / `target_tokenizer`
    (`kerasseq.data.TextTokenizer`) are saved in the model's config, so a
    `.keras` file is all that is needed to translate text.
    """

    source_length_multiple = 8

    # ----------------------------------------------------------- tokenizers
    # The tokenizers are data, not part of the compute graph: they are kept
    # out of Keras' layer tracking (a tracked `StringLookup` has
    # `supports_jit=False`, which would make Keras refuse XLA for the whole
    # model, `jit_compile="auto"` on a GPU included). They are saved through
    # `get_config`, and `kerasseq.export` tracks their lookup tables itself.
    _UNTRACKED = ("source_tokenizer", "target_tokenizer")

    def __setattr__(self, name, value):
        if name in self._UNTRACKED:
            object.__setattr__(self, "_untracked_" + name, value)
            return
        super().__setattr__(name, value)

    @property
    def source_tokenizer(self):
        """The `TextTokenizer` of the source side, or `None` (ids only)."""
        return self.__dict__.get("_untracked_source_tokenizer")

    @property
    def target_tokenizer(self):
        """The `TextTokenizer` of the target side, or `None` (ids only)."""
        return self.__dict__.get("_untracked_target_tokenizer")

    # ------------------------------------------------------------ contract
    def encode(self, source_ids):
        raise NotImplementedError

    def decode_step(self, token_ids, state, step):
        raise NotImplementedError

    # ----------------------------------------------------------- tokenizers
    def _check_tokenizers(self):
        if self.source_tokenizer is None or self.target_tokenizer is None:
            raise ValueError(
                "translate() needs a model built with source_tokenizer and "
                "target_tokenizer; for token ids use generate(source_ids)."
            )

    @property
    def start_id(self):
        return self.target_tokenizer.start_id if self.target_tokenizer is not None else 2

    @property
    def end_id(self):
        return self.target_tokenizer.end_id if self.target_tokenizer is not None else 3

    # ------------------------------------------------------------ decoding
    def _trim_source_ids(self, source_ids):
        """Hook for models with a maximum source length (identity here)."""
        return source_ids

    def _encode_function(self):
        if getattr(self, "_compiled_encode", None) is None:
            self._compiled_encode = tf.function(self.encode, reduce_retracing=True)
        return self._compiled_encode

    def generate(self, source_ids, method="greedy", max_length=None, **search_kwargs):
        """Decode token ids with greedy search, beam search or sampling.

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding.
            method: "greedy", "beam" or "sample".
            max_length: int, most target tokens to generate (default: the
                model's `max_target_length`).
            **search_kwargs: passed to `kerasseq.decoding.greedy`,
                `beam_search` (`num_beams`, `length_penalty`, ...) or `sample`.

        Returns:
            `(token_ids, scores, lengths)` as returned by the search function:
            `(batch_size, max_length)` (greedy/sample) or
            `(batch_size, num_return, max_length)` (beam).

        Raises:
            TypeError: `source_ids` are not integers.
            ValueError: `method` or `max_length` is invalid, `source_ids` is
                not `(batch_size, source_length)`, or (for NumPy arrays, lists
                and eager tensors) an id is negative or `>= source_vocab_size`.
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}. Received: method={method!r}")
        max_length = self.max_target_length if max_length is None else max_length
        if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 1:
            raise ValueError(f"max_length must be a positive integer. Received: max_length={max_length!r}")
        source_ids = check_source_ids(source_ids, self.source_vocab_size)
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        if len(source_ids.shape) != 2:
            raise ValueError(
                "source_ids must have shape (batch_size, source_length). "
                f"Received shape: {tuple(source_ids.shape)}"
            )
        source_ids = self._trim_source_ids(source_ids)
        source_ids = pad_to_multiple(source_ids, self.source_length_multiple)
        state = self._encode_function()(source_ids)
        search_kwargs.setdefault("batch_buckets", "pow2")
        search = {"greedy": decoding.greedy, "beam": decoding.beam_search, "sample": decoding.sample}
        return search[method](
            self.decode_step,
            state,
            batch_size=int(source_ids.shape[0]),
            start_id=self.start_id,
            end_id=self.end_id,
            max_length=int(max_length),
            **search_kwargs,
        )

    def translate(self, texts, method="greedy", max_length=None, batch_size=64,
                  return_scores=False, verbose=0, **search_kwargs):
        """Translate strings end to end: tokenize, encode, search, detokenize.

        This method defaults to greedy search. The module-level
        `kerasseq.translate(model, texts_or_ids)` defaults to beam search
        (`num_beams=4`), also takes token ids and `tf.data.Dataset`s, and
        shows a progress bar for datasets; both run the same search code.

        Long sources. If the source tokenizer has a `max_length`, every
        source is cut to its first `max_length` tokens before the model sees
        it (for every model). Beyond that:

        - `RNNSeq2Seq` has no maximum source length: the LSTM encoder reads
          every token, so with `max_length=None` on the tokenizer a source of
          any length is translated (time and memory grow linearly with it;
          quality drops on sources much longer than the training ones).
        - `TransformerSeq2Seq` raises a `ValueError` naming its `max_length`
          when a source has more tokens than its position table.

        Args:
            texts: a string or a list of strings. Empty or whitespace-only
                strings raise ValueError (there is nothing to translate).
                Unknown characters/words map to `[UNK]`.
            method: "greedy", "beam" or "sample".
            max_length: most target tokens per translation.
            batch_size: sentences decoded at once.
            return_scores: also return the search scores.
            verbose: 1 shows a Keras progress bar over batches.
            **search_kwargs: e.g. `num_beams`, `length_penalty`, `num_return`.

        Returns:
            A list of strings (a string for a single string input); with
            `num_return > 1` (beam) a list of n-best lists. With
            `return_scores=True`, a `(translations, scores)` pair.
        """
        self._check_tokenizers()
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        check_texts(texts)
        translations, scores = [], []
        progress = keras.utils.Progbar(len(texts), verbose=verbose) if verbose else None
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            source_ids = self.source_tokenizer.encode(chunk).to_tensor(default_value=0)
            token_ids, chunk_scores = self.generate(
                source_ids, method=method, max_length=max_length, **search_kwargs
            )[:2]
            translations.extend(self._detokenize(token_ids))
            scores.extend(np.asarray(chunk_scores).tolist())
            if progress is not None:
                progress.add(len(chunk))
        if single:
            translations, scores = translations[0], scores[0]
        return (translations, scores) if return_scores else translations

    def _detokenize(self, token_ids):
        token_ids = np.asarray(token_ids)
        if token_ids.ndim == 3:  # (batch_size, num_return, length): n-best lists
            batch, num_return, length = token_ids.shape
            flat = self.target_tokenizer.decode_to_strings(token_ids.reshape(-1, length))
            nbest = [flat[i * num_return:(i + 1) * num_return] for i in range(batch)]
            return [items[0] for items in nbest] if num_return == 1 else nbest
        return self.target_tokenizer.decode_to_strings(token_ids)
