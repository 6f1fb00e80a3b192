"""Setting a model up for training: the precision its layers are built in, and `compile`.

`dtype_policy` sets the Keras dtype policy while a model is built; `compile_transformer` compiles
it with the paper's optimizer (Adam on the Noam schedule, as `AveragingAdam`), the masked
label-smoothed loss and the masked metrics, and attaches the packed training step (`packed`).
"""

import contextlib

import keras

from keras_transformer.training.losses import MaskedLabelSmoothedLoss
from keras_transformer.training.metrics import MaskedAccuracy, TargetTokens
from keras_transformer.training.optimizers import AveragingAdam
from keras_transformer.training.schedules import NoamSchedule


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

    Under TensorFlow, a `Transformer` is also given the packed training step
    (`keras_transformer.training.packed.attach`), which computes the logits, the loss and their
    gradients at the real target positions only; other models, and every model under another
    backend, train with Keras's step.

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
    if keras.backend.backend() == "tensorflow":  # the packed step is TensorFlow code
        from keras_transformer.training import packed

        packed.attach(model)
    return model
