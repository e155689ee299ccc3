"""Training losses: masked token cross-entropy, and attention against reference word links."""

import keras
from keras import ops

from kerasseq._replicas import sum_over_replicas

# `get_config` writes this key; a config without it was saved before sample
# weights were supported, when "sum" (the only value it holds) was how the
# loss returned its token mean unchanged.
_CONFIG_FORMAT = 2


class _KerasMaskWeights(keras.losses.Loss):
    """Per-token weights times the Keras mask of `y_pred`, combined by Keras itself.

    Keras' `Loss.__call__` multiplies `sample_weight` by the Keras mask that
    travels with `y_pred` and, with reduction "none", returns the values of
    `call` times that product. The values here are ones `(batch_size,
    length)`, so it returns the product itself.
    """

    def __init__(self):
        super().__init__(name="token_weights", reduction="none")

    def call(self, y_true, y_pred):
        return ops.ones_like(ops.cast(y_true, "float32"))


def token_weights(y_true, y_pred, sample_weight=None):
    """`(batch_size, length)` float32: the weight of every target token.

    `sample_weight` is a scalar, one weight per row (`(batch_size,)` or
    `(batch_size, 1)`: every token of the row gets it) or one per token
    (`(batch_size, length)` or `(batch_size, length, 1)`); it is multiplied
    by the Keras mask of `y_pred` if it carries one. 1 everywhere when
    neither is given.
    """
    if sample_weight is not None:
        sample_weight = ops.cast(sample_weight, "float32")
        try:
            rank = len(sample_weight.shape)
        except ValueError:  # unknown rank (a relaxed `tf.function` trace)
            rank = None
        if rank != 0:
            # Keras 3 broadcasts (batch_size,) weights against the last axis of
            # (batch_size, length) losses; a row's weight belongs to its tokens.
            shape = ops.shape(y_true)
            rows = sample_weight.shape[0] if rank else None
            if (rank is not None and rank > 3) or (
                    isinstance(rows, int) and isinstance(shape[0], int) and rows != shape[0]):
                raise ValueError(
                    "sample_weight must be a scalar, (batch_size,), (batch_size, 1), (batch_size, "
                    f"length) or (batch_size, length, 1); the targets are {tuple(shape)}. "
                    f"Received: sample_weight of shape {tuple(sample_weight.shape)}")
            sample_weight = ops.broadcast_to(ops.reshape(sample_weight, (shape[0], -1)), shape)
    return ops.cast(_KerasMaskWeights()(y_true, y_pred, sample_weight), "float32")


@keras.saving.register_keras_serializable(package="kerasseq")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy over target tokens, a weighted mean over non-padding tokens.

        loss = Σ_{b,t} w_{b,t} m_{b,t} CE(y_{b,t}, logits_{b,t}) / Σ_{b,t} w_{b,t} m_{b,t}

    with m_{b,t} = 1 where `y_true != pad_id` and w_{b,t} the weight Keras
    gives the token: the `sample_weight` of `fit` / `evaluate` / the call,
    broadcast as Keras broadcasts it (one weight per row `(batch_size,)`, or
    one per token `(batch_size, target_length)`), times the Keras mask that
    travels with `y_pred` (1 where neither is given). Without weights it is
    the mean over the real tokens; a row of weight 0 drops out of numerator
    and denominator alike; a Keras mask on the logits agrees with the padding
    and so counts once. This is Keras' reduction "mean_with_sample_weight"
    (the default) applied to the per-token losses with the padding as a mask:
    `keras.losses.SparseCategoricalCrossentropy(from_logits=True,
    reduction="mean_with_sample_weight")(y_true, logits, sample_weight=w · m)`.
    The other Keras reductions follow Keras' rules too: "sum" returns the sum
    Σ w m CE, "sum_over_batch_size" (or "mean") divides it by Σ m (Keras'
    `SparseCategoricalCrossentropy(ignore_class=pad_id)`), and "none" returns
    the per-token values w m CE `(batch_size, target_length)`.

    With label smoothing ε (Szegedy et al. 2016; Vaswani et al. 2017) the
    one-hot target becomes (1 - ε) · onehot + ε / vocab_size. Logits are
    upcast to float32, so the loss is computed in float32 under
    `mixed_float16` as well.

    Args:
        label_smoothing: float in [0, 1).
        pad_id: int, the target id that is ignored (0).
        from_logits: bool, `y_pred` are logits (True) or probabilities.
        reduction: "mean_with_sample_weight" (default), "sum_over_batch_size",
            "mean", "sum", "none" or None, as above.

    Call arguments:
        y_true: int `(batch_size, target_length)`.
        y_pred: `(batch_size, target_length, vocab_size)`.
        sample_weight: optional, a scalar, `(batch_size,)`, `(batch_size, 1)`,
            `(batch_size, target_length)` or `(batch_size, target_length, 1)`.

    Returns:
        A float32 scalar (0 for a batch whose real tokens all weigh 0), or the
        per-token values with reduction "none".

    Under a `tf.distribute` strategy with several replicas (inside
    `strategy.run`, as in `fit`), each replica returns its own weighted sum
    divided by the denominator *summed over all replicas*. Keras leaves this
    loss unscaled and sums the replicas' gradients, so the step follows the
    gradient of the global mean exactly, as on one device, however unevenly
    the real tokens fall across the replicas. (Keras' own mean reductions
    divide by the replica's own denominator and by the number of replicas,
    which gives the mean of the replicas' means instead.)
    """

    def __init__(self, label_smoothing=0.0, pad_id=0, from_logits=True,
                 name="masked_sparse_categorical_crossentropy",
                 reduction="mean_with_sample_weight", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(
                f"label_smoothing must be in [0, 1). Received: label_smoothing={label_smoothing!r}"
            )
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)
        self.from_logits = bool(from_logits)

    def __call__(self, y_true, y_pred, sample_weight=None):
        with keras.name_scope(self.name):
            weights = token_weights(y_true, y_pred, sample_weight)  # (batch_size, target_length)
            real = ops.cast(ops.not_equal(ops.cast(y_true, "int32"), self.pad_id), "float32")
            weights = weights * real
            values = self.call(y_true, y_pred) * weights  # (batch_size, target_length)
            if self.reduction in (None, "none"):
                return values
            total = ops.sum(values)
            if self.reduction == "sum":
                return total
            if self.reduction == "mean_with_sample_weight":
                denominator = ops.sum(weights)
            else:  # "sum_over_batch_size", "mean": Keras divides by the unmasked tokens
                denominator = ops.sum(token_weights(y_true, y_pred) * real)
            return ops.divide_no_nan(total, sum_over_replicas(denominator))

    def call(self, y_true, y_pred):
        """The per-token cross-entropy `(batch_size, target_length)`, 0 at padding."""
        y_true = ops.cast(y_true, "int32")
        y_pred = ops.cast(y_pred, "float32")
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)
        else:
            log_probs = ops.log(ops.clip(y_pred, 1e-7, 1.0))
        vocab_size = ops.shape(y_pred)[-1]
        targets = ops.one_hot(y_true, vocab_size, dtype="float32")  # (batch_size, target_length, vocab_size)
        if self.label_smoothing:
            targets = targets * (1.0 - self.label_smoothing) + self.label_smoothing / ops.cast(
                vocab_size, "float32"
            )
        token_loss = -ops.sum(targets * log_probs, axis=-1)  # (batch_size, target_length)
        return ops.where(ops.not_equal(y_true, self.pad_id), token_loss, 0.0)

    def get_config(self):
        config = super().get_config()
        config.update(
            label_smoothing=self.label_smoothing, pad_id=self.pad_id, from_logits=self.from_logits,
            config_format=_CONFIG_FORMAT,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.pop("config_format", None) is None and config.get("reduction") == "sum":
            config["reduction"] = "mean_with_sample_weight"  # saved before sample weights
        return cls(**config)


def guided_alignment_loss(links, attention, epsilon=1e-9, sample_weight=None):
    """Cross-entropy of one attention head against reference word links.

    For every target piece `t` with at least one link, the links of its row
    are normalised into a distribution `q_t` over the source pieces, and the
    loss is `-sum_s q_t(s) log a_t(s)`, averaged over the linked target
    pieces of the batch (Garg et al. 2019, "Jointly Learning to Align and
    Translate with Transformer Models"; OpenNMT-tf's
    `guided_alignment_type: ce`). Target pieces without a link and padding
    count for nothing; a batch without any link gives 0. With a
    `sample_weight` the mean is weighted as `MaskedSparseCategoricalCrossentropy`
    weights its tokens: Σ w · row loss / Σ w over the linked pieces, so a
    row of weight 0 counts for nothing here either.

    With several replicas each divides by the linked pieces of all replicas,
    as `MaskedSparseCategoricalCrossentropy` above does for tokens (it says why).

    Args:
        links: `(batch_size, target_length, source_length)`, > 0 where a
            target piece is linked to a source piece (0/1, or weights).
        attention: `(batch_size, target_length, source_length)`, one head's
            attention distributions (rows sum to 1 over the real source
            pieces).
        epsilon: floor of the attention weights inside the logarithm.
        sample_weight: optional, as for `MaskedSparseCategoricalCrossentropy`:
            per row `(batch_size,)` or per target piece `(batch_size,
            target_length)`.

    Returns:
        A float32 scalar.

    Example:

    >>> links = [[[1, 0, 0], [0, 1, 1]]]        # piece 0 -> source 0; piece 1 -> 1 and 2
    >>> attention = [[[0.5, 0.25, 0.25], [0.2, 0.4, 0.4]]]
    >>> round(float(guided_alignment_loss(links, attention)), 4)  # (-ln .5 - ln .4) / 2
    0.8047
    """
    links = ops.cast(links, "float32")
    attention = ops.cast(attention, "float32")
    mass = ops.sum(links, axis=-1)  # (batch_size, target_length)
    linked = ops.cast(mass > 0, "float32")
    if sample_weight is not None:
        linked = linked * token_weights(mass, mass, sample_weight)
    reference = links / ops.maximum(mass, 1e-12)[..., None]
    log_attention = ops.log(ops.maximum(attention, epsilon))
    row_loss = -ops.sum(reference * log_attention, axis=-1)  # (batch_size, target_length)
    count = sum_over_replicas(ops.sum(linked))
    return ops.divide_no_nan(ops.sum(row_loss * linked), count)
