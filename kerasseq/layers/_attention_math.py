"""Masked softmax shared by the recurrent attention layers."""

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
