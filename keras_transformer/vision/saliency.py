"""Salient-object detection: an encoder-decoder that maps an image to the probability that each pixel is the object.

`build_saliency_model(attention=...)` builds one small U-shaped network (an encoder that
downsamples three times, a decoder that upsamples back with a skip connection from the encoder
at every level; Ronneberger, Fischer and Brox 2015, "U-Net: Convolutional Networks for
Biomedical Image Segmentation", https://arxiv.org/abs/1505.04597), plain or with an attention
of `keras_transformer.vision.mixed` in each decoder block (`SALIENCY_ATTENTIONS`), so that they
can be compared at equal depth:

    images [B, H, W, C]                                       any H, W (odd, or not divisible by 8)
      encoder, stage i = 1, 2, 3 (filters f_i):
        e_1 = relu(conv_3x3(images))                          [B, H, W, f_1]
        e_i = relu(conv_3x3(max_pool_2x2(e_{i-1})))           [B, ceil(H/2^(i-1)), ..., f_i]
      bottleneck:
        x = relu(conv_3x3(max_pool_2x2(e_3)))                 [B, ceil(H/8), ceil(W/8), f_3]
      decoder, stage i = 3, 2, 1, input x and the skip e_i [B, h_i, w_i, f_i]:
        x = concat(up(x), e_i)                                up: nearest x2, cut to h_i x w_i
        f = relu(conv_3x3(x))                                 [B, h_i, w_i, f_i], the fusion
        plain block (block="plain", the default):
          x = relu(conv_3x3(f))                               "none"
              CBAM(relu(conv_3x3(f)))                         "cbam": channel, then spatial attention
              ResidualAttention(f_i)(f)                       "residual": (1 + M(f)) * relu(conv_3x3(f))
        residual block (block="residual"):
          branch = conv_3x3(f)                                "none", no activation
                   CBAM(conv_3x3(f))                          "cbam"
                   ResidualAttention(f_i)(f)                  "residual"
          x = relu(f + branch)
      saliency = sigmoid(conv_1x1(x))[..., 0]                 [B, H, W], each value in (0, 1)

Pooling rounds up (`padding="same"`), and each upsampling is cut to the size of the skip it is
joined with, so every size comes back to exactly H x W, without padding or resizing the image.

The attention sits where the decoder decides which of the fused features mark the object:
after the fusion of the coarse, wide-context features with the skip's fine ones. CBAM (Woo et
al. 2018, https://arxiv.org/abs/1807.06521) reweights the channels, then the positions;
residual attention (Wang et al. 2017, https://arxiv.org/abs/1704.06904) replaces the block's
second convolution by its trunk and hourglass mask. In the plain block the attention's gates
(about 0.5 at initialization) scale everything the block passes on; in the residual block they
sit on the residual branch, before the addition, where the CBAM and residual-attention papers
put them (as `keras_transformer.vision.models.build_classifier`'s residual blocks), so a gate
near 0 damps only the branch. The salient-object-detection networks that
use attention this way (e.g. Zhang et al. 2018, "Progressive Attention Guided Recurrent Network
for Salient Object Detection"; Liu, Han and Yang 2018, "PiCANet") put it in the decoder too.

Deviations: U-Net's stages have two convolutions each (here the encoder's have one), no
padding (so its output is smaller than its input; here `same` padding keeps H x W) and learned
upsampling (here nearest neighbour); there is no batch normalization.

Train on binary masks `[B, H, W]` with `keras.losses.BinaryCrossentropy()`: the output is a
sigmoid, which Keras's TensorFlow backend reads back as logits for a stable loss. The metrics of
the task are in `keras_transformer.vision.saliency_metrics`.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_ints
from keras_transformer.vision.mixed import CBAM, ResidualAttention, upsample_to

SALIENCY_ATTENTIONS = ("none", "cbam", "residual")
SALIENCY_BLOCKS = ("plain", "residual")
SALIENCY_LABELS = {"none": "encoder-decoder", "cbam": "+ CBAM", "residual": "+ residual attention"}


@keras.saving.register_keras_serializable(package="keras_transformer")
class UpsampleToSkip(keras.layers.Layer):
    """Nearest-neighbour upsampling by 2 of `x [B, h, w, C]`, cut to the size of `skip [B, H, W, C']`: `[B, H, W, C]`.

    Output row i reads row `i // 2` of `x` (`keras_transformer.vision.mixed.upsample_to`), so a
    map pooled from an odd size (`ceil(H / 2)` rows) comes back to exactly H rows.
    """

    def call(self, x, skip):
        shape = ops.shape(skip)
        return upsample_to(x, shape[1], shape[2])


@keras.saving.register_keras_serializable(package="keras_transformer")
class SqueezeChannel(keras.layers.Layer):
    """`[B, H, W, 1]` -> `[B, H, W]`: drops the last axis of a one-channel map."""

    def call(self, x):
        return x[..., 0]


def _conv(filters, name, size=3, activation="relu"):
    return keras.layers.Conv2D(filters, size, padding="same", activation=activation, name=name)


def build_saliency_model(
    attention="none", filters=(16, 32, 64), channels=1, reduction=16, spatial_kernel_size=7, block="plain"
):
    """The encoder-decoder of salient-object detection, plain or with attention in its decoder.

    Args:
        attention: one of `SALIENCY_ATTENTIONS`: `"none"`, `"cbam"` (a `CBAM` after each decoder
            block's second convolution), `"residual"` (a `ResidualAttention` instead of it).
        filters: three positive ints `(f_1, f_2, f_3)`, the channels of the encoder's stages from
            the finest, and of the decoder's blocks at the same levels (the bottleneck has f_3).
        channels: int, the images' channels C.
        reduction: int, CBAM's channel-MLP reduction ratio (the paper's 16; at least 8 hidden
            units, never more than the channels).
        spatial_kernel_size: odd int, CBAM's spatial convolution (the paper's 7).
        block: one of `SALIENCY_BLOCKS`: `"plain"`, each decoder block's output the attended
            features, or `"residual"`, `relu(f + branch)` with the attention on the branch (the
            module docstring draws both).

    Returns:
        `keras.Model`, images `[B, H, W, C]` of any height and width -> saliency `[B, H, W]`,
        the probability that each pixel belongs to the salient object.

    Raises:
        ValueError: an unknown `attention` or `block`, or `filters` not three positive ints.
    """
    check_choice("attention", attention, SALIENCY_ATTENTIONS)
    check_choice("block", block, SALIENCY_BLOCKS)
    filters = check_ints("filters", filters, 1, length=3)  # one per stage
    images = keras.Input((None, None, channels), name="images")
    skips, x = [], images
    for i, width in enumerate(filters, start=1):
        if i > 1:
            x = keras.layers.MaxPooling2D(2, padding="same", name=f"encoder_{i}_pool")(x)
        x = _conv(width, f"encoder_{i}_conv")(x)
        skips.append(x)
    x = keras.layers.MaxPooling2D(2, padding="same", name="bottleneck_pool")(x)
    x = _conv(filters[-1], "bottleneck_conv")(x)  # (B, ceil(H/8), ceil(W/8), f_3)
    for i in (3, 2, 1):
        width, skip = filters[i - 1], skips[i - 1]
        x = UpsampleToSkip(name=f"decoder_{i}_up")(x, skip)
        x = keras.layers.Concatenate(name=f"decoder_{i}_concat")([x, skip])
        fused = _conv(width, f"decoder_{i}_fuse")(x)
        if attention == "residual":
            x = ResidualAttention(width, name=f"decoder_{i}_residual_attention")(fused)
        else:
            activation = "relu" if block == "plain" else None  # residual: the relu comes after the addition
            x = _conv(width, f"decoder_{i}_conv", activation=activation)(fused)
            if attention == "cbam":
                x = CBAM(reduction, spatial_kernel_size, name=f"decoder_{i}_cbam")(x)
        if block == "residual":
            x = keras.layers.Add(name=f"decoder_{i}_add")([fused, x])
            x = keras.layers.ReLU(name=f"decoder_{i}_relu")(x)
    logits = _conv(1, "logits", size=1, activation=None)(x)  # (B, H, W, 1)
    saliency = keras.layers.Activation("sigmoid", name="saliency")(SqueezeChannel(name="squeeze")(logits))
    name = f"saliency_{attention}" if block == "plain" else f"saliency_{attention}_residual_blocks"
    return keras.Model(images, saliency, name=name)
