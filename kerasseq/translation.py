"""`translate(model, texts_or_ids)`: decode strings, token ids or a whole dataset.

The high-level entry point. It accepts the inputs a user has at hand (a
string, a list of strings, a batch of source ids, a `tf.data.Dataset` of
either, or of training tuples) and hands them to the model's
`kerasseq.Translator` (the one inference path), showing one Keras progress
bar over the whole input. It holds no search code of its own.
"""

import keras
import numpy as np
import tensorflow as tf

from kerasseq.data.pipeline import without_neutral_rows
from kerasseq.translator import get_translator

_EXPECTED = (
    "texts_or_ids must be a str, a list of str, an int array or tensor of source ids "
    "(batch_size, source_length), or a tf.data.Dataset of those (or of "
    "((source_ids, target_in_ids), target_out_ids) training tuples)"
)


def translate(model, texts_or_ids, config=None, *, verbose="auto", return_scores=False,
              return_alignments=False, alignment_layer=None,
              alignment_head=None, **settings):
    """Translate text or token ids with a kerasseq model; beam search by default.

    The same search, with the same defaults (`kerasseq.SearchConfig()`: beam
    search, 4 beams), as `model.translate`, the CLI and `export_translator`:
    all of them run `kerasseq.Translator`. This function also decodes source
    ids and `tf.data.Dataset`s.

    Args:
        model: a kerasseq `Seq2SeqModel` (`RNNSeq2Seq`, `TransformerSeq2Seq`);
            text input needs a model built with tokenizers.
        texts_or_ids: one of
            - a `str` or a list of `str` (empty or whitespace-only strings
              translate to `""` with score 0.0, as everywhere in kerasseq);
            - int source ids `(batch_size, source_length)`, 0 = padding, as a
              NumPy array, nested list, `tf.Tensor` or `tf.RaggedTensor`
              (e.g. `model.source_tokenizer.encode(words)`);
            - a `tf.data.Dataset` whose elements are strings (scalars or
              batches), id batches `(batch_size, source_length)` (or single
              sequences `(source_length,)`), or tuples such as the training
              elements `((source_ids, target_in_ids), target_out_ids)`: the
              first component (recursively) is the source (the neutral rows
              that complete `make_dataset`'s short batches are left out). It
              must be finite.
              Id elements are decoded one element at a time (split to
              `batch_size` rows), so batch a dataset of single sequences.
        config: optional `kerasseq.SearchConfig`.
        verbose: "auto" (a progress bar for datasets only), 0/False (none),
            1/True (a progress bar over all rows) or 2 (one line at the end).
        return_scores: text input only: also return the search scores (id
            input always returns them).
        return_alignments, alignment_layer, alignment_head: text input only,
            as in `kerasseq.Translator.translate`.
        **settings: `SearchConfig` fields replacing those of `config`.

    Returns:
        Text input: what `kerasseq.Translator.translate` returns. Id input:
        what `kerasseq.Translator.generate` returns, concatenated over batches.

    Raises:
        TypeError: `texts_or_ids` has none of the types above (the message
            names what was received), a model without the decoding contract
            (`kerasseq.translator.check_model`) or an unknown setting.
        ValueError: a bad setting or an infinite dataset.

    Example:

    >>> kerasseq.translate(model, ["cat", "dog"])  # doctest: +SKIP
    ['K AE T', 'D AO G']
    >>> ids, scores, lengths = kerasseq.translate(model, source_ids, num_beams=8)  # doctest: +SKIP
    """
    if not (verbose == "auto" or verbose in (0, 1, 2)):
        raise ValueError(f"verbose must be 'auto', 0, 1 or 2. Received: verbose={verbose!r}")
    # The model's cached Translator; a new one checks the model (the decoding
    # contract) and every setting.
    translator = get_translator(model, config, **settings)
    if verbose == "auto":
        verbose = 1 if isinstance(texts_or_ids, tf.data.Dataset) else 0
    kind, items, single = _collect_inputs(texts_or_ids)
    if kind == "text":
        if single:
            items = items[0]
        return translator.translate(items, return_scores=return_scores, verbose=int(verbose),
                                    return_alignments=return_alignments,
                                    alignment_layer=alignment_layer,
                                    alignment_head=alignment_head)
    if return_alignments:
        raise ValueError("return_alignments needs text input (the words are the tokenizers'); "
                         "for source ids, align with kerasseq.alignment.align_ids.")
    if not items:
        raise ValueError("texts_or_ids holds no source ids: there is nothing to translate.")
    progress = keras.utils.Progbar(sum(len(a) for a in items), verbose=int(verbose)) if verbose else None
    outputs = []
    for array in items:
        outputs.append(translator.generate(array))
        if progress is not None:
            progress.add(len(array))
    return tuple(np.concatenate(parts, axis=0) for parts in zip(*outputs, strict=True))


# --------------------------------------------------------------------------
# Input normalisation.
# --------------------------------------------------------------------------


def as_texts(texts):
    """The texts of `model.translate`'s input: a `str` or a list.

    A `str` or a list of `str` is returned as it is; anything else goes
    through the conversion of `translate` (a `tf.string` tensor or NumPy
    array of strings, a `tf.data.Dataset` of strings, bytes), so
    `model.translate` accepts the text that `kerasseq.translate` accepts.
    Bytes are decoded as UTF-8 with invalid bytes replaced by U+FFFD, the
    rule of exports and of the command line.

    Raises:
        TypeError: source ids (`model.generate` or `kerasseq.translate`
            decode those) or none of the types above.
    """
    if isinstance(texts, str) or (isinstance(texts, (list, tuple))
                                  and all(isinstance(text, str) for text in texts)):
        return texts
    kind, items, single = _collect_inputs(texts)
    if kind != "text":
        raise TypeError("texts must be text: a str, a list of str, a tf.string tensor or a "
                        "tf.data.Dataset of strings. Received: source ids; decode ids with "
                        "model.generate(source_ids) or kerasseq.translate(model, source_ids)")
    return items[0] if single else items


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
            return "text", list(texts_or_ids), False  # translate names non-str items
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
        element = without_neutral_rows(element)
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
        # Invalid UTF-8 becomes U+FFFD, as in exports and on the command line.
        return "text", [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                        for v in values]
    if array.dtype.kind in "iu" and array.ndim in (1, 2):
        return "ids", [array[None] if array.ndim == 1 and allow_sequence else array]
    raise TypeError(f"{_EXPECTED}. Received: {where} of shape {array.shape} and dtype {array.dtype}")
