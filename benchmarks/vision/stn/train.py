"""One run of the ST-CNN study: build one model (ST-CNN, identity glimpse or CNN), train it, measure it.

The models and what is measured: the study's docstring. `GlimpseCurve` adds to the validation
curve, at step 0 and at each point, the transformer's glimpses of six validation canvases and its
glimpse's centre error.
"""

import keras
import numpy as np

from benchmarks.harness import vision_training
from keras_transformer.vision.st_cnn import build_st_cnn

LABELS = {"learned": "ST-CNN", "identity": "identity glimpse", "none": "CNN, full canvas"}
SHOWN = 6  # validation canvases in the glimpse figure


class GlimpseCurve(vision_training.ValidationCurve):
    """The validation curve, and at step 0 and each point the transformer's glimpses and centre error."""

    def on_train_begin(self, logs=None):
        self.glimpses = []  # (step, [SHOWN, g, g]) pairs
        self._glimpse_point(0, {})

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if (batch + 1) % self.every == 0:
            self._glimpse_point(batch + 1, self.points[-1])

    def _glimpse_point(self, step, point):
        try:
            transformer = self.model.get_layer("spatial_transformer")
        except ValueError:
            return
        glimpse_model = keras.Model(self.model.inputs, transformer.output)
        glimpses, theta = glimpse_model.predict(self.validation.images, batch_size=250, verbose=0)
        point["centre_error_px"] = vision_training.stn_placement(theta, self.validation)["centre_error_px"]
        self.glimpses.append((step, glimpses[:SHOWN, ..., 0]))


def train_one(args, transform, seed, data, num_classes):
    """Build, train and measure one model; returns its results and, with a transformer, its glimpses."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    classifier = build_st_cnn(
        transform,
        image_size=(args.size, args.size),
        glimpse_size=(args.glimpse, args.glimpse),
        num_classes=num_classes,
        filters=tuple(args.filters),
        units=args.units,
        localization_rate=args.localization_rate,
    )
    model = classifier.model
    vision_training.compile_adam(model, vision_training.schedule_of(args))
    history, (timer, curve), seconds = vision_training.fit(args, model, seed, data, curve=GlimpseCurve)
    test = data["test"]
    result = {
        "model": transform,
        "label": LABELS[transform],
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(model.predict(test.images, 250, 0).argmax(-1) == test.labels)),
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": vision_training.forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "curve": curve.points,
    }
    final_theta = None
    if transform != "none":
        glimpse_model = keras.Model(model.inputs, model.get_layer("spatial_transformer").output)
        _, theta = glimpse_model.predict(test.images, batch_size=250, verbose=0)
        result["placement"] = vision_training.stn_placement(theta, test)
        _, final_theta = glimpse_model.predict(data["validation"].images[:SHOWN], verbose=0)
    return result, {"glimpses": curve.glimpses, "theta": final_theta}
