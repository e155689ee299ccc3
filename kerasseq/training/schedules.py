"""The warm-up / inverse-square-root learning rate of "Attention Is All You Need"."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)

    (Vaswani et al. 2017, section 5.3). The rate grows linearly for
    `warmup_steps` steps, peaks at `scale · (d_model · warmup_steps)^-0.5`, then
    decays as 1/sqrt(step). Steps are counted from 1.

    Args:
        d_model: int, model width.
        warmup_steps: int, steps of linear warm-up.
        scale: float, extra factor (1.0 = the paper).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if int(d_model) < 1 or int(warmup_steps) < 1:
            raise ValueError(
                "d_model and warmup_steps must be >= 1. "
                f"Received: d_model={d_model!r}, warmup_steps={warmup_steps!r}"
            )
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step), step * warmup ** -1.5)
        return self.scale * (self.d_model ** -0.5) * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


def transformer_optimizer(d_model, warmup_steps=4000, beta_1=0.9, beta_2=0.98, epsilon=1e-9,
                          scale=1.0, **kwargs):
    """Adam with the warm-up schedule and the betas of "Attention Is All You Need".

    Vaswani et al. (2017), section 5.3: Adam with β1 = 0.9, β2 = 0.98,
    ε = 1e-9 and the learning rate of `TransformerSchedule`,

        lr(step) = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).

    The optimizer (schedule included) is saved with a compiled model's
    `.keras` file.

    Args:
        d_model: int, model width (the schedule's scale).
        warmup_steps: int, steps of linear warm-up.
        beta_1, beta_2, epsilon: Adam's moment decays and stability term.
        scale: float, the schedule's extra factor (`TransformerSchedule`;
            1.0 = the paper).
        **kwargs: other `keras.optimizers.Adam` arguments, e.g. `clipnorm`.

    Returns:
        A `keras.optimizers.Adam` whose `learning_rate` is a `TransformerSchedule`.

    Example:

    >>> optimizer = transformer_optimizer(128, warmup_steps=4000, clipnorm=1.0)
    >>> optimizer.beta_2
    0.98
    """
    schedule = TransformerSchedule(d_model, warmup_steps=warmup_steps, scale=scale)
    return keras.optimizers.Adam(schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon, **kwargs)
