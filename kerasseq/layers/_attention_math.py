"""The masked softmax of the Transformer attentions."""

from keras import ops

# Masked scores are filled with this value *after* the scores are cast to
# float32, so it is finite whatever the compute dtype (float16 included:
# its largest finite value is 65504).
MASK_VALUE = -1e9


def masked_softmax(scores, mask=None):
    """Softmax over the last axis that gives masked positions zero weight.

    Computed in float32 whatever the dtype of `scores` (the sum of
    exponentials is more exact, and the fill value stays finite). A row whose
    positions are all masked (an empty source, a padding query under a
    causal mask) gets all-zero weights, never NaN and never uniform.

    Used by `MultiHeadAttention` (and so `GlobalSelfAttention`,
    `CausalSelfAttention`, `CrossAttention`) and
    `scaled_dot_product_attention`; `RecurrentAttention.call` writes the same
    softmax out in the notation of its page.

    Args:
        scores: float tensor `(..., source_length)`, e.g. `(batch_size,
            source_length)` or `(batch_size, num_heads, target_length,
            source_length)`.
        mask: optional bool tensor broadcastable to `scores`, True = may be
            attended.

    Returns:
        float32 tensor of the shape of `scores`.

    Example:

    >>> weights = masked_softmax(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]),
    ...                          np.array([[True, True, False], [False, False, False]]))
    >>> np.round(ops.convert_to_numpy(weights), 3)
    array([[0.269, 0.731, 0.   ],
           [0.   , 0.   , 0.   ]], dtype=float32)
    """
    scores = ops.cast(scores, "float32")
    if mask is not None:
        mask = ops.cast(mask, "bool")
        scores = ops.where(mask, scores, MASK_VALUE)
    # The softmax written out (max-shifted): `keras.ops.softmax` warns "softmax
    # over axis -1 ... of size 1" whenever the source has one position, which
    # is a legitimate attention (a one-token source: every weight is 1).
    exponentials = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    weights = exponentials / ops.sum(exponentials, axis=-1, keepdims=True)
    if mask is None:
        return weights
    # A row with no visible position would otherwise be uniform; make it zero.
    return ops.where(mask, weights, 0.0)
