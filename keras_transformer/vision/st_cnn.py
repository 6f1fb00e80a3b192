"""The ST-CNN of the Spatial Transformer paper's cluttered MNIST, and its two controls.

Jaderberg, Simonyan, Zisserman and Kavukcuoglu 2015, "Spatial Transformer Networks"
(https://arxiv.org/abs/1506.02025), section 4.1: a spatial transformer in front of a plain CNN
whose glimpse is smaller than the canvas, so that it must zoom in on the digit to read it at full
resolution, and move to where the digit is to keep it in view. `build_st_cnn(transform=...)`
builds the same CNN behind three front ends, through the one spatial-transformer classifier
builder (`keras_transformer.vision.models.build_stn_classifier`, its dense head on plain blocks):

    images [B, H, W, C]                                 a fixed size, `image_size`
      "learned":  SpatialTransformer(localization="convolutional") -> glimpse [B, g, g, C]
      "identity": the same, its transform frozen at the identity: the whole canvas, resampled to
                  g x g (what the STN starts from)
      "none":     no transformer: the whole canvas at full resolution [B, H, W, C]
      per filter count f_i: conv_3x3(f_i), relu, max_pool_2x2   (block_i_conv, block_i_pool)
      flatten -> Dense(units), relu -> Dense(classes)   logits [B, classes]

The head is dense, as the paper's, not a global pooling: the classifier cares where in its input
the object lies, so the glimpse's position matters to it (a pooling head reads a glyph anywhere and
gives the transform no reason to move). The spatial map (`attention_map`) is the glimpse's
footprint on the canvas (`keras_transformer.vision.models.GlimpseFootprint`): the whole canvas for
"identity" and "none".
"""

from keras_transformer.checks import check_choice
from keras_transformer.vision.models import TRANSFORMS, build_stn_classifier  # TRANSFORMS: the front ends


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
    check_choice("transform", transform, TRANSFORMS)
    return build_stn_classifier(
        "dense",
        transform,
        block="plain",
        image_size=image_size,
        glimpse_size=glimpse_size,
        localization="convolutional",
        localization_rate=localization_rate,
        num_classes=num_classes,
        channels=channels,
        filters=filters,
        units=units,
        name={"learned": "st_cnn", "identity": "st_cnn_identity", "none": "cnn"}[transform],
    )
