"""One run of vision_attention.py: build one model, train it, and measure it on the test canvases.

The models (`keras_transformer.vision.models.build_classifier`): one small CNN of 3 blocks of
`--filters` channels, each followed by 2x2 max pooling, then global average pooling and a dense
layer. With `--block residual` (the default) each block is `relu(shortcut(x) + branch(x))`, the
branch a 3x3 convolution and the shortcut the identity, or a 1x1 convolution where the width
changes; with `--block plain` each block is the branch alone, a 3x3 convolution and a relu. The
same CNN is run without attention ("none"), with a SqueezeExcitation on each branch ("se"), a
SelectiveKernel (3x3 and 5x5 branches) instead of each branch's convolution ("sk"), a CBAM on
each branch ("cbam"), a ResidualAttention instead of each branch's convolution ("residual"), or
a SpatialTransformer in front that cuts a `--glimpse` x `--glimpse` glimpse out of the canvas
for the CNN ("stn").

Each run trains with `model.fit` (vision_attention.py's docstring gives the task, the budget and
the order of the runs).

Measured per run:
- test accuracy (%) on the `--test-size` test canvases;
- trainable parameters; FLOPs of one forward pass of one canvas, as TensorFlow's profiler counts
  them on the frozen graph (a multiply-add is 2; the STN's gathers are not counted);
- milliseconds per training step: the median over every step but the first (which traces), timed
  by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`;
- whether attention finds the object: each model's spatial map over every test canvas
  (`attention_map`: CBAM's last spatial map; the residual model's last mask, averaged over
  channels; the STN's glimpse footprint; for none, se and sk, which have no spatial attention,
  the mean of their last block's activations, as a reference), scored by its share of mass inside
  the glyph's box (`keras_transformer.vision.pointing`) against a uniform map's share (the box's
  area over the canvas's), their ratio ("lift"), and the pointing game (the map's maximum inside
  the box);
- for the STN, how well its transform undoes the placement: the glimpse's centre against the
  glyph's centre (pixels; the identity's centre, the canvas's, as the reference; and that error
  split into its mean offset `(row, column)` and the scatter around it), the glimpse's
  side over the glyph's height, and its rotation against the glyph's (the correlation, and the
  mean error against the identity's, which is the mean |angle|);
- for SE and SK, the last block's channel attention on the test canvases (SE's weight per
  channel, SK's weight per branch and channel): its mean per class (in the JSON), its range, and
  how much a weight varies across the class means against across single canvases;
- with `--curve-every N`, a learning curve: every N steps, the accuracy on `--validation-size`
  validation canvases (the task's validation split, never the test split) and the mean training
  loss over those N steps; for choosing a budget or a learning rate without looking at the test
  canvases.
"""

import time

import keras
import numpy as np

from keras_transformer.vision import models as vision_models
from keras_transformer.vision.cluttered import angle_error, theta_placement
from keras_transformer.vision.pointing import pointing_summary


class StepTimer(keras.callbacks.Callback):
    """The milliseconds of every training step of a `model.fit` (batch begin to batch end)."""

    def __init__(self):
        super().__init__()
        self.milliseconds = []
        self._start = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.milliseconds.append(1000 * (time.perf_counter() - self._start))


class ValidationCurve(keras.callbacks.Callback):
    """A learning curve: every `every` steps, accuracy on the validation split and the mean training loss.

    For a one-epoch `model.fit`. Each point: the step, the accuracy (%) on `validation`, and the
    mean training loss over the `every` steps since the last point.
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
    """FLOPs of one forward pass of one `[size, size, channels]` canvas, by TensorFlow's profiler."""
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
    """How well the STN's transforms undo the glyphs' placement (see the module docstring)."""
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


def channel_weight_summary(model, test, num_classes):
    """The last SE or SK layer's weights on the test canvases: per class, their range, their spread.

    `class_spread`: the standard deviation of a channel's (and branch's) weight across the class
    means, averaged over channels; `image_spread`: the same across single canvases. A channel
    that classes switch on and off has a class spread close to its image spread.
    """
    per_image, per_class = vision_models.channel_weights_by_class(model, test.images, test.labels, num_classes)
    return {
        "per_class": np.round(per_class, 5).tolist(),
        "min": float(per_image.min()),
        "max": float(per_image.max()),
        "class_spread": float(np.nanstd(per_class, axis=0).mean()),
        "image_spread": float(per_image.std(axis=0).mean()),
    }


def compiled_classifier(args, attention, seed, num_classes):
    """A new session seeded with `seed`, and the classifier of `attention` in it, compiled, its optimizer built."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    classifier = vision_models.build_classifier(
        attention,
        block=args.block,
        num_classes=num_classes,
        filters=tuple(args.filters),
        glimpse_size=(args.glimpse, args.glimpse),
    )
    model = classifier.model
    model.compile(
        keras.optimizers.Adam(args.learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.optimizer.build(model.trainable_variables)  # eagerly: a lazy build slows the first step's trace
    return classifier


def fit(args, model, seed, data, curve=ValidationCurve):
    """Train `model` for `--steps` steps on the training canvases, shuffled with `seed`.

    With `--curve-every`, `curve(args.curve_every, data["validation"])` records the learning curve
    (a `ValidationCurve` or a subclass that measures more at each point).

    Returns:
        `(history, callbacks, seconds)`: the `model.fit` history; the `StepTimer`, then, with
        `--curve-every`, the `ValidationCurve`; the wall seconds of the training.
    """
    from keras_transformer.vision.datasets import image_dataset

    timer = StepTimer()
    callbacks = [timer]  # the timer first: its step ends before a curve point's evaluation
    if args.curve_every:
        callbacks.append(curve(args.curve_every, data["validation"]))
    started = time.perf_counter()
    history = model.fit(
        image_dataset(data["train"], args.batch_size, shuffle=True, seed=seed, repeat=True),
        steps_per_epoch=args.steps,
        epochs=1,
        callbacks=callbacks,
        verbose=0,
        shuffle=False,
    )
    return history, callbacks, time.perf_counter() - started


def train_one(args, attention, seed, data, num_classes):
    """Build, train and measure one model; returns its results and a few test maps for the figure."""
    classifier = compiled_classifier(args, attention, seed, num_classes)
    model = classifier.model
    test = data["test"]
    history, callbacks, train_seconds = fit(args, model, seed, data)
    timer = callbacks[0]
    outputs = classifier.attention_model.predict(test.images, batch_size=250, verbose=0)
    predictions = outputs["logits"].argmax(-1)
    maps = np.maximum(outputs["attention_map"], 0.0)
    result = {
        "attention": attention,
        "seed": seed,
        "label": vision_models.LABELS[attention],
        "map_kind": vision_models.MAP_KINDS[attention],
        "num_classes": num_classes,
        "test_accuracy_percent": 100.0 * float(np.mean(predictions == test.labels)),
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "first_step_ms": float(timer.milliseconds[0]),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "pointing": pointing_summary(maps, test.boxes),
    }
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    if attention in ("se", "sk"):
        result["channel_weights"] = channel_weight_summary(model, test, num_classes)
    shown = {"maps": maps[:6]}
    if attention == "stn":
        transformer = model.get_layer("spatial_transformer")
        glimpse_model = keras.Model(model.inputs, transformer.output)
        glimpses, theta = glimpse_model.predict(test.images, batch_size=250, verbose=0)
        result["stn"] = stn_placement(theta, test)
        shown.update(glimpses=glimpses[:6, ..., 0], theta=theta[:6])
    return result, shown
