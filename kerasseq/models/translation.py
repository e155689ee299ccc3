"""`translate(model, texts_or_ids)`: decode strings, token ids or a whole dataset.

The high-level entry point of issue 4. It accepts the inputs a user has at
hand (a string, a list of strings, a batch of source ids, a `tf.data.Dataset`
of either, or of training tuples), cuts them into batches, runs the model's
own `Seq2SeqModel.translate` (text) or `Seq2SeqModel.generate` (ids) on each
batch and shows one Keras progress bar over the whole input. It holds no
search code of its own.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf

from kerasseq.models.base import Seq2SeqModel, check_texts

_EXPECTED = (
    "texts_or_ids must be a str, a list of str, an int array or tensor of source ids "
    "(batch_size, source_length), or a tf.data.Dataset of those (or of "
    "((source_ids, target_in_ids), target_out_ids) training tuples)"
)


def translate(model, texts_or_ids, method="beam", num_beams=4, batch_size=64, verbose="auto",
              return_scores=False, **search_kwargs):
    """Translate text or token ids with a kerasseq model; beam search by default.

    Unlike the model method `Seq2SeqModel.translate` (greedy by default,
    strings only), this function defaults to beam search with 4 beams and
    also decodes source ids and `tf.data.Dataset`s. Both call the same
    search code: per batch, this function calls `model.translate` (text) or
    `model.generate` (ids).

    Args:
        model: a kerasseq `Seq2SeqModel` (`RNNSeq2Seq`, `TransformerSeq2Seq`);
            text input needs a model built with tokenizers.
        texts_or_ids: one of
            - a `str` or a list of `str` (empty or whitespace-only strings
              raise `ValueError`);
            - int source ids `(batch_size, source_length)`, 0 = padding, as a
              NumPy array, nested list, `tf.Tensor` or `tf.RaggedTensor`
              (e.g. `model.source_tokenizer.encode(words)`);
            - a `tf.data.Dataset` whose elements are strings (scalars or
              batches), id batches `(batch_size, source_length)` (or single
              sequences `(source_length,)`), or tuples such as the training
              elements `((source_ids, target_in_ids), target_out_ids)`: the
              first component (recursively) is the source. It must be finite.
              Id elements are decoded one element at a time (split to
              `batch_size` rows), so batch a dataset of single sequences.
        method: "beam" (default), "greedy" or "sample".
        num_beams: int, beams for `method="beam"`; ignored by the other methods.
        batch_size: int >= 1, rows decoded at once (a dataset batch larger
            than this is split).
        verbose: "auto" (a progress bar for datasets only), 0/False (none),
            1/True (a progress bar over all rows) or 2 (one line at the end).
        return_scores: text input only: also return the search scores. Id
            input always returns them.
        **search_kwargs: passed on to the search, e.g. `max_length`,
            `length_penalty`, `coverage_penalty`, `num_return`,
            `return_log_probs` (ids), `temperature`/`top_k`/`seed` (sample).

    Returns:
        Text input: like `Seq2SeqModel.translate`: a string for a single
        string, else a list of strings (of n-best lists with `num_return > 1`);
        with `return_scores=True` a `(translations, scores)` pair.
        Id input: the tuple of `Seq2SeqModel.generate` as NumPy arrays,
        concatenated over batches: `(token_ids, scores, lengths)` with
        `token_ids` `(batch_size, max_length)` (greedy/sample) or
        `(batch_size, num_return, max_length)` (beam).

    Raises:
        TypeError: `model` is not a kerasseq model, or `texts_or_ids` has
            none of the types above (the message names what was received).
        ValueError: bad search arguments (from the model), an infinite
            dataset, or empty/whitespace-only strings.

    Example:

    >>> kerasseq.translate(model, ["cat", "dog"])  # doctest: +SKIP
    ['K AE T', 'D AO G']
    >>> ids, scores, lengths = kerasseq.translate(model, source_ids, num_beams=8)  # doctest: +SKIP
    """
    if not isinstance(model, Seq2SeqModel):
        raise TypeError(
            "model must be a kerasseq Seq2SeqModel (e.g. from build_rnn_seq2seq or "
            f"build_transformer_seq2seq). Received: model of type {type(model).__name__}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1. Received: batch_size={batch_size!r}")
    if not (verbose == "auto" or verbose in (0, 1, 2)):
        raise ValueError(f"verbose must be 'auto', 0, 1 or 2. Received: verbose={verbose!r}")
    if verbose == "auto":
        verbose = 1 if isinstance(texts_or_ids, tf.data.Dataset) else 0
    kind, items, single = _collect_inputs(texts_or_ids)
    if method == "beam":
        search_kwargs["num_beams"] = num_beams
    total = len(items) if kind == "text" else sum(len(array) for array in items)
    progress = keras.utils.Progbar(total, verbose=int(verbose)) if verbose else None
    if kind == "text":
        return _translate_texts(model, items, single, method, batch_size, return_scores,
                                progress, search_kwargs)
    return _generate_ids(model, items, method, batch_size, progress, search_kwargs)


def _translate_texts(model, texts, single, method, batch_size, return_scores, progress, search_kwargs):
    """`model.translate` batch by batch, one progress bar over all texts."""
    check_texts(texts)  # before batching, so errors name the index in the whole input
    translations, scores = [], []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        chunk_translations, chunk_scores = model.translate(
            chunk, method=method, batch_size=batch_size, return_scores=True, **search_kwargs
        )
        translations.extend(chunk_translations)
        scores.extend(chunk_scores)
        if progress is not None:
            progress.add(len(chunk))
    if single:
        translations, scores = translations[0], scores[0]
    return (translations, scores) if return_scores else translations


def _generate_ids(model, arrays, method, batch_size, progress, search_kwargs):
    """`model.generate` batch by batch; outputs concatenated along the batch axis."""
    if not arrays:
        raise ValueError("texts_or_ids holds no source ids: there is nothing to translate.")
    outputs = []
    for array in arrays:
        for start in range(0, len(array), batch_size):
            chunk = array[start:start + batch_size]  # (rows <= batch_size, source_length)
            outputs.append([np.asarray(x) for x in model.generate(chunk, method=method, **search_kwargs)])
            if progress is not None:
                progress.add(len(chunk))
    return tuple(np.concatenate(parts, axis=0) for parts in zip(*outputs, strict=True))


# --------------------------------------------------------------------------
# Input normalisation.
# --------------------------------------------------------------------------


def _collect_inputs(texts_or_ids):
    """Normalise the input to `("text", [str, ...], single)` or
    `("ids", [int array (rows, source_length), ...], False)`."""
    if isinstance(texts_or_ids, str):
        return "text", [texts_or_ids], True
    if isinstance(texts_or_ids, tf.data.Dataset):
        return _collect_dataset(texts_or_ids)
    if isinstance(texts_or_ids, tf.RaggedTensor):
        texts_or_ids = texts_or_ids.to_tensor()
    if isinstance(texts_or_ids, (list, tuple)):
        if not texts_or_ids:
            return "text", [], False
        if any(isinstance(item, str) for item in texts_or_ids):
            return "text", list(texts_or_ids), False  # check_texts names non-str items
    if isinstance(texts_or_ids, (list, tuple, np.ndarray)) or tf.is_tensor(texts_or_ids):
        try:
            array = np.asarray(texts_or_ids)
        except ValueError as error:  # ragged nested lists
            raise TypeError(f"{_EXPECTED}. Received: {error}") from None
        kind, items = _classify(array, "texts_or_ids")
        return kind, items, False
    raise TypeError(f"{_EXPECTED}. Received: texts_or_ids of type {type(texts_or_ids).__name__}")


def _collect_dataset(dataset):
    """Read a finite dataset: the source part of every element."""
    if int(dataset.cardinality()) == int(tf.data.INFINITE_CARDINALITY):
        raise ValueError(
            "texts_or_ids is an infinite tf.data.Dataset (e.g. after .repeat()); "
            "translate needs a finite one, e.g. dataset.take(n)."
        )
    kind, items = "text", []
    for index, element in enumerate(dataset.as_numpy_iterator()):
        while isinstance(element, (tuple, list)) and element:
            element = element[0]  # ((source, target_in), target_out) -> source
        if isinstance(element, dict):
            raise TypeError(f"{_EXPECTED}. Received: dataset element {index} is a dict")
        kind, element_items = _classify(np.asarray(element), f"dataset element {index}",
                                        allow_sequence=True)
        items.extend(element_items)  # every element has the dataset's one element_spec
    return kind, items, False


def _classify(array, where, allow_sequence=False):
    """A NumPy value → `("text", [str, ...])` or `("ids", [(rows, length) array])`.

    With `allow_sequence`, an int `(source_length,)` is one row (a dataset of
    unbatched sequences); otherwise it goes on to `generate`, whose error
    names the expected `(batch_size, source_length)`.
    """
    if array.dtype.kind in "SUO":
        values = array.reshape(-1).tolist()
        if array.ndim > 1 or not all(isinstance(v, (str, bytes)) for v in values):
            raise TypeError(f"{_EXPECTED}. Received: {where} of shape {array.shape} and dtype {array.dtype}")
        return "text", [v.decode("utf-8") if isinstance(v, bytes) else v for v in values]
    if array.dtype.kind in "iu" and array.ndim in (1, 2):
        return "ids", [array[None] if array.ndim == 1 and allow_sequence else array]
    raise TypeError(f"{_EXPECTED}. Received: {where} of shape {array.shape} and dtype {array.dtype}")
