"""The ST-CNN of the Spatial Transformer paper's cluttered MNIST, and its two controls.

Jaderberg, Simonyan, Zisserman and Kavukcuoglu 2015, "Spatial Transformer Networks"
(https://arxiv.org/abs/1506.02025), section 4.1: a spatial transformer in front of a plain CNN
whose glimpse is smaller than the canvas, so that it must zoom in on the digit to read it at full
resolution, and move to where the digit is to keep it in view. `build_st_cnn(transform=...)`
builds the same CNN behind three front ends:

    images [B, H, W, C]                                 a fixed size, `image_size`
      "learned":  SpatialTransformer(localization="convolutional") -> glimpse [B, g, g, C]
      "identity": the same, its transform frozen at the identity: the whole canvas, resampled to
                  g x g (what the STN starts from)
      "none":     no transformer: the whole canvas at full resolution [B, H, W, C]
      per filter count f_i: conv_3x3(f_i), relu, max_pool_2x2
      flatten -> Dense(units), relu -> Dense(classes)   logits [B, classes]

The head is dense, as the paper's, not a global pooling: the classifier cares where in its input
the object lies, so the glimpse's position matters to it (a pooling head reads a glyph anywhere and
gives the transform no reason to move). The spatial map (`attention_map`) is the glimpse's
footprint on the canvas (`keras_transformer.vision.models.GlimpseFootprint`): the whole canvas for
"identity" and "none".
"""

import keras
from keras import ops

from keras_transformer.vision.dynamic_capacity import _check_int, _check_widths
from keras_transformer.vision.models import Classifier, GlimpseFootprint
from keras_transformer.vision.spatial import SpatialTransformer

TRANSFORMS = ("learned", "identity", "none")


def _check_size(name, value):
    """`value` as `(height, width)`, two positive ints; a `ValueError` naming the argument and the value otherwise."""
    size = _check_widths(name, value)
    if len(size) != 2:
        raise ValueError(f"`{name}` must be (height, width), two positive ints. Received: {name}={value!r}")
    return size


def build_st_cnn(
    transform="learned",
    image_size=(60, 60),
    glimpse_size=(12, 12),
    num_classes=10,
    channels=1,
    filters=(32, 32),
    units=256,
    localization_rate=0.1,
):
    """The ST-CNN (`transform="learned"`) or one of its controls, and the glimpse's footprint.

    Args:
        transform: one of `TRANSFORMS`: `"learned"` (a spatial transformer with the paper's
            convolutional localisation net), `"identity"` (the same, frozen at the identity), or
            `"none"` (the CNN alone on the full canvas).
        image_size: `(height, width)`, the canvas size the model takes (its localisation net and
            its dense head are built for it).
        glimpse_size: `(height, width)` of the transformer's output (not `"none"`).
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.
        filters: tuple of ints, the channels of the CNN's 3x3 convolutions, each followed by a
            relu and 2x2 max pooling.
        units: int, the width of the dense hidden layer.
        localization_rate: float in (0, 1], `SpatialTransformer`'s rate (`"learned"` only).

    Returns:
        A `keras_transformer.vision.models.Classifier(model, attention_model)`: images
        `[B, height, width, channels]` -> logits `[B, classes]`, and `{"logits", "attention_map"
        [B, height, width]}`. With a transformer, its layer is named `"spatial_transformer"`.

    Raises:
        ValueError: an unknown `transform`, or sizes, filters or units that are not positive ints.
    """
    if transform not in TRANSFORMS:
        raise ValueError(f"`transform` must be one of {TRANSFORMS}. Received: transform={transform!r}")
    height, width = _check_size("image_size", image_size)
    glimpse_size = _check_size("glimpse_size", glimpse_size)
    filters = _check_widths("filters", filters)
    units = _check_int("units", units)
    images = keras.Input((height, width, channels), name="images")
    x, theta = images, None
    if transform != "none":
        transformer = SpatialTransformer(
            output_size=glimpse_size,
            localization="convolutional",
            localization_rate=localization_rate,
            name="spatial_transformer",
        )
        x, theta = transformer(x, return_attention_scores=True)
        transformer.trainable = transform == "learned"  # after the call: its sublayers exist once built
    for i, width_i in enumerate(filters, start=1):
        x = keras.layers.Conv2D(width_i, 3, padding="same", activation="relu", name=f"conv_{i}")(x)
        x = keras.layers.MaxPooling2D(2, padding="same", name=f"pool_{i}")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(units, activation="relu", name="hidden")(x)
    logits = keras.layers.Dense(num_classes, name="logits")(x)
    if theta is None:  # the CNN reads every pixel
        attention_map = ops.ones_like(images[..., 0])
    else:
        attention_map = GlimpseFootprint(name="attention_map")(theta, images)
    name = {"learned": "st_cnn", "identity": "st_cnn_identity", "none": "cnn"}[transform]
    model = keras.Model(images, logits, name=name)
    attention_model = keras.Model(images, {"logits": logits, "attention_map": attention_map}, name=f"{name}_with_map")
    return Classifier(model, attention_model)
