"""Running position-wise work on the real positions of a padded batch only.

In a Transformer trained with teacher forcing, nothing reads the output of a
padding position back: attention masks padding keys, and the loss masks
padding labels. Every Dense layer of a block works position by position, so
during training it can run on the real positions alone: gather them from the
`(batch_size, length, ...)` tensor into one `(num_real, ...)` matrix, compute,
and scatter the results back. The loss and every gradient stay those of the
full computation (tests/models/test_transformer_seq2seq.py checks it on a
whole model); only the work on padding is saved.

The gather has a data-dependent shape, which XLA cannot compile, so the layers
use it only when `training is True`, a padding mask is given, the layer's
`skip_padding` is on and the code is not being traced for XLA; and, batch by
batch, only when at least a quarter of the positions are padding
(`SKIP_PADDING_BELOW`).
"""

import tensorflow as tf
from tensorflow.python.ops import control_flow_util


def inside_xla():
    """True while tracing a function that XLA compiles (e.g. `fit` with `jit_compile=True`)."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def skips_padding(layer, padding_mask, training):
    """Whether `layer` should run on the real positions of `padding_mask` only."""
    return (
        padding_mask is not None
        and getattr(layer, "skip_padding", False)
        and training is True
        and not inside_xla()
    )


# The skip pays off only when there is enough padding: gathering and scattering
# cost time too. benchmarks/train_throughput.py measured (2 layers, d_model 128,
# one CPU thread) 2.5x the full computation's speed on batches with 31 % real
# positions, but 0.9x on length-bucketed batches with 91 %; a straight line
# through the two crosses 1.0 near 82 %. Below this share of real positions a
# batch takes the skipping path, otherwise the full one (decided per batch).
SKIP_PADDING_BELOW = 0.75


def skip_or_full(skip_fn, full_fn, *padding_masks):
    """`skip_fn()` if the masks' mean share of real positions is below
    `SKIP_PADDING_BELOW`, else `full_fn()`; a `tf.cond`, so decided per batch
    inside a compiled training step."""
    shares = [tf.reduce_mean(tf.cast(mask, "float32")) for mask in padding_masks]
    share = tf.add_n(shares) / float(len(shares))
    return tf.cond(share < SKIP_PADDING_BELOW, skip_fn, full_fn)


class RealPositions:
    """The real (non-padding) positions of a `(batch_size, length)` padding mask.

    `gather` turns `(batch_size, length, ...)` into `(num_real, ...)`, keeping
    the rows whose mask is True in row-major order; `scatter` puts such rows
    back, into zeros or into a given tensor.
    """

    def __init__(self, padding_mask):
        mask = tf.cast(padding_mask, "bool")
        self.batch_and_length = tf.shape(mask, out_type="int64")
        self.indices = tf.where(tf.reshape(mask, (-1,)))  # (num_real, 1)

    def _flat_shape(self, tail):
        return tf.concat([[tf.reduce_prod(self.batch_and_length)], tail], axis=0)

    def gather(self, x):
        tail = tf.shape(x, out_type="int64")[2:]
        return tf.gather_nd(tf.reshape(x, self._flat_shape(tail)), self.indices)

    def scatter(self, rows, into=None):
        tail = tf.shape(rows, out_type="int64")[1:]
        if into is None:
            flat = tf.scatter_nd(self.indices, rows, self._flat_shape(tail))
        else:
            flat = tf.reshape(into, self._flat_shape(tail))
            flat = tf.tensor_scatter_nd_update(flat, self.indices, tf.cast(rows, flat.dtype))
        return tf.reshape(flat, tf.concat([self.batch_and_length, tail], axis=0))
