"""Training losses: masked token cross-entropy, and attention against reference word links."""

import keras
from keras import ops

from kerasseq._replicas import sum_over_replicas


@keras.saving.register_keras_serializable(package="kerasseq")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy over target tokens, averaged over non-padding tokens only.

        loss = Σ_{b,t} m_{b,t} · CE(y_{b,t}, logits_{b,t}) / Σ_{b,t} m_{b,t}

    with m_{b,t} = 1 where `y_true != pad_id`. With label smoothing ε
    (Szegedy et al. 2016; Vaswani et al. 2017) the one-hot target becomes
    (1 - ε) · onehot + ε / vocab_size. Logits are upcast to float32, so the
    loss is computed in float32 under `mixed_float16` as well.

    Args:
        label_smoothing: float in [0, 1).
        pad_id: int, the target id that is ignored (0).
        from_logits: bool, `y_pred` are logits (True) or probabilities.

    Call arguments:
        y_true: int `(batch_size, target_length)`.
        y_pred: `(batch_size, target_length, vocab_size)`.

    Returns:
        A float32 scalar: the mean loss per real target token (0 for a batch
        with no real token).

    Under a `tf.distribute` strategy with several replicas (inside
    `strategy.run`, as in `fit`), each replica returns its own token-loss sum
    divided by the token count *summed over all replicas*. Keras leaves a
    scalar loss unscaled and sums the replicas' gradients, so the step follows
    the gradient of the global token-mean exactly, as on one device, however
    unevenly the real tokens fall across the replicas. (Dividing by the
    replica's own count would give num_replicas × the mean of the replicas'
    token-means instead.)
    """

    def __init__(self, label_smoothing=0.0, pad_id=0, from_logits=True,
                 name="masked_sparse_categorical_crossentropy", **kwargs):
        kwargs.setdefault("reduction", "sum")
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(
                f"label_smoothing must be in [0, 1). Received: label_smoothing={label_smoothing!r}"
            )
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
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
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        token_count = sum_over_replicas(ops.sum(mask))
        return ops.sum(token_loss * mask) / ops.maximum(token_count, 1.0)

    def get_config(self):
        config = super().get_config()
        config.update(
            label_smoothing=self.label_smoothing, pad_id=self.pad_id, from_logits=self.from_logits
        )
        return config


def guided_alignment_loss(links, attention, epsilon=1e-9):
    """Cross-entropy of one attention head against reference word links.

    For every target piece `t` with at least one link, the links of its row
    are normalised into a distribution `q_t` over the source pieces, and the
    loss is `-sum_s q_t(s) log a_t(s)`, averaged over the linked target
    pieces of the batch (Garg et al. 2019, "Jointly Learning to Align and
    Translate with Transformer Models"; OpenNMT-tf's
    `guided_alignment_type: ce`). Target pieces without a link and padding
    count for nothing; a batch without any link gives 0.

    With several replicas each divides by the linked pieces of all replicas,
    as `MaskedSparseCategoricalCrossentropy` above does for tokens (it says why).

    Args:
        links: `(batch_size, target_length, source_length)`, > 0 where a
            target piece is linked to a source piece (0/1, or weights).
        attention: `(batch_size, target_length, source_length)`, one head's
            attention distributions (rows sum to 1 over the real source
            pieces).
        epsilon: floor of the attention weights inside the logarithm.

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
    reference = links / ops.maximum(mass, 1e-12)[..., None]
    log_attention = ops.log(ops.maximum(attention, epsilon))
    row_loss = -ops.sum(reference * log_attention, axis=-1)  # (batch_size, target_length)
    count = sum_over_replicas(ops.sum(linked))
    return ops.sum(row_loss * linked) / ops.maximum(count, 1.0)
