"""A vision classifier as a SavedModel: image in, class and attention map out.

TensorFlow only. `export_classifier(classifier.attention_model, path)` writes a SavedModel whose
`serving_default` signature takes a batch of images of any size and returns

    class_ids       int32 [B]               the most probable class
    probabilities   float32 [B, classes]    softmax of the logits
    attention_map   float32 [B, H, W]       the model's spatial map over the input, scaled so each
                                            sums to 1 (all zero stays zero)

The graph holds only core TensorFlow ops (the layers are `keras.ops`), so a process that imports
nothing but `tensorflow` loads and serves it: `tf.saved_model.load(path).signatures["serving_default"]`.
Like the translation export it is written beside `path` and renamed into place (no half-written
model is ever at `path`), with `checksums.sha256` of its files (`keras_transformer.export.integrity`).
"""

import os
from pathlib import Path

import tensorflow as tf

from keras_transformer.export.integrity import write_checksums
from keras_transformer.files import staging_folder


class ClassifierExport(tf.Module):
    """The serving module around a model with `{"logits", "attention_map"}` outputs.

    Args:
        attention_model: a `keras.Model` images `[B, H, W, C]` -> `{"logits": [B, K],
            "attention_map": [B, H, W]}` (`keras_transformer.vision.models.Classifier.attention_model`).
        channels: int, the images' channels C.
    """

    def __init__(self, attention_model, channels):
        super().__init__()
        self.model = attention_model
        self.serve = tf.function(
            self._serve,
            input_signature=[tf.TensorSpec([None, None, None, channels], tf.float32, name="images")],
            autograph=False,
        )

    def _serve(self, images):
        outputs = self.model(images, training=False)
        logits, attention_map = tf.cast(outputs["logits"], tf.float32), tf.cast(outputs["attention_map"], tf.float32)
        total = tf.reduce_sum(attention_map, axis=[1, 2], keepdims=True)
        return {
            "class_ids": tf.argmax(logits, axis=-1, output_type=tf.int32),
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "attention_map": tf.math.divide_no_nan(attention_map, total),
        }


def export_classifier(attention_model, path, channels=None):
    """Write the classifier's SavedModel to `path` (a new or empty folder).

    Args:
        attention_model: see `ClassifierExport`.
        path: the SavedModel's folder.
        channels: int, the images' channels; None: read from the model's input.

    Returns:
        `path` as a `pathlib.Path`.

    Raises:
        FileExistsError: `path` exists and is not an empty folder.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(f"Will not overwrite {path}: choose a new or empty folder")
    channels = attention_model.inputs[0].shape[-1] if channels is None else channels
    module = ClassifierExport(attention_model, channels)
    with staging_folder(path.parent, prefix=f".staging-{path.name}-") as staging:
        tf.saved_model.save(module, str(staging), signatures={"serving_default": module.serve})
        write_checksums(staging)
        if path.exists():
            path.rmdir()  # the empty folder asked for
        os.rename(staging, path)
    return path
