"""Mixed attention: channel and spatial attention together.

- `CBAM`: channel attention, then spatial attention, in sequence (Woo et al. 2018).
- `ResidualAttention`: a soft mask over every position and channel, applied as `(1 + M(x)) * T(x)`
  (Wang et al. 2017).
"""

import functools

import keras
from keras import ops

from keras_transformer.checks import check_int
from keras_transformer.vision.channel import ChannelAttention, channels_of
from keras_transformer.vision.normalized import linear_unit
from keras_transformer.vision.spatial import SpatialAttention


@keras.saving.register_keras_serializable(package="keras_transformer")
class CBAM(keras.layers.Layer):
    """Convolutional Block Attention Module: channel attention, then spatial attention.

    Woo, Park, Lee and Kweon 2018, "CBAM: Convolutional Block Attention Module"
    (https://arxiv.org/abs/1807.06521), section 3, equation (1):

        x' = M_c(x) * x          `ChannelAttention`: what to look for
        x'' = M_s(x') * x'       `SpatialAttention`: where, from the refined features

    The paper found this order (channel first) better than spatial first or both in parallel.

    Args:
        reduction: int r >= 1, the channel MLP's reduction ratio (the paper's 16).
        kernel_size: odd int, the spatial convolution's size (the paper's 7).
        min_units: int >= 1, the channel MLP's smallest hidden width (`ChannelAttention`).
        batch_norm: bool, batch normalization between the spatial convolution and its sigmoid, as
            in the paper's reference code (`SpatialAttention`).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, channels]`.
        return_attention_scores: bool; if True, also return both attentions.
        training: bool or None, the batch normalization's mode (`batch_norm=True` only).

    Returns:
        float tensor `[batch, height, width, channels]`; and, if requested, a dict
        `{"channel": [batch, channels], "spatial": [batch, height, width, 1]}`.

    Example:
    >>> cbam = CBAM(reduction=2, kernel_size=3)
    >>> outputs, attention = cbam(np.ones((2, 7, 5, 4), "float32"), return_attention_scores=True)
    >>> tuple(attention["channel"].shape), tuple(attention["spatial"].shape)
    ((2, 4), (2, 7, 5, 1))
    """

    def __init__(self, reduction=16, kernel_size=7, min_units=8, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        self.reduction = check_int("reduction", reduction, 1)
        self.kernel_size = kernel_size
        self.min_units = check_int("min_units", min_units, 1)
        self.batch_norm = bool(batch_norm)
        self.channel_attention = ChannelAttention(
            reduction, min_units, dtype=self.dtype_policy, name="channel_attention"
        )
        self.spatial_attention = SpatialAttention(
            kernel_size, batch_norm=batch_norm, dtype=self.dtype_policy, name="spatial_attention"
        )

    def build(self, input_shape):
        channels_of(input_shape, "CBAM")
        self.channel_attention.build(input_shape)
        self.spatial_attention.build(input_shape)

    def call(self, inputs, return_attention_scores=False, training=None):
        # (B, H, W, C) and (B, C), then (B, H, W, C) and (B, H, W, 1):
        refined, channel_weights = self.channel_attention(inputs, return_attention_scores=True)
        outputs, spatial_map = self.spatial_attention(refined, return_attention_scores=True, training=training)
        if return_attention_scores:
            return outputs, {"channel": channel_weights, "spatial": spatial_map}
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "reduction": self.reduction,
                "kernel_size": self.kernel_size,
                "min_units": self.min_units,
                "batch_norm": self.batch_norm,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Configs saved before `min_units` existed had the hidden width max(1, C // reduction).
        return cls(**{"min_units": 1, **config})


def upsample_to(x, height, width):
    """Nearest-neighbour upsampling by 2 of `x [B, h, w, C]`, cut to `[B, height, width, C]`.

    Output row i reads row `i // 2`, so an odd `height` (pooled to `ceil(height / 2)` rows) comes
    back to exactly `height` rows.
    """
    x = ops.take(x, ops.arange(height) // 2, axis=1)  # (B, H, w, C)
    return ops.take(x, ops.arange(width) // 2, axis=2)  # (B, H, W, C)


@keras.saving.register_keras_serializable(package="keras_transformer")
class ResidualAttention(keras.layers.Layer):
    """Residual attention: a trunk branch, an hourglass mask branch, and `(1 + M(x)) * T(x)`.

    Wang et al. 2017, "Residual Attention Network for Image Classification"
    (https://arxiv.org/abs/1704.06904), section 3: an attention module has a trunk branch T that
    processes the features and a soft mask branch M, in (0, 1) at every position and channel
    (mixed attention). The mask branch is a small hourglass (bottom-up, top-down): it pools twice
    to see a wide context, comes back up with a skip connection from the level in between, and
    ends in two 1x1 convolutions and a sigmoid:

        T(x)  = relu(conv_3x3(x))                              trunk, (B, H, W, C)
        d1    = relu(conv_3x3(max_pool_2x2(x)))                down, (B, H/2, W/2, C)
        d2    = relu(conv_3x3(max_pool_2x2(d1)))               down, (B, H/4, W/4, C)
        u1    = relu(conv_3x3(up(d2) + d1))                    up, with the skip connection, (B, H/2, W/2, C)
        M(x)  = sigmoid(conv_1x1(relu(conv_1x1(up(u1)))))      up, two 1x1 convolutions, (B, H, W, C)
        outputs = (1 + M(x)) * T(x)                            attention residual learning

    With plain `M * T` stacked modules would multiply masks below 1 together and fade the
    features; with `1 + M` a mask near 0 leaves the trunk's features as they are (an identity,
    as in residual learning) and the mask can only emphasize.

    Deviation: the paper's trunk and mask branches are stacks of pre-activation residual units
    with batch normalization, its upsampling is bilinear and its deepest module pools three
    times; here each level is one convolution, `up` is nearest-neighbour (cut to the size it
    returns to, so odd sizes work), and the hourglass is two levels deep. With `batch_norm=True`
    every convolution but the mask's last is followed by batch normalization before its relu
    (`keras_transformer.vision.normalized`); the last one's logits go to the sigmoid as they are.

    Args:
        filters: int C, the output channels of the trunk and of the mask.
        batch_norm: bool, batch normalization after the trunk's and the mask's convolutions.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, input channels]`.
        return_attention_scores: bool; if True, also return the mask `M(x)`.
        training: bool or None, the batch normalization's mode (`batch_norm=True` only).

    Returns:
        float tensor `[batch, height, width, filters]`; and the mask `[batch, height, width,
        filters]`, each value in (0, 1), if requested.

    Example:
    >>> block = ResidualAttention(filters=8)
    >>> outputs, mask = block(np.ones((1, 7, 9, 3), "float32"), return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(mask.shape)
    ((1, 7, 9, 8), (1, 7, 9, 8))
    """

    def __init__(self, filters, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        check_int("filters", filters, 1)
        self.filters = filters
        self.batch_norm = bool(batch_norm)

    def _conv(self, size, activation, name, input_channels, batch_norm=None):
        conv = functools.partial(keras.layers.Conv2D, self.filters, size, padding="same", dtype=self.dtype_policy)
        batch_norm = self.batch_norm if batch_norm is None else batch_norm
        return linear_unit(conv, activation, batch_norm, (None, None, None, input_channels), name, self.dtype_policy)

    def build(self, input_shape):
        channels = channels_of(input_shape, "ResidualAttention")
        self.trunk_conv = self._conv(3, "relu", "trunk", channels)
        self.mask_pool = keras.layers.MaxPooling2D(2, padding="same", dtype=self.dtype_policy, name="mask_pool")
        self.down_conv = self._conv(3, "relu", "mask_down_1", channels)
        self.bottom_conv = self._conv(3, "relu", "mask_down_2", self.filters)
        self.up_conv = self._conv(3, "relu", "mask_up_1", self.filters)
        self.mask_hidden_conv = self._conv(1, "relu", "mask_hidden", self.filters)
        self.mask_output_conv = self._conv(1, "sigmoid", "mask_output", self.filters, batch_norm=False)

    def call(self, inputs, return_attention_scores=False, training=None):
        shape = ops.shape(inputs)
        trunk = self.trunk_conv(inputs, training=training)  # (B, H, W, C)
        down = self.down_conv(self.mask_pool(inputs), training=training)  # (B, ceil(H/2), ceil(W/2), C)
        bottom = self.bottom_conv(self.mask_pool(down), training=training)  # (B, ceil(H/4), ceil(W/4), C)
        down_shape = ops.shape(down)
        up = self.up_conv(upsample_to(bottom, down_shape[1], down_shape[2]) + down, training=training)  # skip
        hidden = self.mask_hidden_conv(upsample_to(up, shape[1], shape[2]), training=training)
        mask = self.mask_output_conv(hidden)  # (B, H, W, C)
        outputs = (1.0 + mask) * trunk  # (B, H, W, C)
        return (outputs, mask) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update({"filters": self.filters, "batch_norm": self.batch_norm})
        return config
