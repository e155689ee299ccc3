"""Sums over the replicas of a `tf.distribute` strategy (for exact global means)."""

import tensorflow as tf
from keras import ops


def sum_over_replicas(value):
    """Σ of a per-replica scalar over the replicas of a `tf.distribute` strategy.

    The identity outside `strategy.run` and with a single replica. The sum
    carries no gradient: it is the denominator of a global mean, as
    `MaskedSparseCategoricalCrossentropy` explains.
    """
    context = tf.distribute.get_replica_context()  # None in a cross-replica context
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, ops.stop_gradient(value))
