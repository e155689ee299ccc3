"""Bucket shapes: the padded batch shapes of the `Translator` and of training data.

Every batch a `kerasseq.Translator` searches is padded to a bucket shape
`(rows, source_length)`, eagerly and inside an export's graph alike, so the
compiled functions are reused. The rows go to `row_edges(config.batch_buckets)`
(powers of two by default), the columns to `source_bucket_edges` of the
model's `source_length_multiple`. `kerasseq.data.make_dataset(fixed_shapes=True)`
pads training batches to `training_length_edges`. Rows added to a batch,
by either, follow one rule: `pad_rows`. TensorFlow ops only (`smallest_edge`,
`pad_rows`), so the same code runs where the sizes are known only at run
time.
"""

import tensorflow as tf

# Row buckets of `batch_buckets="pow2"`.
POW2_BUCKETS = tuple(1 << power for power in range(31))


def source_bucket_edges(multiple, scheme="geometric", up_to=1 << 16):
    """The source-length buckets, increasing: multiples of `multiple`.

    `"multiple"`: m, 2m, 3m, ...; `"geometric"`: m, 2m, 3m, 4m, 6m, 8m, 12m,
    16m, ... (2^k m and 3 * 2^k m). Both the eager path and the exported
    graph pad to these edges (`Translator`'s one bucketing step,
    `_pad_to_bucket`).
    """
    if scheme == "multiple":
        return list(range(multiple, up_to + multiple, multiple))
    edges, power = [multiple], multiple
    while edges[-1] < up_to:
        power *= 2
        edges += [power, power * 3 // 2]  # 2m, 3m, 4m, 6m, 8m, 12m, ...
    return edges


def training_length_edges(longest, smallest=8):
    """The padded lengths of `make_dataset(..., fixed_shapes=True)`, increasing.

    The geometric edges of `source_bucket_edges(4)` from `smallest` on (8,
    12, 16, 24, 32, 48, 64, 96, ...) below `longest`, then `longest` itself:
    no batch is padded past the longest example, so no batch is longer than
    a model must already take; a last geometric edge within 1.25 times
    `longest` is dropped (no bucket of a few stragglers). Each batch is
    padded to the smallest edge that holds it: a few shapes, each at most
    about 1.5 times the length it holds (above 8).

    Args:
        longest: int >= 1, the longest example's length.
        smallest: int >= 1, the first edge.

    Returns:
        A list of ints, the last one `longest`.
    """
    edges = [edge for edge in source_bucket_edges(4, up_to=longest) if smallest <= edge < longest]
    if edges and 4 * longest < 5 * edges[-1]:  # within 1.25x of the last edge: one bucket
        edges.pop()
    return edges + [int(longest)]


def row_edges(buckets):
    """The row buckets of `batch_buckets` (`"pow2"` or an increasing sequence)."""
    return POW2_BUCKETS if buckets is True or buckets == "pow2" else tuple(sorted(buckets))


def smallest_edge(edges, value):
    """The smallest of the increasing `edges` that is >= `value`, else `value`.

    TensorFlow ops, so the same code runs eagerly and inside a graph whose
    `value` is known only at run time (an export).

    Args:
        edges: a sequence of Python ints, increasing.
        value: int or int32 scalar tensor.

    Returns:
        int32 scalar tensor.
    """
    edges = tf.constant(edges, tf.int32)
    value = tf.convert_to_tensor(value, tf.int32)
    fitting = tf.boolean_mask(edges, edges >= value)
    return tf.cond(tf.size(fitting) > 0, lambda: fitting[0], lambda: value)


def pad_rows(tensor, rows):
    """`tensor` with rows appended up to `rows` (int or int32 scalar tensor).

    The one rule for rows added to a batch: each repeats row 0. So it is a
    valid model input (an all-padding source could make attention divide by
    zero), and a search over it ends when row 0's does. The `Translator`
    drops what such rows give; a training batch's are neutral
    (`kerasseq.data.pad_batch` gives them no label).
    """
    present = tf.shape(tensor)[0]
    extra = tf.zeros([rows - present], tf.int32)  # (rows - present,)
    return tf.gather(tensor, tf.concat([tf.range(present), extra], axis=0))
