"""Token accuracy that ignores padding."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasseq")
class MaskedTokenAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target tokens whose argmax prediction is right.

    Accumulates over batches: Σ correct real tokens / Σ real tokens.

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
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            mask = mask * ops.cast(sample_weight, "float32")
        self.correct.assign_add(ops.sum(ops.cast(ops.equal(predicted, y_true), "float32") * mask))
        self.total.assign_add(ops.sum(mask))

    def result(self):
        return self.correct / ops.maximum(self.total, 1.0)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update(pad_id=self.pad_id)
        return config
