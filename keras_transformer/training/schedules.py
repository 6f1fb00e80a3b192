"""The paper's learning-rate schedule (section 5.3): linear warm-up, then `1 / sqrt(step)` decay."""

import keras
from keras import ops

from keras_transformer.checks import check_int, check_number


@keras.saving.register_keras_serializable(package="keras_transformer")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The paper's learning rate (section 5.3), with an overall scale.

    `lr(step) = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`,
    rising linearly for `warmup_steps` steps, then decaying as `1 / sqrt(step)`. Steps count
    from 1. The peak, at `step = warmup_steps`, is `scale * (d_model * warmup_steps)^-0.5`.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        check_int("d_model", d_model, 1)
        check_int("warmup_steps", warmup_steps, 1)
        check_number("scale", scale, greater_than=0)
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        rising = step * self.warmup_steps**-1.5
        decaying = ops.rsqrt(step)
        return self.factor() * ops.minimum(rising, decaying)

    def factor(self):
        """`scale * d_model^-0.5`, the factor of every step's rate (a float; a subclass may return a variable)."""
        return self.scale * self.d_model**-0.5

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
