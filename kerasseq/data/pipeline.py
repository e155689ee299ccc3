"""`tf.data` pipelines that turn text pairs into teacher-forcing batches.

For a target token sequence `y = (y_1, ..., y_n)` the decoder reads
`[START] y_1 ... y_n` and is trained to predict `y_1 ... y_n [END]`: at every
position `t` the input is the true previous token (teacher forcing, Williams &
Zipser 1989; used by Sutskever et al. 2014 and every seq2seq model since).
Both sequences have length `n + 1`, so one padding mask serves both.
"""

import collections

import numpy as np
import tensorflow as tf

from kerasseq._buckets import pad_rows, smallest_edge, training_length_edges
from kerasseq._validation import check_int, check_positive_int
from kerasseq.data.tokenizer import END_ID, PAD_ID, START_ID

# tf.data runs a map's function through AutoGraph unless told not to; these
# functions have no Python control flow on tensors. Skipping the conversion
# (done once per function and process) made a process's first `make_dataset`
# 1.2 -> 0.5 CPU-s (docs/design.md).
_unconverted = tf.autograph.experimental.do_not_convert

_ENCODE_CHUNK = 1024  # texts tokenized per vectorized lookup


def _check_batch_size(batch_size):
    check_positive_int("batch_size", batch_size)


def _check_pairs(pairs):
    pairs = list(pairs)
    if not pairs:
        raise ValueError("`pairs` must contain at least one (source_text, target_text) pair.")
    for index, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                and all(isinstance(text, str) for text in pair)):
            raise ValueError("`pairs` must be a list of (source_text, target_text) str pairs. "
                             f"Received at index {index}: {pair!r:.200}")
    return pairs


def _teacher_forcing(source_ids, target_ids):
    """`((source, [START] + y), y + [END])` for one example of 1-D int32 ids."""
    start = tf.constant([START_ID], tf.int32)
    end = tf.constant([END_ID], tf.int32)
    target_in = tf.concat([start, target_ids], axis=0)  # (target_length + 1,)
    target_out = tf.concat([target_ids, end], axis=0)  # (target_length + 1,)
    return (source_ids, target_in), target_out


def split_inputs(inputs):
    """`(source_ids, target_in_ids, alignment_links or None)` of a batch's inputs.

    The inputs are `(source_ids, target_in_ids)`, or for guided alignment
    the dict that `join_inputs` makes (`make_dataset(..., alignments=...)`).
    """
    if isinstance(inputs, dict):
        return inputs["source_ids"], inputs["target_in_ids"], inputs["alignment_links"]
    source_ids, target_in = inputs
    return source_ids, target_in, None


def join_inputs(source_ids, target_in_ids, alignment_links=None):
    """The inputs of a batch: a pair, or with links the guided dict (`split_inputs`' inverse)."""
    if alignment_links is None:
        return source_ids, target_in_ids
    return {"source_ids": source_ids, "target_in_ids": target_in_ids,
            "alignment_links": alignment_links}


def pad_batch(inputs, target_out, rows, length=None):
    """A teacher-forcing batch padded to `rows` rows and, optionally, `length` columns.

    The extra rows are *neutral*: their source and target input repeat row 0
    (`kerasseq._buckets.pad_rows`, the one rule for rows added to a batch,
    which the `Translator` follows too), their target output is all `PAD_ID`
    and they have no alignment link. A neutral row has no real target token,
    so it adds nothing to `MaskedSparseCategoricalCrossentropy` (its gradient
    is exactly zero), to `MaskedTokenAccuracy` or to the guided alignment
    loss; its inputs are a real example's, so attention stays well defined.
    Extra columns are `PAD_ID`, which every kerasseq model masks. So the
    batch's loss and gradients are those of its real rows, whatever the
    padding; `without_neutral_rows` takes the neutral rows out again.

    Args:
        inputs: a batch's inputs, as `make_dataset` gives them
            (`(source_ids, target_in_ids)` or the guided dict), with at
            least one row.
        target_out: int32 `(batch_size, target_length)`.
        rows: int or int32 scalar tensor, >= `batch_size`.
        length: optional int or int32 scalar tensor, >= every column count
            of the batch: source and target are both padded to it (and the
            links to `(length, length)`).

    Returns:
        `(inputs, target_out)` of the padded batch, structured as given.
    """
    source_ids, target_in, links = split_inputs(inputs)
    count = rows - tf.shape(target_out)[0]
    checks = [tf.debugging.assert_non_negative(
        count, message="pad_batch: rows must be >= the batch's row count")]
    if length is not None:
        longest = tf.reduce_max([tf.shape(source_ids)[1], tf.shape(target_in)[1]])
        checks.append(tf.debugging.assert_greater_equal(
            length, longest, message="pad_batch: length must be >= the batch's column counts"))
    with tf.control_dependencies(checks):
        count, rows = tf.identity(count), tf.identity(rows)

    def columns(ids):
        if length is None:
            return ids
        return tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]], constant_values=PAD_ID)

    def no_label(tensor):  # (rows, ...): zeros appended, PAD_ID / no link
        zeros = tf.zeros(tf.concat([[count], tf.shape(tensor)[1:]], 0), tensor.dtype)
        return tf.concat([tensor, zeros], axis=0)

    if links is not None:  # (batch_size, target_length, source_length)
        if length is not None:
            links = tf.pad(links, [[0, 0], [0, length - tf.shape(links)[1]],
                                   [0, length - tf.shape(links)[2]]])
        links = no_label(links)
    return (join_inputs(pad_rows(columns(source_ids), rows), pad_rows(columns(target_in), rows),
                        links),
            no_label(columns(target_out)))


def without_neutral_rows(batch):
    """A teacher-forcing batch `((source, target_in), target_out)` of NumPy
    arrays less its neutral rows (`pad_batch`: labels all `PAD_ID`, which no
    real example has, for its labels end with `[END]`); anything else as it is."""
    if not (isinstance(batch, tuple) and len(batch) == 2
            and isinstance(batch[0], tuple) and len(batch[0]) == 2):
        return batch
    (source, target_in), target_out = batch
    if not (np.ndim(source) == np.ndim(target_out) == 2 and len(source) == len(target_out)
            and np.asarray(target_out).dtype.kind in "iu"):
        return batch
    real = np.any(np.asarray(target_out) != PAD_ID, axis=1)  # (batch_size,)
    return (source[real], target_in[real]), target_out[real]


def _example_length(inputs, target_out):
    source_ids, target_in, _ = split_inputs(inputs)
    return tf.maximum(tf.shape(source_ids)[0], tf.shape(target_in)[0])


def _check_alignments(alignments, num_pairs, source_lengths, target_lengths):
    """Links as one int32 `(n, 2)` array per pair, every index inside its pair's pieces."""
    alignments = list(alignments)
    if len(alignments) != num_pairs:
        raise ValueError(f"alignments must hold one entry per pair: {num_pairs} pairs, "
                         f"{len(alignments)} alignments.")
    checked = []
    for index, links in enumerate(alignments):
        links = np.asarray(links if len(links) else np.zeros([0, 2]))
        if links.ndim != 2 or links.shape[1] != 2 or not np.issubdtype(links.dtype, np.integer):
            raise ValueError(
                f"alignments[{index}] must be (target_piece, source_piece) int pairs, shape "
                f"(n, 2). Received shape {links.shape} of {links.dtype}.")
        bad = ((links[:, 0] < 0) | (links[:, 0] >= target_lengths[index])
               | (links[:, 1] < 0) | (links[:, 1] >= source_lengths[index]))
        if bad.any():
            raise ValueError(
                f"alignments[{index}] links target piece {int(links[bad][0, 0])} to source piece "
                f"{int(links[bad][0, 1])}, outside the pair's {int(target_lengths[index])} "
                f"target and {int(source_lengths[index])} source pieces (as its tokenizers "
                "encode it). Links index the pieces of the encoded texts, from 0.")
        checked.append(links.astype(np.int32))
    return checked


def _dense_links(inputs, target_out):
    """`((source, target_in, links (n, 2)), target_out)` → the dict of a guided batch element."""
    source_ids, target_in, links = inputs
    shape = tf.stack([tf.shape(target_in)[0], tf.shape(source_ids)[0]])
    dense = tf.scatter_nd(links, tf.ones([tf.shape(links)[0]], tf.int32), shape)
    # (target_length + 1, source_length): row t is the piece target_out[t]; [END]'s row is empty
    return join_inputs(source_ids, target_in, tf.minimum(dense, 1)), target_out


def _auto_bucket_boundaries(lengths):
    """Boundaries at the 10th, 20th, ..., 90th length percentiles (distinct,
    each an exclusive upper bound as `bucket_by_sequence_length` expects)."""
    percentiles = np.percentile(np.asarray(lengths), np.arange(10, 100, 10))
    return sorted({int(value) + 1 for value in percentiles})


def _encoded_lengths(tokenizer, texts):
    return np.concatenate([
        tokenizer.encode(texts[start : start + _ENCODE_CHUNK]).row_lengths().numpy()
        for start in range(0, len(texts), _ENCODE_CHUNK)])


def make_dataset(pairs, source_tokenizer, target_tokenizer, batch_size=None, shuffle=True,
                 seed=None, bucket_boundaries=None, max_source_length=None,
                 max_target_length=None, drop_remainder=False, cache=True, alignments=None,
                 fixed_shapes=True, batch_multiple=1, batch_tokens=None):
    """Build a training / evaluation dataset of teacher-forcing batches.

    Texts are tokenized with `source_tokenizer` / `target_tokenizer` (tokens
    not in a vocabulary become `UNK_ID`; each tokenizer's own `max_length`
    truncation applies), then each target `y` becomes `target_in = [START] + y`
    and `target_out = y + [END]`. Batches are padded with `PAD_ID` (0).

    Batch shapes (`fixed_shapes`): XLA compiles one program per batch shape
    (Keras' default `compile` turns XLA on for `fit` on a GPU), so by
    default every batch has `batch_size` rows (with `batch_tokens`, its
    bucket's row count; a short last batch is
    completed with neutral rows, see `pad_batch`: no loss, no gradient) and
    its source and target are padded to one common length out of a few:
    8, 12, 16, 24, 32, 48, 64, 96, ... up to the longest example
    (`bucket_boundaries="auto"` groups examples by these same lengths). An
    epoch of 10,000 CMUdict words has 3 shapes; a batch's loss is the one
    of its examples without the padding. `fixed_shapes=False` pads each
    batch only to its own longest sequence and keeps the short last batch:
    less padding, one shape per batch, which pays only where `fit` runs
    without XLA (`kerasseq train` passes `fixed_shapes=model.jit_compile`;
    `benchmarks/fit_compiles.py`).

    Batch rows (`batch_multiple`): every batch's row count is a multiple of
    `batch_multiple`, neutral rows completing it. A `tf.distribute` strategy
    splits each batch over its replicas, and Keras 3.15 fails on a first
    batch that does not split evenly
    (`kerasseq.training.distribute.pad_batches_to_multiple` explains why), so
    `TrainingRun.datasets` passes the strategy's `num_replicas_in_sync`.

    Batches by token count (`batch_tokens`): with buckets, each bucket
    gets its own row count, `batch_tokens // L` for its padded length `L`
    (the bucket's longest possible example: `boundaries[i] - 1`, the last
    bucket the longest example), at least 1 and at most `batch_size` when
    one is given. Short examples then come many to a batch and long ones
    few, so every batch holds about the same number of tokens (source or
    target, the longer, padding included) rather than the same number of
    sentences, as Vaswani et al. (2017) batched ("about 25,000 source and
    25,000 target tokens") and as fairseq's `--max-tokens` and OpenNMT's
    `batch_type: tokens` do. An epoch then has fewer, larger batches of
    short examples; each bucket is still one shape with `fixed_shapes`.

    Args:
        pairs: list of `(source_text, target_text)` str pairs.
        source_tokenizer: `TextTokenizer` with a vocabulary, for the sources.
        target_tokenizer: `TextTokenizer` with a vocabulary, for the targets.
        batch_size: int >= 1, examples per batch (per bucket when bucketing);
            None: 64, or with `batch_tokens` no limit on the rows.
        shuffle: bool, shuffle the examples (all of them: the buffer holds the
            whole dataset), in a new order every epoch.
        seed: optional int. With a seed, two datasets built from the same
            arguments give the same order, epoch after epoch.
        bucket_boundaries: `None` (no bucketing), a sorted list of ints, or
            `"auto"`. With boundaries, examples are grouped by length
            `max(source_length, target_length + 1)` using
            `tf.data.Dataset.bucket_by_sequence_length`, so a batch holds
            examples of similar length and needs little padding. A list
            gives exclusive upper bounds (bucket `i` holds the lengths in
            `[boundaries[i - 1], boundaries[i])`; with `fixed_shapes` its
            batches are padded to `boundaries[i] - 1`). `"auto"`: with
            `fixed_shapes`, the padded lengths above (8, 12, 16, 24, ...);
            without, the 10th...90th percentiles of the example lengths.
        max_source_length: optional int; pairs whose source has more tokens are
            dropped.
        max_target_length: optional int; pairs whose `target_in` (target
            tokens + 1) is longer are dropped.
        drop_remainder: bool, drop the last smaller batch (of each bucket).
        cache: bool, keep the tokenized examples in memory after the first
            epoch.
        alignments: optional reference word links for guided alignment
            training (`TransformerSeq2Seq(guided_alignment_weight=...)`):
            one entry per pair, `(target_piece, source_piece)` int pairs
            indexing the pieces of the encoded target and source, from 0
            (`kerasseq.alignment.reference_alignments` makes them).
        fixed_shapes: bool, see "Batch shapes" above.
        batch_multiple: int >= 1, see "Batch rows" above (1: no rows added
            beyond `fixed_shapes`' own).
        batch_tokens: optional int >= 1, see "Batches by token count" above;
            needs `bucket_boundaries`.

    Returns:
        `tf.data.Dataset` of `((source_ids, target_in_ids), target_out_ids)`,
        int32, shapes `((batch_size, source_length), (batch_size,
        target_length))` and `(batch_size, target_length)` (with
        `fixed_shapes`, `source_length == target_length`); ready for
        `model.fit`. With `alignments` the inputs are a dict of `source_ids`,
        `target_in_ids` and `alignment_links`, int32 `(batch_size,
        target_length, source_length)`: 1 where target piece `t` (the one
        `target_out_ids[:, t]` holds) is linked to a source piece.

    Example:

    >>> from kerasseq.data import TextTokenizer
    >>> pairs = [("cat", "K AE T")]
    >>> source = TextTokenizer.from_texts(["cat"])
    >>> target = TextTokenizer.from_texts(["K AE T"], split="whitespace")
    >>> dataset = make_dataset(pairs, source, target, fixed_shapes=False)
    >>> (source_ids, target_in), target_out = next(iter(dataset))
    >>> source_ids.numpy().tolist(), target_in.numpy().tolist(), target_out.numpy().tolist()
    ([[5, 4, 6]], [[2, 5, 4, 6]], [[5, 4, 6, 3]])
    >>> (source_ids, target_in), target_out = next(iter(make_dataset(pairs, source, target,
    ...                                                              batch_size=2)))
    >>> source_ids.numpy().tolist(), target_in.numpy().tolist(), target_out.numpy().tolist()
    ([[5, 4, 6, 0], [5, 4, 6, 0]], [[2, 5, 4, 6], [2, 5, 4, 6]], [[5, 4, 6, 3], [0, 0, 0, 0]])
    """
    pairs = _check_pairs(pairs)
    if batch_size is not None:
        _check_batch_size(batch_size)
    if batch_tokens is not None:
        batch_tokens = check_positive_int("batch_tokens", batch_tokens)
        if bucket_boundaries is None:
            raise ValueError("batch_tokens needs bucket_boundaries ('auto' or a list): a batch's "
                             "row count comes from its bucket's length. Received: "
                             "bucket_boundaries=None")
    elif batch_size is None:
        batch_size = 64
    batch_multiple = check_positive_int("batch_multiple", batch_multiple)
    for name, value in (("max_source_length", max_source_length),
                        ("max_target_length", max_target_length)):
        if value is not None:
            check_int(name, value)
    sources = [source for source, _ in pairs]
    targets = [target for _, target in pairs]
    # Token counts of every pair: for 'auto' buckets, and for the number of
    # batches, which the dataset then declares (assert_cardinality), so that
    # `fit` knows an epoch's length and never warns that the input "ran out
    # of data".
    source_lengths = _encoded_lengths(source_tokenizer, sources)
    target_lengths = _encoded_lengths(target_tokenizer, targets)
    kept = np.ones(len(pairs), bool)
    if max_source_length is not None:
        kept &= source_lengths <= max_source_length
    if max_target_length is not None:
        kept &= target_lengths + 1 <= max_target_length
    lengths = np.maximum(source_lengths, target_lengths + 1)  # as _example_length
    if alignments is not None:
        alignments = _check_alignments(alignments, len(pairs), source_lengths, target_lengths)

    if not isinstance(fixed_shapes, (bool, np.bool_)):
        raise ValueError(f"fixed_shapes must be True or False. Received: fixed_shapes={fixed_shapes!r}")
    boundaries = bucket_boundaries
    longest = int(lengths[kept].max()) if kept.any() else 1
    edges = training_length_edges(longest) if fixed_shapes else None  # the padded lengths
    if isinstance(boundaries, str):
        if boundaries != "auto":
            raise ValueError("`bucket_boundaries` must be None, a list of ints or 'auto'. "
                             f"Received: bucket_boundaries={bucket_boundaries!r}")
        if fixed_shapes:  # one bucket per padded length
            boundaries = [edge + 1 for edge in edges[:-1]] or None
        else:
            boundaries = _auto_bucket_boundaries(lengths)
    elif boundaries is not None:
        boundaries = list(boundaries)
        if (not boundaries or not all(isinstance(b, (int, np.integer)) and b >= 1 for b in boundaries)
                or boundaries != sorted(set(boundaries))):
            raise ValueError("`bucket_boundaries` must be a non-empty, strictly increasing list of "
                             f"ints >= 1. Received: bucket_boundaries={bucket_boundaries!r}")
        if fixed_shapes:  # bucket i padded to boundaries[i] - 1, the last to the longest example
            edges = [int(b) - 1 for b in boundaries if 1 <= b - 1 < longest] + [longest]

    if batch_tokens is None:
        rows = [batch_size] * (1 if boundaries is None else len(boundaries) + 1)
    else:  # a bucket's longest possible example sets its rows
        # ("auto" over short examples may leave one bucket: boundaries None)
        padded = [max(1, min(int(bound) - 1, longest)) for bound in boundaries or []] + [longest]
        rows = [max(1, min(batch_tokens // length, batch_size or batch_tokens))
                for length in padded]

    def encode_chunk(source_texts, target_texts):
        return source_tokenizer.encode(source_texts), target_tokenizer.encode(target_texts)

    dataset = tf.data.Dataset.from_tensor_slices((sources, targets))
    dataset = dataset.batch(_ENCODE_CHUNK)
    dataset = dataset.map(_unconverted(encode_chunk), num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.unbatch()  # one (source_ids, target_ids) per element
    if alignments is not None:  # the links ride along as (n, 2) per pair
        links = tf.RaggedTensor.from_row_lengths(
            np.concatenate(alignments).reshape([-1, 2]).astype(np.int32),
            [len(row) for row in alignments])
        dataset = tf.data.Dataset.zip(
            (dataset, tf.data.Dataset.from_tensor_slices(links))).map(
            _unconverted(lambda ids, pair_links: (*ids, pair_links)))
    if max_source_length is not None or max_target_length is not None:
        source_limit = max_source_length or np.iinfo(np.int32).max
        target_limit = max_target_length or np.iinfo(np.int32).max

        def short_enough(source_ids, target_ids, *links):
            return (tf.shape(source_ids)[0] <= source_limit) & (
                tf.shape(target_ids)[0] + 1 <= target_limit)

        dataset = dataset.filter(_unconverted(short_enough))
    if alignments is None:
        dataset = dataset.map(_unconverted(_teacher_forcing), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        def teacher_forcing_with_links(source_ids, target_ids, pair_links):
            (source_ids, target_in), target_out = _teacher_forcing(source_ids, target_ids)
            return (source_ids, target_in, pair_links), target_out

        dataset = dataset.map(_unconverted(teacher_forcing_with_links),
                              num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        dataset = dataset.cache()  # the links as lists: the dense matrices come after
    if shuffle:
        dataset = dataset.shuffle(buffer_size=len(pairs), seed=seed, reshuffle_each_iteration=True)
    if alignments is not None:
        dataset = dataset.map(_unconverted(_dense_links), num_parallel_calls=tf.data.AUTOTUNE)
    if boundaries is None:
        dataset = dataset.padded_batch(rows[0], padding_values=PAD_ID,
                                       drop_remainder=drop_remainder)
    else:
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=_example_length, bucket_boundaries=boundaries,
            bucket_batch_sizes=rows, padding_values=PAD_ID, drop_remainder=drop_remainder)
    if fixed_shapes or batch_multiple > 1:
        def to_batch_shape(inputs, target_out):
            source_ids, _, _ = split_inputs(inputs)
            longest_here = tf.maximum(tf.shape(source_ids)[1], tf.shape(target_out)[1])
            if not fixed_shapes:
                batch_rows = tf.shape(target_out)[0]
            elif len(rows) == 1:
                batch_rows = rows[0]
            else:  # the rows of the bucket the batch came from
                bucket = tf.reduce_sum(tf.cast(tf.constant(boundaries, tf.int32) <= longest_here,
                                               tf.int32))
                batch_rows = tf.gather(tf.constant(rows, tf.int32), bucket)
            batch_rows += (-batch_rows) % batch_multiple  # the next multiple of batch_multiple
            length = smallest_edge(edges, longest_here) if fixed_shapes else None
            return pad_batch(inputs, target_out, batch_rows, length)

        dataset = dataset.map(_unconverted(to_batch_shape), num_parallel_calls=tf.data.AUTOTUNE)
    batches = _number_of_batches(lengths[kept], boundaries, rows, drop_remainder)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE)


def batch_shapes(dataset):
    """How many batches of each shape one pass over `dataset` gives.

    XLA compiles one program per shape of the batches `fit` sees (Keras'
    default `compile` uses XLA on a GPU), so the number of keys is the
    number of programs an epoch compiles.

    Args:
        dataset: a `tf.data.Dataset` of batches, e.g. from `make_dataset`.

    Returns:
        `collections.Counter` mapping each batch's shapes (a tuple of one
        shape tuple per tensor, in `tf.nest.flatten` order) to its count.

    Example:

    >>> from kerasseq.data import TextTokenizer
    >>> source = TextTokenizer.from_texts(["cat", "a"])
    >>> target = TextTokenizer.from_texts(["K AE T", "AE"], split="whitespace")
    >>> pairs = [("cat", "K AE T"), ("a", "AE"), ("at", "AE T")]
    >>> batch_shapes(make_dataset(pairs, source, target, batch_size=2))
    Counter({((2, 4), (2, 4), (2, 4)): 2})
    """
    return collections.Counter(
        tuple(tuple(tensor.shape) for tensor in tf.nest.flatten(batch)) for batch in dataset)


def _number_of_batches(lengths, boundaries, rows, drop_remainder):
    """Batches of `padded_batch` / `bucket_by_sequence_length` over examples of `lengths`.

    A bucket holds the lengths in `[boundaries[i - 1], boundaries[i])` and
    emits full batches of its `rows[i]` examples, then (without
    `drop_remainder`) one partial batch.
    """
    if boundaries is None:
        counts = [len(lengths)]
    else:
        counts = np.bincount(np.searchsorted(boundaries, lengths, side="right"),
                             minlength=len(boundaries) + 1)
    if drop_remainder:
        return int(sum(count // size for count, size in zip(counts, rows, strict=True)))
    return int(sum(-(-count // size) for count, size in zip(counts, rows, strict=True)))


def make_source_dataset(texts, tokenizer, batch_size=64):
    """Build an inference dataset of padded source ids, in input order.

    Args:
        texts: list of str (or a `tf.string` tensor of shape `(num_texts,)`).
        tokenizer: the source `TextTokenizer`.
        batch_size: int >= 1.

    Returns:
        `tf.data.Dataset` of int32 `source_ids`, shape
        `(batch_size, source_length)`, padded with `PAD_ID` (0).

    Example:

    >>> from kerasseq.data import TextTokenizer
    >>> tokenizer = TextTokenizer.from_texts(["cat", "act"])
    >>> [b.numpy().tolist() for b in make_source_dataset(["cat", "a"], tokenizer)]
    [[[5, 4, 6], [4, 0, 0]]]
    """
    _check_batch_size(batch_size)
    if isinstance(texts, str):
        raise ValueError(
            f"`texts` must be a list of str, not a single str. Received: texts={texts!r:.200}"
        )
    texts = list(np.reshape(np.asarray(texts, dtype=object), [-1]))
    if not texts:
        raise ValueError("`texts` must contain at least one text.")
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(texts, dtype=tf.string))
    dataset = dataset.batch(batch_size)
    dataset = dataset.map(
        _unconverted(lambda batch: tokenizer.encode(batch).to_tensor(default_value=PAD_ID)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
