"""Token accuracy that ignores padding."""

import keras
from keras import ops

from kerasseq.training.losses import token_weights


@keras.saving.register_keras_serializable(package="kerasseq")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target tokens whose argmax prediction is right.

    Accumulates over batches: Σ w · correct / Σ w over the real tokens, where
    w is the token's weight as for `MaskedSparseCategoricalCrossentropy`: the
    `sample_weight` (per row `(batch_size,)` or per token `(batch_size,
    target_length)`) times the Keras mask of `y_pred`, 1 where neither is
    given. This is `keras.metrics.SparseCategoricalAccuracy` with the padding
    folded into the weights.

    Args:
        pad_id: int, the ignored target id (0).
    """

    def __init__(self, pad_id=0, name="token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        weights = token_weights(y_true, y_pred, sample_weight) * ops.cast(
            ops.not_equal(y_true, self.pad_id), "float32")  # (batch_size, target_length)
        self.correct.assign_add(ops.sum(ops.cast(ops.equal(predicted, y_true), "float32") * weights))
        self.total.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update(pad_id=self.pad_id)
        return config
