"""`AveragingAdam`: Adam with weight averaging over a share of the run and an optional cooldown.

Keras's Adam, with a moving average of the weights (`use_ema`) whose momentum grows with the
step, updated every `EMA_EVERY` steps, and a learning rate that can fall linearly to 0 over the
run's last steps. Under TensorFlow its update of each float32 weight is one fused kernel
(`keras_transformer.training.fused_adam`, imported only there).
"""

import keras
from keras import ops

from keras_transformer.checks import check_int, check_number, check_rate

# The moving average is updated every this many optimizer steps, at the momentum of as many steps.
EMA_EVERY = 4


@keras.saving.register_keras_serializable(package="keras_transformer")
class AveragingAdam(keras.optimizers.Adam):
    """Adam whose weight averaging (`use_ema`) looks back a share of the run, up to its momentum.

    Keras's own averaging uses `ema_momentum` from the second step on: an average that looks
    back about `1 / (1 - momentum)` steps whatever the run's length, so early in a run (or in a
    short run on a slow machine) it is dominated by the first, barely trained weights. Here
    the momentum at optimizer step `t` (counted from 0) is
    `m = min(ema_momentum, t / (t + ema_ramp))`: step `s` weighs about `(s / t) ** (ema_ramp - 1)`
    in the average, which with the default `ema_ramp=9` covers roughly the last tenth of the
    steps taken so far, until that is longer than `ema_momentum` allows (0.998, about 500 steps,
    is reached at step 4,491); `ema_ramp=1` is the plain mean of all the steps. At `t = 0` the
    momentum is 0, so the first average is the weights themselves, as in Keras.

    The average is updated at every fourth step (`t = 0, 4, 8, ...`), with the momentum of four
    steps, `average = m^4 * average + (1 - m^4) * weight`: each update reads and writes every
    weight, as much memory traffic as a fifth of Adam's own update, and over an average of
    hundreds of steps the three skipped weights between two updates change nothing that matters.

    With `cooldown > 0` the learning rate also cools down at the end of the run: it follows the
    schedule until the last `cooldown` share of the run's `cooldown_end_step` steps, then falls
    linearly to 0 at that step (see `_get_current_learning_rate`). The end step is the variable
    `cooldown_end_step`, so a run that knows its length only as it goes (a wall-clock budget) can
    set it between epochs; 0 means not known yet, and the rate follows the schedule.
    """

    def __init__(self, *args, ema_ramp=9.0, cooldown=0.0, cooldown_end_step=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.ema_ramp = check_number("ema_ramp", ema_ramp, 1)
        self.cooldown = check_rate("cooldown", cooldown)
        self._initial_cooldown_end_step = check_int("cooldown_end_step", cooldown_end_step, 0)

    def get_config(self):
        return {
            **super().get_config(),
            "ema_ramp": self.ema_ramp,
            "cooldown": self.cooldown,
            "cooldown_end_step": self._initial_cooldown_end_step,
        }

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        if self.cooldown:
            # A variable, not a constant: a run with a wall-clock budget learns its length as it goes.
            self.cooldown_end_step = self.add_variable((), initializer="zeros", dtype="float32", name="cooldown_end")
            self.cooldown_end_step.assign(float(self._initial_cooldown_end_step))

    def set_cooldown_end_step(self, step):
        """Make `step` the run's last step, where the cooldown reaches 0; 0 means not known yet.

        Nothing to do without a cooldown. A run resumed with more epochs calls this after loading
        its checkpoint, which holds the end step of the run that wrote it.
        """
        self._initial_cooldown_end_step = check_int("step", step, 0)
        if self.cooldown and self.built:
            self.cooldown_end_step.assign(float(step))

    def _get_current_learning_rate(self):
        """The schedule's rate, times the cooldown's factor `clip((E - t) / (cooldown * E), 0, 1)`.

        `E` is `cooldown_end_step`, the step at which the run ends, and `t` the optimizer step (from
        0): the rate follows the schedule until the last `cooldown` share of the run, then falls
        linearly to 0 at `E`. With `E = 0` (not known) the factor is 1.
        """
        rate = super()._get_current_learning_rate()
        if not self.cooldown or not self.built:
            return rate
        end = ops.cast(self.cooldown_end_step, "float32")
        left = (end - ops.cast(self.iterations, "float32")) / ops.maximum(self.cooldown * end, 1.0)
        factor = ops.where(end > 0, ops.clip(left, 0.0, 1.0), 1.0)
        return rate * factor

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.backend.backend() != "tensorflow":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        from keras_transformer.training import fused_adam  # TensorFlow only

        with fused_adam.shared_step_scalars(self, learning_rate):
            return super()._backend_update_step(grads, trainable_variables, learning_rate)

    def update_step(self, gradient, variable, learning_rate):
        """Keras's Adam update; under TensorFlow one fused kernel per float32 weight (see `fused_adam`)."""
        if keras.backend.backend() == "tensorflow":
            from keras_transformer.training import fused_adam  # TensorFlow only

            if fused_adam.applies(self, variable):
                return fused_adam.apply_adam(self, gradient, variable, learning_rate)
        return super().update_step(gradient, variable, learning_rate)

    def _update_model_variables_moving_average(self, trainable_variables):
        if not self.use_ema:
            return
        steps = ops.cast(self.iterations, "float32")
        momentum = ops.minimum(ops.cast(self.ema_momentum, "float32"), steps / (steps + self.ema_ramp))
        rate = 1.0 - momentum**EMA_EVERY  # the share of the new weights in the average

        def update():
            for variable, average in zip(trainable_variables, self._model_variables_moving_average):
                if average is not None:
                    average.assign_add(ops.cast(rate, average.dtype) * (variable - average))

        ops.cond(ops.equal(self.iterations % EMA_EVERY, 0), update, lambda: None)
