"""How the vision studies train and measure a model: one budget, one timer, one FLOP count for all.

- `add_curve_flag`: `--curve-every`, the steps between the points of `fit`'s learning curve.
- `fit`: `model.fit` for `--steps` steps of `--batch-size` training canvases, shuffled with the
  seed (again every pass), one epoch; `timing.StepTimer` times each step and, with `--curve-every`,
  `ValidationCurve` records a learning curve on the validation split (never the test split).
- `compiled_classifier`: the small CNN of `keras_transformer.vision.models.build_classifier` with
  one kind of attention, in a new session seeded with the run's seed, compiled with Adam.
- `forward_flops`: FLOPs of one forward pass of one canvas, as TensorFlow's profiler counts them.
- `stn_placement`: how well a spatial transformer's transforms undo the glyphs' placement.

The order of the runs, seed by seed, the models rotated from one seed to the next, is
`timing.run_orders`.
"""

import time

import keras
import numpy as np

from benchmarks.harness.cluttered import SCHEDULE_DECAYS
from benchmarks.harness.timing import StepTimer
from keras_transformer.vision import models as vision_models
from keras_transformer.vision.cluttered import angle_error, theta_placement

# `--curve-every` where the curve is optional: none by default, and without one no validation canvases.
CURVE_HELP = (
    "Every this many steps, each run's accuracy on the validation canvases and its mean training loss since the "
    "last point (a learning curve); 0: no curves and no validation canvases."
)


def add_curve_flag(parser, default=0, help=CURVE_HELP):
    """Add `--curve-every`, the steps between two points of `fit`'s learning curve (`ValidationCurve`; 0: none).

    Args:
        parser: the study's parser.
        default: the default steps between two points.
        help: the flag's help.
    """
    parser.add_argument("--curve-every", type=int, default=default, help=help)


class ValidationCurve(keras.callbacks.Callback):
    """A learning curve: every `every` steps, accuracy on the validation split and the mean training loss.

    For a one-epoch `model.fit`. Each point: the step, the accuracy (%) on `validation`, and the
    mean training loss over the `every` steps since the last point.

    Args:
        every: int, the steps between points.
        validation: the validation `ClutteredGlyphs`.
    """

    def __init__(self, every, validation):
        super().__init__()
        self.every, self.validation = every, validation
        self.points, self._loss_total = [], 0.0

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.every:
            return
        loss_total = float(logs["loss"]) * (batch + 1)  # Keras reports the mean loss of the epoch so far
        logits = self.model.predict(self.validation.images, batch_size=250, verbose=0)
        logits = logits["logits"] if isinstance(logits, dict) else logits  # models with several outputs
        self.points.append(
            {
                "step": batch + 1,
                "validation_accuracy_percent": 100.0 * float(np.mean(logits.argmax(-1) == self.validation.labels)),
                "train_loss": (loss_total - self._loss_total) / self.every,
            }
        )
        self._loss_total = loss_total


def forward_flops(model, size, channels=1):
    """FLOPs of one forward pass of one `[size, size, channels]` canvas, by TensorFlow's profiler.

    Counted on the frozen graph: a multiply-add is 2 FLOPs; gathers (a spatial transformer's
    sampler) are not counted.

    Args:
        model: a callable model, images `[B, size, size, channels]` -> outputs.
        size: int, the canvas side.
        channels: int, the canvas's channels.

    Returns:
        int, the profiler's count of floating-point operations.
    """
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    spec = tf.TensorSpec([1, size, size, channels], tf.float32)
    frozen = convert_variables_to_constants_v2(
        tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    )
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    return int(tf.compat.v1.profiler.profile(graph=frozen.graph, options=options).total_float_ops)


def stn_placement(theta, test):
    """How well a spatial transformer's transforms undo the glyphs' placement on the test canvases.

    Args:
        theta: float `[N, 2, 3]`, the transforms (glimpse to canvas coordinates).
        test: the test `ClutteredGlyphs`.

    Returns:
        A dict: the glimpse's centre against the glyph's (pixels; the identity's centre, the
        canvas's, as the reference; that error split into its mean offset `(row, column)` and
        the scatter around it), the glimpse's side over the glyph's height (the median; and the
        identity's), and its rotation against the glyph's (the correlation, and the mean error
        against the identity's, which is the mean |angle|).
    """
    size = test.images.shape[1]
    centres, sides, angles = theta_placement(theta, size)
    offsets = centres - test.centres  # (N, 2), glimpse centre minus glyph centre, as (row, column)
    centre_error = np.linalg.norm(offsets, axis=1)
    identity_error = np.linalg.norm(test.centres - (size - 1) / 2.0, axis=1)
    correlation = float(np.corrcoef(angles, test.angles)[0, 1]) if np.std(angles) > 0 else 0.0
    return {
        "centre_error_px": float(centre_error.mean()),
        "centre_mean_offset_px": offsets.mean(axis=0).tolist(),
        "centre_scatter_px": float(np.linalg.norm(offsets - offsets.mean(axis=0), axis=1).mean()),
        "identity_centre_error_px": float(identity_error.mean()),
        "side_over_glyph_height": float(np.median(sides / test.heights)),
        "identity_side_over_glyph_height": float(np.median(size / test.heights)),
        "angle_correlation": correlation,
        "angle_error_degrees": float(np.degrees(angle_error(angles, test.angles)).mean()),
        "identity_angle_error_degrees": float(np.degrees(np.abs(test.angles)).mean()),
    }


def learning_rate_schedule(learning_rate, steps=0, warmup_steps=0, decay="none"):
    """Adam's learning rate over the run: `learning_rate` itself, or a warm-up and a cosine decay.

    Args:
        learning_rate: float, the rate (the peak of a schedule).
        steps: int, the run's training steps (used by `decay="cosine"`).
        warmup_steps: int, steps of a linear rise from 0 to `learning_rate` (0: none).
        decay: `"none"` (constant after the warm-up) or `"cosine"` (a cosine fall from
            `learning_rate` to 0 at step `steps`).

    Returns:
        The float itself when there is neither warm-up nor decay; otherwise a
        `keras.optimizers.schedules.CosineDecay`.
    """
    if decay not in SCHEDULE_DECAYS:
        raise ValueError(f"`decay` must be 'none' or 'cosine'. Received: {decay!r}")
    if not warmup_steps and decay == "none":
        return learning_rate
    if decay == "cosine" and not 0 <= warmup_steps < steps:
        raise ValueError(f"A cosine decay needs 0 <= warmup_steps < steps. Received: {warmup_steps}, {steps}")
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warmup_steps else learning_rate,
        decay_steps=max(steps - warmup_steps, 1) if decay == "cosine" else 1,
        alpha=0.0 if decay == "cosine" else 1.0,  # alpha 1: the decay leaves the rate where the warm-up left it
        warmup_target=learning_rate if warmup_steps else None,
        warmup_steps=warmup_steps,
    )


def schedule_of(args):
    """`learning_rate_schedule` of the flags `--adam-learning-rate`, `--steps`, `--warmup-steps`, `--decay`."""
    return learning_rate_schedule(args.learning_rate, args.steps, args.warmup_steps, args.decay)


def compile_adam(model, learning_rate):
    """Compile `model` for classification (logits, integer labels) with Adam, and build its optimizer eagerly.

    A lazy build would slow the first step's trace (and the step timer's first step with it).

    Args:
        model: a Keras classifier whose outputs are logits.
        learning_rate: Adam's learning rate: a float, or a schedule (`learning_rate_schedule`).
    """
    model.compile(
        keras.optimizers.Adam(learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.optimizer.build(model.trainable_variables)


def compiled_classifier(args, attention, seed, num_classes):
    """A new session seeded with `seed`, and the classifier of `attention` in it, compiled, its optimizer built.

    Args:
        args: the flags: `--block`, `--filters`, `--batch-norm`, `--glimpse` (the STN's glimpse side),
            `--adam-learning-rate` and its schedule (`schedule_of`).
        attention: one of `keras_transformer.vision.models.ATTENTIONS`.
        seed: int, the initial weights' seed.
        num_classes: int, the task's classes.

    Returns:
        The `build_classifier` result (`.model`, `.attention_model`).
    """
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    classifier = vision_models.build_classifier(
        attention,
        block=args.block,
        num_classes=num_classes,
        filters=tuple(args.filters),
        glimpse_size=(args.glimpse, args.glimpse),
        image_size=(args.size, args.size),  # only the ViT needs it
        batch_norm=args.batch_norm and attention != "vit",
    )
    compile_adam(classifier.model, schedule_of(args))
    return classifier


def fit(args, model, seed, data, curve=ValidationCurve, train=None):
    """Train `model` for `--steps` steps on the training canvases, shuffled with `seed`.

    Args:
        args: the flags: `--steps`, `--batch-size`, and `--curve-every` (0: no curve) where the study has it.
        model: the compiled model.
        seed: int, the batches' shuffling seed.
        data: `{"train", "validation", "test"}` of `ClutteredGlyphs` (the validation split with a curve only).
        curve: the callback of the learning curve, `curve(args.curve_every, data["validation"])`: a
            `ValidationCurve` or a subclass that measures more at each point.
        train: None (batches of `data["train"]`, shuffled with `seed`, reshuffled every pass), or
            an endless `tf.data.Dataset` of `(images, labels)` batches to train on instead (fresh
            canvases: `keras_transformer.vision.datasets.fresh_canvas_dataset`).

    Returns:
        `(history, callbacks, seconds)`: the `model.fit` history; the `StepTimer`, then, with
        `--curve-every`, the curve; the wall seconds of the training.
    """
    from keras_transformer.vision.datasets import image_dataset

    timer = StepTimer()
    callbacks = [timer]  # the timer first: its step ends before a curve point's evaluation
    if getattr(args, "curve_every", 0):
        callbacks.append(curve(args.curve_every, data["validation"]))
    started = time.perf_counter()
    if train is None:
        train = image_dataset(data["train"], args.batch_size, shuffle=True, seed=seed, repeat=True)
    history = model.fit(
        train,
        steps_per_epoch=args.steps,
        epochs=1,
        callbacks=callbacks,
        verbose=0,
        shuffle=False,
    )
    return history, callbacks, time.perf_counter() - started
