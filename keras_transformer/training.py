"""Training pieces for `model.compile` / `model.fit`.

The tutorial's label-smoothed loss that ignores padding, masked token accuracy, and the paper's
learning-rate schedule (section 5.3).
"""

import contextlib

import keras
from keras import ops

from keras_transformer.special_tokens import PAD_ID


def smoothed_cross_entropy_forward(labels, logits, epsilon, mean_logit):
    """The loss of `smoothed_cross_entropy`, with what its gradient needs.

    Args:
        labels: int32 tensor `[...]` of target ids.
        logits: float32 tensor `[..., V]`.
        epsilon: float label smoothing in [0, 1).
        mean_logit: float32 tensor `[...]`, the mean of the logits over V (the caller may have
            it more cheaply than a pass over them).

    Returns:
        `(loss [...], exponentials [..., V], total [..., 1])`: `exp(logits - max)` and its sum.
    """
    top = ops.max(logits, axis=-1, keepdims=True)  # (..., 1)
    exponentials = ops.exp(logits - top)  # (..., V)
    total = ops.sum(exponentials, axis=-1, keepdims=True)  # (..., 1)
    gold = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]  # (...)
    loss = (ops.log(total) + top)[..., 0] - (1.0 - epsilon) * gold - epsilon * mean_logit
    return loss, exponentials, total


def smoothed_cross_entropy(labels, logits, epsilon):
    """Label-smoothed cross-entropy of each position, with its gradient written out.

    `(1 - eps) * NLL(y) + eps * mean(-log p)`, computed as
    `logsumexp(z) - (1 - eps) * z[y] - eps * mean(z)` for logits `z`, without a tensor of
    log-probabilities or smoothed targets. Its gradient is `softmax(z) - (1 - eps) * one_hot(y) -
    eps / V`, computed in two passes over `[B, T, V]` from the exponentials the forward pass
    made, `softmax(z) - eps / V`, then corrected at the gold positions only (one value per
    position, gathered and scattered back), never building a `[B, T, V]` one-hot or mask. Left to
    automatic differentiation, the same formula costs several more passes (every use of `z` gets
    its own gradient, then they are summed): at the small preset that made a training step about
    1.18x slower. Over a large vocabulary these passes, not the model's matmuls, dominate a small
    model's step.

    Args:
        labels: int32 tensor `[B, T]` of target ids.
        logits: float32 tensor `[B, T, V]`.
        epsilon: float label smoothing in [0, 1).

    Returns:
        float32 tensor `[B, T]`, the loss of every position (padding included; the caller masks).
    """
    vocab_size = ops.shape(logits)[-1]

    @ops.custom_gradient
    def cross_entropy(logits):
        loss, exponentials, total = smoothed_cross_entropy_forward(labels, logits, epsilon, ops.mean(logits, axis=-1))

        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # (B, T); the PyTorch backend passes it by name
            per_row = upstream[..., None]  # (B, T, 1)
            smoothed = exponentials * (per_row / total) - per_row * (epsilon / ops.cast(vocab_size, "float32"))
            # The gold positions in the flattened [B * T * V] gradient; `% V` wraps negative labels
            # as `take_along_axis` does above.
            flat_labels = ops.reshape(labels, (-1,)) % vocab_size  # (B * T,)
            gold_index = ops.arange(ops.shape(flat_labels)[0], dtype="int32") * vocab_size + flat_labels
            flat = ops.reshape(smoothed, (-1,))  # (B * T * V,), free
            gold = ops.take(flat, gold_index) - ops.reshape(upstream, (-1,)) * (1.0 - epsilon)
            return ops.reshape(ops.scatter_update(flat, gold_index[:, None], gold), ops.shape(logits))

        return loss, gradient

    return cross_entropy(logits)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLabelSmoothedLoss(keras.losses.Loss):
    """Label-smoothed cross-entropy over real target tokens (paper section 5.4).

    The tutorial's loss: targets `y_smoothed = (1 - epsilon) * one_hot(y) + epsilon / V`, softmax
    cross-entropy with the logits, averaged over the positions where `y != 0` (`istarget`).
    Computed without materialising the smoothed targets, by `smoothed_cross_entropy`.

    Padding positions (label 0) are ignored, so extra trailing padding leaves the loss unchanged,
    whether or not Keras also passes the logits' padding mask. Each real token's loss is weighted
    by `1 / (number of real tokens in the batch)` and the reduction is a sum, which gives the
    mean over real tokens.

    Args:
        label_smoothing: float epsilon in [0, 1).

    Call arguments:
        y_true: int tensor `[B, T]` of target ids, 0 = padding.
        y_pred: float tensor `[B, T, V]` of logits.
    """

    def __init__(self, label_smoothing=0.1, name="masked_label_smoothed_loss", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing}")
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        per_token = smoothed_cross_entropy(labels, ops.cast(y_pred, "float32"), self.label_smoothing)  # (B, T)
        is_target = ops.cast(ops.not_equal(labels, PAD_ID), "float32")  # (B, T)
        return per_token * is_target / ops.maximum(ops.sum(is_target), 1.0)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"label_smoothing": self.label_smoothing})
        return config


def predicted_ids(logits):
    """The highest-scoring id of each position: int32 `[B, T]` from logits `[B, T, V]`.

    `ops.argmax`, except under TensorFlow, where it is `tf.argmax` itself: Keras's TensorFlow
    `argmax` first moves every -0.0 of the logits just below 0.0 (four more passes over
    `[B, T, V]`, which at the small preset cost more than the argmax). The two differ only when
    the largest logit of a position is a zero that ties with a negative zero.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # TensorFlow only

        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(logits, axis=-1), "int32")


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of real target tokens (label != 0) whose argmax prediction is right."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")
        weight = ops.cast(ops.not_equal(labels, PAD_ID), "float32")  # (B, T)
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        hits = ops.cast(ops.equal(predicted_ids(y_pred), labels), "float32")
        self.correct.assign_add(ops.sum(hits * weight))
        self.total.assign_add(ops.sum(weight))

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class TargetTokens(keras.metrics.Metric):
    """Number of real target tokens (label != 0) seen since the metric was reset.

    An epoch's token count, for throughput, exact whether batches are by sentences or by tokens.
    """

    def __init__(self, name="target_tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.count.assign_add(ops.sum(ops.cast(ops.not_equal(ops.cast(y_true, "int32"), PAD_ID), "float32")))

    def result(self):
        # A new tensor, not the variable itself: Keras keeps the training result while the
        # validation pass resets and refills this metric.
        return self.count * 1.0

    def reset_state(self):
        self.count.assign(0.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The paper's learning rate (section 5.3), with an overall scale.

    `lr(step) = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`,
    rising linearly for `warmup_steps` steps, then decaying as `1 / sqrt(step)`. Steps count
    from 1. The peak, at `step = warmup_steps`, is `scale * (d_model * warmup_steps)^-0.5`.
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        if d_model < 1 or warmup_steps < 1 or not scale > 0:
            raise ValueError(
                "NoamSchedule needs positive d_model, warmup_steps and scale. Received: "
                f"d_model={d_model}, warmup_steps={warmup_steps}, scale={scale}"
            )
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        rising = step * self.warmup_steps**-1.5
        decaying = ops.rsqrt(step)
        return self.scale * self.d_model**-0.5 * ops.minimum(rising, decaying)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


class AccuracyCurve(keras.callbacks.Callback):
    """Record a held-out accuracy every `every` training steps (and before the first).

    Subclasses define `measure()`, the accuracy of `self.model` now. Attributes after training:
    `steps` (list of int), the optimizer steps taken, and `accuracy` (list of float), the
    accuracy then.

    Args:
        every: int, steps between two measurements.
    """

    def __init__(self, every):
        super().__init__()
        self.every = every
        self.steps, self.accuracy = [], []

    def measure(self):
        raise NotImplementedError

    def _record(self, step):
        self.steps.append(step)
        self.accuracy.append(self.measure())

    def on_train_begin(self, logs=None):
        self._step, self.steps, self.accuracy = 0, [], []
        self._record(0)

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self._step % self.every == 0:
            self._record(self._step)


class LateDropout(keras.callbacks.Callback):
    """Raise the model's dropout rate once training reaches a step ("late dropout").

    A model that trains for many epochs on a small corpus overfits in the second half of the
    run, but a high dropout rate from the start slows its first epochs. Here the model trains at
    its own rate until optimizer step `start_step`; from then on every `keras.layers.Dropout` of
    the model (nested layers included) whose rate is `from_rate` drops at `rate`, and the
    training step is traced once more to take it. Dropout layers at other rates (e.g. a
    feed-forward inner dropout of 0) keep theirs. Inference is unchanged: dropout is off there.
    A saved model keeps `from_rate` in this project's layers (their `dropout_rate`), the raised
    rate in the `Dropout` layers the model holds directly (e.g. the embeddings' dropout). On a
    resumed run already past `start_step` the rate is raised when training begins. Liu et al.
    (2023), "Dropout Reduces Underfitting", study this schedule.

    Args:
        rate: float in [0, 1), the dropout rate from `start_step` on.
        start_step: int >= 0, the optimizer step (`optimizer.iterations`) to raise it at.
        from_rate: float in (0, 1), the rate of the layers to raise: the model's
            `ModelConfig.dropout_rate`.

    Attributes:
        raised_at: the optimizer step the rate was raised at, or None.

    Raises:
        ValueError: a rate out of range, or, when training begins, a model with no
            `Dropout` layer at `from_rate`.
    """

    def __init__(self, rate, start_step, from_rate):
        super().__init__()
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"`rate` must be in [0, 1). Received: rate={rate}")
        if not 0.0 < from_rate < 1.0:
            raise ValueError(
                f"`from_rate` must be in (0, 1): the model's dropout rate. Received: from_rate={from_rate}"
            )
        if int(start_step) != start_step or start_step < 0:
            raise ValueError(f"`start_step` must be an int >= 0. Received: start_step={start_step}")
        self.rate, self.start_step, self.from_rate = float(rate), int(start_step), float(from_rate)
        self.raised_at = None

    def on_train_begin(self, logs=None):
        if self.raised_at is not None:  # a later `fit` of the same model: it keeps the raised rate
            return
        self._layers = [
            layer
            for layer in self.model._flatten_layers(include_self=False)
            if isinstance(layer, keras.layers.Dropout) and layer.rate == self.from_rate
        ]
        if not self._layers:
            raise ValueError(
                f"LateDropout: the model has no Dropout layer at rate {self.from_rate} to raise; pass the "
                "model's dropout rate as `from_rate` (a model built with dropout 0 has none)."
            )
        # Steps are counted from here on, not read from the optimizer at every step: on JAX its
        # variables are brought up to date only between epochs.
        self._steps_done = int(ops.convert_to_numpy(self.model.optimizer.iterations))
        self._maybe_raise()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self._steps_done

    def on_train_batch_end(self, batch, logs=None):
        self._steps_done = self._epoch_start + batch + 1  # `batch`: the epoch's last step run
        self._maybe_raise()

    def _maybe_raise(self):
        if self.raised_at is not None or self._steps_done < self.start_step:
            return
        for layer in self._layers:
            layer.rate = self.rate
        self.raised_at = self._steps_done
        self.model.make_train_function(force=True)


@contextlib.contextmanager
def dtype_policy(name):
    """Layers created inside take the Keras dtype policy `name` (e.g. "mixed_bfloat16").

    The global policy is restored on exit, so one run's precision does not leak into the next.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def base_optimizer(optimizer):
    """`optimizer` itself, or the one a `LossScaleOptimizer` wraps (under `mixed_float16`)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


@contextlib.contextmanager
def averaged_weights(model):
    """Inside, the model's trainable weights are the optimizer's moving averages of them.

    That is when the optimizer keeps them (`TrainConfig.ema_momentum > 0`); on exit the trained
    weights are put back. For scoring during training the weights that training will end with:
    `model.fit` replaces the weights with their averages when it returns (Keras's
    `finalize_variable_values`).

    Args:
        model: a compiled Keras model.

    Yields:
        True when averages were swapped in, False when the model has none (yet).
    """
    optimizer = base_optimizer(model.optimizer)
    if optimizer is None or not optimizer.use_ema or not optimizer.built:
        yield False
        return
    trained = [ops.convert_to_numpy(variable) for variable in model.trainable_weights]
    optimizer.finalize_variable_values(model.trainable_weights)
    try:
        yield True
    finally:
        for variable, value in zip(model.trainable_weights, trained):
            variable.assign(value)


def finalize_after_fit(model):
    """What `model.fit` does when it returns: weights become their moving averages, if kept."""
    model.optimizer.finalize_variable_values(model.trainable_weights)


@contextlib.contextmanager
def training_weights_kept(model):
    """Inside, `model.fit` returns with the trained weights, not their moving averages.

    For a `fit` that is not the last of a run (a resumed run finishing an interrupted epoch): the
    averages are swapped in once, when the run's last `fit` returns.
    """
    optimizer = model.optimizer
    optimizer.finalize_variable_values = lambda var_list: None  # shadows the method on this instance
    try:
        yield
    finally:
        del optimizer.finalize_variable_values


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
        if not ema_ramp >= 1:
            raise ValueError(f"`ema_ramp` must be >= 1. Received: {ema_ramp}")
        if not 0 <= cooldown < 1:
            raise ValueError(f"`cooldown` must be in [0, 1). Received: {cooldown}")
        if not cooldown_end_step >= 0:
            raise ValueError(f"`cooldown_end_step` must be >= 0. Received: {cooldown_end_step}")
        self.ema_ramp = float(ema_ramp)
        self.cooldown = float(cooldown)
        self._initial_cooldown_end_step = int(cooldown_end_step)

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
        if not step >= 0:
            raise ValueError(f"`step` must be >= 0. Received: {step}")
        self._initial_cooldown_end_step = int(step)
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
        from keras_transformer import fused_adam  # TensorFlow only

        with fused_adam.shared_step_scalars(self, learning_rate):
            return super()._backend_update_step(grads, trainable_variables, learning_rate)

    def update_step(self, gradient, variable, learning_rate):
        """Keras's Adam update; under TensorFlow one fused kernel per float32 weight (see `fused_adam`)."""
        if keras.backend.backend() == "tensorflow":
            from keras_transformer import fused_adam  # TensorFlow only

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


def compile_transformer(model, model_config, train_config):
    """`model.compile` with the paper's optimizer: Adam(0.9, 0.98, 1e-9) on the Noam schedule.

    Compiles with the masked label-smoothed loss, masked token accuracy and the target token
    count; XLA when `train_config.jit_compile`. Under `mixed_float16` Keras wraps the optimizer in
    a `LossScaleOptimizer` (the model's policy decides).

    With `train_config.ema_momentum > 0` the optimizer also keeps an exponential moving average
    of every trainable weight, `average = m^4 * average + (1 - m^4) * weight` after every fourth
    step, with `m = min(momentum, t / (t + ema_ramp))` at step `t` (see `AveragingAdam`), and
    `model.fit` ends by replacing the weights with their averages (Polyak averaging; the paper
    averages its last checkpoints to the same end).

    With `train_config.lr_cooldown > 0` the learning rate falls linearly to 0 over the run's last
    steps, that share of its `epochs * steps_per_epoch` (see `AveragingAdam`).

    Args:
        model: the Keras model to compile.
        model_config: `ModelConfig`; its `d_model` sets the schedule.
        train_config: `TrainConfig`: warmup steps, learning-rate scale and cooldown, label
            smoothing, EMA momentum and ramp, epochs and steps per epoch, `jit_compile`.

    Returns:
        `model`, compiled, with its optimizer's variables created.
    """
    schedule = NoamSchedule(model_config.d_model, train_config.warmup_steps, train_config.learning_rate_scale)
    ema = train_config.ema_momentum
    optimizer = AveragingAdam(
        schedule,
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        use_ema=ema > 0,
        ema_momentum=ema or 0.99,
        ema_ramp=train_config.ema_ramp,
        cooldown=train_config.lr_cooldown,
        cooldown_end_step=train_config.epochs * train_config.steps_per_epoch,
    )
    model.compile(
        optimizer=optimizer,
        loss=MaskedLabelSmoothedLoss(train_config.label_smoothing),
        metrics=[MaskedAccuracy(), TargetTokens()],
        jit_compile=train_config.jit_compile,
    )
    # Built here, eagerly: left to `fit`, Keras creates the optimizer's variables inside the first
    # step's trace, behind an initialization check per variable, and that trace takes twice as long.
    model.optimizer.build(model.trainable_variables)
    return model
