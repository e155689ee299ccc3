"""Masked softmax and the additive score shared by the recurrent attention layers."""

from keras import ops


def masked_softmax(scores, mask=None):
    """Softmax over the last axis that gives masked positions zero weight.

    A row whose positions are all masked (an empty source) gets all-zero
    weights, never NaN.

    Args:
        scores: float tensor `(batch_size, source_length)`.
        mask: optional bool tensor `(batch_size, source_length)`, True = real.

    Returns:
        float32 tensor `(batch_size, source_length)`.
    """
    # Computed in float32 whatever the compute dtype: -1e9 overflows float16
    # (largest finite value 65504), and the sum of exponentials is more exact.
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, ops.full_like(scores, -1e9))
    weights = ops.softmax(scores, axis=-1)
    return weights * ops.cast(mask, weights.dtype)


def additive_score(hidden, score_dense):
    """e_{t,i} = v^T hidden_i, with v the `(units, 1)` kernel of `score_dense`.

    Written as a product and a sum over `units` rather than as a call of the
    Dense layer on a rank-3 tensor: Keras runs that call as `tf.tensordot`,
    whose gradient inside the decoder's `tf.scan` loop needs a transpose
    permutation that XLA cannot prove constant, so the model could not be
    trained with `jit_compile=True`. The numbers are the same (one output
    unit, no bias, no activation).

    Args:
        hidden: `(batch_size, source_length, units)`, tanh(W_1 s + W_2 h_i).
        score_dense: a built `keras.layers.Dense(1, use_bias=False)`.

    Returns:
        `(batch_size, source_length)` in the dtype of `hidden`.
    """
    v = ops.cast(score_dense.kernel[:, 0], hidden.dtype)  # (units,)
    return ops.sum(hidden * v, axis=-1)  # (batch_size, source_length)
