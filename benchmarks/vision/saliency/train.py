"""The runs of the saliency study: train one saliency model, the classifier of the gradient map, and the references.

- `train_saliency`: one encoder-decoder (`keras_transformer.vision.saliency.build_saliency_model`)
  trained with `model.fit` on the training canvases' masks (binary cross-entropy, Adam), scored
  on the validation canvases every `--eval-every` steps; the weights of the best validation max F
  (the earliest of equals) are kept: the number of steps is chosen on the validation split, never
  on the test split.
- `train_gradient_reference`: the plain CNN classifier (`keras_transformer.vision.models.
  build_classifier("none")`) trained on the labels, and its gradient saliency on the test
  canvases: |d logit_true / d image|, the maximum over channels (Simonyan, Vedaldi and Zisserman
  2014, "Deep Inside Convolutional Networks: Visualising Image Classification Models and Saliency
  Maps", https://arxiv.org/abs/1312.6034), divided by its maximum per image so that it lies in
  [0, 1] (an all-zero gradient stays 0). The gradient is TensorFlow's `GradientTape`: this module
  runs on Keras's TensorFlow backend only.
- `reference_maps`: maps that know nothing of the image: uniform (every pixel the training masks'
  mean share), and a centre prior, a Gaussian around the canvas's centre with its peak 1 and its
  width chosen on the validation split (by max F) among a few fractions of the side.
"""

import time

import keras
import numpy as np

from benchmarks.harness import timing, vision_training
from keras_transformer.vision.models import build_classifier
from keras_transformer.vision.saliency import SALIENCY_LABELS, build_saliency_model
from keras_transformer.vision.saliency_metrics import saliency_scores

CENTRE_SIGMAS = (1 / 8, 1 / 6, 1 / 4, 1 / 3)  # the centre prior's widths tried, as fractions of the side


class BestOnValidation(keras.callbacks.Callback):
    """Every `every` steps: the validation scores; keeps the weights of the best max F, restores them at the end.

    For a one-epoch `model.fit`. `points`: one per evaluation, `{"step", "validation": scores,
    "train_loss"}` (the mean training loss since the last point); `best_step`: the step kept.
    """

    def __init__(self, every, validation, batch_size=250):
        super().__init__()
        self.every, self.validation, self.batch_size = every, validation, batch_size
        self.points, self.best_step, self.best_f, self._weights, self._loss_total = [], 0, -1.0, None, 0.0

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.every:
            return
        loss_total = float(logs["loss"]) * (batch + 1)  # Keras reports the mean loss of the epoch so far
        maps = self.model.predict(self.validation.images, batch_size=self.batch_size, verbose=0)
        scores = saliency_scores(np.clip(maps, 0.0, 1.0), self.validation.masks)
        self.points.append(
            {"step": batch + 1, "validation": scores, "train_loss": (loss_total - self._loss_total) / self.every}
        )
        self._loss_total = loss_total
        if scores["max_f"] > self.best_f:
            self.best_f, self.best_step, self._weights = scores["max_f"], batch + 1, self.model.get_weights()

    def on_train_end(self, logs=None):
        if self._weights is not None:
            self.model.set_weights(self._weights)


def mask_dataset(data, batch_size, seed):
    """The canvases and their masks, shuffled with `seed` (again every pass), repeated, batched: tf.data.

    Yields `(images float32 [B, H, W, 1], masks float32 [B, H, W])`.
    """
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((data.images, data.masks.astype(np.float32)))
    dataset = dataset.shuffle(len(data), seed=seed, reshuffle_each_iteration=True).repeat()
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def train_saliency(args, attention, seed, data):
    """Build, train and score one saliency model; returns its results and its test maps.

    Args:
        args: the study's flags.
        attention: one of `SALIENCY_ATTENTIONS`.
        seed: int, the initial weights' and the batches' seed.
        data: `{"train", "validation", "test"}` of `ClutteredGlyphs`.

    Returns:
        `(result, maps)`: a dict for the JSON, and the test maps float32 `[N, H, W]`.
    """
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = build_saliency_model(attention, filters=tuple(args.filters), block=args.block)
    model.compile(keras.optimizers.Adam(vision_training.schedule_of(args)), keras.losses.BinaryCrossentropy())
    model.optimizer.build(model.trainable_variables)  # eagerly: a lazy build slows the first step's trace
    train = data["train"]
    timer, chooser = timing.StepTimer(), BestOnValidation(args.eval_every, data["validation"])
    started = time.perf_counter()
    model.fit(
        mask_dataset(train, args.batch_size, seed),
        steps_per_epoch=args.steps,
        epochs=1,
        callbacks=[timer, chooser],
        verbose=0,
        shuffle=False,
    )
    seconds = time.perf_counter() - started
    maps = np.clip(model.predict(data["test"].images, batch_size=250, verbose=0), 0.0, 1.0)
    result = {
        "model": attention,
        "label": SALIENCY_LABELS[attention],
        "seed": seed,
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "chosen_step": chooser.best_step,
        "validation_max_f_at_chosen_step": chooser.best_f,
        "curve": chooser.points,
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": seconds,
        "test": saliency_scores(maps, data["test"].masks),
    }
    return result, maps


def gradient_saliency(model, images, labels, batch_size=250):
    """|d logit_true / d image|, the maximum over channels, divided by its maximum per image: float32 `[N, H, W]`.

    Args:
        model: a classifier, images `[B, H, W, C]` -> logits `[B, K]` (Keras on TensorFlow).
        images: float32 `[N, H, W, C]`.
        labels: int `[N]`, each image's true class.
        batch_size: int, images per gradient.
    """
    import tensorflow as tf

    maps = []
    for start in range(0, len(images), batch_size):
        x = tf.constant(images[start : start + batch_size])
        y = tf.constant(labels[start : start + batch_size], tf.int32)
        with tf.GradientTape() as tape:
            tape.watch(x)
            logits = model(x, training=False)
            true_logits = tf.gather(logits, y, axis=1, batch_dims=1)  # (B,)
        gradient = tf.reduce_max(tf.abs(tape.gradient(true_logits, x)), axis=-1).numpy()  # (B, H, W)
        peak = gradient.max(axis=(1, 2), keepdims=True)
        maps.append(np.where(peak > 0, gradient / np.maximum(peak, 1e-30), 0.0).astype(np.float32))
    return np.concatenate(maps) if maps else np.zeros(images.shape[:3], np.float32)


def train_gradient_reference(args, seed, data):
    """Train the plain CNN classifier on the labels; its test accuracy and its gradient saliency's scores and maps.

    The classifier: `build_classifier("none")` with the attention study's widths (16, 32, 32),
    `--classifier-steps` steps of 64 canvases, Adam 3e-3 (the attention study's defaults).
    """
    from keras_transformer.vision.datasets import image_dataset

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    train, test = data["train"], data["test"]
    classifier = build_classifier("none", num_classes=train.num_classes).model
    vision_training.compile_adam(classifier, 3e-3)
    started = time.perf_counter()
    classifier.fit(
        image_dataset(train, 64, shuffle=True, seed=seed, repeat=True),
        steps_per_epoch=args.classifier_steps,
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    seconds = time.perf_counter() - started
    logits = classifier.predict(test.images, batch_size=250, verbose=0)
    maps = gradient_saliency(classifier, test.images, test.labels)
    result = {
        "model": "gradient",
        "label": "gradient saliency (CNN classifier)",
        "seed": seed,
        "classifier_steps": args.classifier_steps,
        "classifier_test_accuracy_percent": 100.0 * float(np.mean(logits.argmax(-1) == test.labels)),
        "train_seconds": seconds,
        "test": saliency_scores(maps, test.masks),
    }
    return result, maps


def centre_prior(size, sigma_fraction):
    """A Gaussian around the centre of a `size` x `size` canvas, peak 1, standard deviation `sigma_fraction` x size."""
    axis = np.arange(size) - (size - 1) / 2.0
    squared = axis[:, None] ** 2 + axis[None, :] ** 2
    return np.exp(-squared / (2.0 * (sigma_fraction * size) ** 2))


def reference_maps(data):
    """The uniform and centre-prior references: their test scores, the centre prior's width, and a map of each.

    Returns:
        `(results, maps)`: `{"uniform": {...}, "centre_prior": {...}}` for the JSON, and
        `{"uniform": [H, W], "centre_prior": [H, W]}`.
    """
    validation, test = data["validation"], data["test"]
    size = test.images.shape[1]
    prior = float(data["train"].masks.mean())

    def tiled(image, n):
        return np.broadcast_to(image, (n, size, size))

    chosen = max(
        CENTRE_SIGMAS,
        key=lambda s: saliency_scores(tiled(centre_prior(size, s), len(validation)), validation.masks)["max_f"],
    )
    uniform, centre = np.full((size, size), prior), centre_prior(size, chosen)
    results = {
        "uniform": {
            "model": "uniform",
            "label": "uniform map (training masks' mean)",
            "value": prior,
            "test": saliency_scores(tiled(uniform, len(test)), test.masks),
        },
        "centre_prior": {
            "model": "centre_prior",
            "label": "centre-prior Gaussian",
            "sigma_fraction_of_side": chosen,
            "sigma_fractions_tried": list(CENTRE_SIGMAS),
            "test": saliency_scores(tiled(centre, len(test)), test.masks),
        },
    }
    return results, {"uniform": uniform, "centre_prior": centre}
