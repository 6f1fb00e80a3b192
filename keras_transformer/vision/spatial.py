"""Spatial attention: where in the image to look.

Two ways to say where:

    SpatialAttention     a soft map: a weight in (0, 1) per position, from the channel-wise mean
                         and max maps through a convolution (CBAM's spatial half, Woo et al. 2018)
    SpatialTransformer   a hard glimpse: an affine transform chosen per image, and the image
                         resampled through it, so the object comes out centred and upright
                         (Jaderberg et al. 2015)

Coordinates: `affine_grid` and `bilinear_sample` use normalized coordinates, x from -1 (the
centre of the left column) to +1 (the centre of the right column), y likewise from the top row
to the bottom row, whatever the size. Pixel column j of a width-W image is at
`x = 2 j / (W - 1) - 1` (x = 0 when W = 1).
"""

import functools

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_ints, check_rate
from keras_transformer.vision.channel import channels_of
from keras_transformer.vision.normalized import linear_unit

# The identity transform's six parameters, row by row: [[1, 0, 0], [0, 1, 0]].
IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

# SpatialTransformer's localisation nets (its docstring describes each), and each one's default
# `(localization_filters, localization_units)`: the convolutional net's are the paper's.
LOCALIZATIONS = ("pooled", "convolutional")
LOCALIZATION_DEFAULTS = {"pooled": ((8, 16), 32), "convolutional": ((20, 20), 50)}


def normalized_coordinates(size, dtype="float32"):
    """The normalized coordinates of `size` pixel centres along one axis: -1 ... +1 (0 for a single pixel).

    Args:
        size: int or scalar int tensor, the number of pixels.
        dtype: float dtype of the result.

    Returns:
        float tensor `[size]`: `2 j / (size - 1) - 1` for j = 0 .. size - 1.
    """
    positions = ops.cast(ops.arange(size), dtype)
    last = ops.cast(ops.maximum(size - 1, 1), dtype)
    return 2.0 * positions / last - ops.cast(ops.minimum(size - 1, 1), dtype)


def affine_grid(theta, height, width):
    """The grid generator: where each output pixel samples the input, under an affine transform.

    Jaderberg et al. 2015, section 3.2, equation (1): an output pixel at normalized `(x_t, y_t)`
    reads the input at

        (x_s, y_s) = theta @ (x_t, y_t, 1)

    Args:
        theta: float tensor `[batch, 2, 3]`, the transform from output to input coordinates.
        height: int (or scalar int tensor), the output height.
        width: int (or scalar int tensor), the output width.

    Returns:
        `(x, y)`, float tensors `[batch, height, width]`: the normalized input coordinates each
        output pixel samples.
    """
    theta = ops.cast(theta, "float32")
    xs = normalized_coordinates(width)  # (W,)
    ys = normalized_coordinates(height)  # (H,)
    grid_x = ops.broadcast_to(xs[None, :], (height, width))  # (H, W)
    grid_y = ops.broadcast_to(ys[:, None], (height, width))  # (H, W)
    x = theta[:, 0, 0, None, None] * grid_x + theta[:, 0, 1, None, None] * grid_y + theta[:, 0, 2, None, None]
    y = theta[:, 1, 0, None, None] * grid_x + theta[:, 1, 1, None, None] * grid_y + theta[:, 1, 2, None, None]
    return x, y  # (B, H, W) each


def bilinear_sample(images, x, y):
    """The bilinear sampler: `images` read at real-valued positions, zero outside the image.

    Jaderberg et al. 2015, section 3.3, equation (5): each output is the sum over the four
    nearest pixels of `value * max(0, 1 - |x_s - m|) * max(0, 1 - |y_s - n|)`. A neighbour that
    lies outside the image contributes 0 (zero padding). Differentiable in the images and in the
    sampling positions (hence in whatever produced them), except on the pixel grid lines, where
    the gradient in the positions is one-sided.

    Args:
        images: float tensor `[batch, height, width, channels]`.
        x: float tensor `[batch, out_height, out_width]`, normalized column positions.
        y: float tensor `[batch, out_height, out_width]`, normalized row positions.

    Returns:
        float tensor `[batch, out_height, out_width, channels]`, in the dtype of `images`.
    """
    shape = ops.shape(images)
    batch, height, width, channels = shape[0], shape[1], shape[2], shape[3]
    out_shape = ops.shape(x)
    px = (ops.cast(x, "float32") + 1.0) * ops.cast(width - 1, "float32") / 2.0  # (B, h, w), in pixels
    py = (ops.cast(y, "float32") + 1.0) * ops.cast(height - 1, "float32") / 2.0
    x0, y0 = ops.floor(px), ops.floor(py)
    flat = ops.reshape(images, (-1, channels))  # (B * H * W, C)
    offsets = ops.reshape(ops.arange(batch) * height * width, (-1, 1, 1))  # (B, 1, 1)
    outputs = 0.0
    for column, column_weight in ((x0, x0 + 1.0 - px), (x0 + 1.0, px - x0)):
        for row, row_weight in ((y0, y0 + 1.0 - py), (y0 + 1.0, py - y0)):
            inside = (
                (column >= 0.0)
                & (column <= ops.cast(width - 1, "float32"))
                & (row >= 0.0)
                & (row <= ops.cast(height - 1, "float32"))
            )
            weight = ops.where(inside, column_weight * row_weight, 0.0)  # (B, h, w)
            column_index = ops.cast(ops.clip(column, 0.0, ops.cast(width - 1, "float32")), "int32")
            row_index = ops.cast(ops.clip(row, 0.0, ops.cast(height - 1, "float32")), "int32")
            index = offsets + row_index * width + column_index  # (B, h, w)
            values = ops.take(flat, ops.reshape(index, (-1,)), axis=0)  # (B * h * w, C)
            values = ops.reshape(values, (out_shape[0], out_shape[1], out_shape[2], channels))  # (B, h, w, C)
            outputs = outputs + ops.cast(weight[..., None], values.dtype) * values
    return outputs


@keras.saving.register_keras_serializable(package="keras_transformer")
class SpatialAttention(keras.layers.Layer):
    """CBAM's spatial attention: a map from the channel-wise mean and max, through one convolution.

    Woo, Park, Lee and Kweon 2018, "CBAM: Convolutional Block Attention Module"
    (https://arxiv.org/abs/1807.06521), section 3, equation (3):

        M_s = sigmoid(conv_{k x k}([mean_c(x); max_c(x)]))     (B, H, W, 1), one weight per position
        outputs = x * M_s

    The convolution (2 input channels, 1 output, no bias as in the paper's equation) sees a
    `kernel_size` neighbourhood of both maps, so a position's weight depends on its surroundings.
    With `batch_norm=True` the convolution is followed by batch normalization before the sigmoid,
    as in the paper's reference code (`keras_transformer.vision.normalized`): the map's logits
    are centred and scaled over the batch, so the sigmoid is not left saturated or flat.

    Args:
        kernel_size: odd int, the convolution's size (the paper's 7).
        batch_norm: bool, batch normalization between the convolution and the sigmoid.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, channels]`.
        return_attention_scores: bool; if True, also return the map `M_s`.
        training: bool or None, the batch normalization's mode (`batch_norm=True` only).

    Returns:
        float tensor `[batch, height, width, channels]`; and the map `[batch, height, width, 1]`,
        each value in (0, 1), if requested.

    Example:
    >>> attention = SpatialAttention(kernel_size=3)
    >>> outputs, spatial_map = attention(np.ones((1, 5, 6, 4), "float32"), return_attention_scores=True)
    >>> tuple(spatial_map.shape)
    (1, 5, 6, 1)
    """

    def __init__(self, kernel_size=7, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        if check_int("kernel_size", kernel_size, 1) % 2 == 0:
            raise ValueError(f"`kernel_size` must be an odd int >= 1. Received: kernel_size={kernel_size!r}")
        self.kernel_size = kernel_size
        self.batch_norm = bool(batch_norm)

    def build(self, input_shape):
        channels_of(input_shape, "SpatialAttention")
        conv = functools.partial(keras.layers.Conv2D, 1, self.kernel_size, padding="same", dtype=self.dtype_policy)
        self.map_conv = linear_unit(
            conv, None, self.batch_norm, (None, None, None, 2), "map", self.dtype_policy, bias=False
        )

    def call(self, inputs, return_attention_scores=False, training=None):
        pooled = ops.concatenate(
            [ops.mean(inputs, axis=-1, keepdims=True), ops.max(inputs, axis=-1, keepdims=True)], axis=-1
        )  # (B, H, W, 2)
        spatial_map = ops.sigmoid(self.map_conv(pooled, training=training))  # (B, H, W, 1)
        outputs = inputs * spatial_map  # (B, H, W, C)
        return (outputs, spatial_map) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update({"kernel_size": self.kernel_size, "batch_norm": self.batch_norm})
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class SpatialTransformer(keras.layers.Layer):
    """Spatial Transformer: a localisation net picks an affine transform, the image is resampled through it.

    Jaderberg, Simonyan, Zisserman and Kavukcuoglu 2015, "Spatial Transformer Networks"
    (https://arxiv.org/abs/1506.02025), section 3:

        theta = f_loc(x)                          localisation net: the 6 affine parameters, (B, 2, 3)
        (x_s, y_s) = theta @ (x_t, y_t, 1)        grid generator (`affine_grid`), one point per output pixel
        outputs = bilinear(x, x_s, y_s)           sampler (`bilinear_sample`), differentiable in x and theta

    `theta` maps output coordinates to input coordinates (both normalized to [-1, 1]): a scale
    below 1 zooms in on part of the image, a translation moves the glimpse, a rotation turns it.
    The localisation net's last layer starts at zero weights and the identity as its bias, so
    the layer starts by passing its input through unchanged, and learns from the classification
    loss alone (no box is ever given) which part of the image to cut out.

    Two localisation nets (`localization`):

    - `"pooled"` (the default), for any image size: `coordinates` appends the normalized x and y
      of each pixel to the input as two channels; two stride-2 3x3 convolutions (relu,
      `localization_filters`); a 1x1 convolution scores each position, a softmax over all
      positions turns the scores into a distribution p; the features, the coordinates and their
      squares are averaged under p (so the position of the most salient region is read out
      directly); a relu `Dense(localization_units)`; a `Dense(6)`. A deviation from the paper,
      so that it runs on images of any size and reads the position of what it finds.
    - `"convolutional"`, the paper's ST-CNN localisation net for its cluttered MNIST: 2x2 max
      pooling, a 5x5 convolution (relu, `localization_filters[0]`), 2x2 max pooling, a 5x5
      convolution (relu, `localization_filters[1]`), flattened, a relu
      `Dense(localization_units)`, a `Dense(6)` (the paper: 20, 20 and 50). Its flattened size
      depends on the image's, so it needs images of a height and width known when it is built
      (and the same ones after). Deviation: "same" padding, so that small images keep a cell.

    Args:
        output_size: None (default: the output has the input's height and width) or a pair of
            ints `(height, width)`, the size of the glimpse (a smaller one downsamples, as the
            paper's 60x60 -> 30x30 MNIST transformers).
        localization_filters: pair of ints, the channels of the localisation net's two
            convolutions; None: `(8, 16)` for `"pooled"`, the paper's `(20, 20)` for
            `"convolutional"`.
        localization_units: int, the width of its hidden dense layer; None: 32 for `"pooled"`,
            the paper's 50 for `"convolutional"`.
        localization: one of `LOCALIZATIONS`, the localisation net: `"pooled"` (any image size)
            or `"convolutional"` (the paper's; a fixed image size).
        localization_rate: float in (0, 1], how fast the transform moves relative to the rest of
            the model: `theta = identity + rate * (net(x) - identity)`, so every gradient step
            moves it `rate` times as far under Adam (the papers train their localisation nets at
            a lower learning rate). At 1 the transform is the net's output. The default, 0.1,
            keeps the classifier of `keras_transformer.vision.models` from throwing its glimpse
            off the canvas at Adam 3e-3, as it did with 1 on a Zen 5 CPU (both seeds at chance).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, channels]`.
        theta: optional float tensor `[batch, 2, 3]` (or `[batch, 6]`): a transform to apply
            instead of the localisation net's.
        return_attention_scores: bool; if True, also return the transform `theta` `[batch, 2, 3]`.

    Returns:
        float tensor `[batch, out_height, out_width, channels]`; and `theta` if requested.

    Example:
    >>> stn = SpatialTransformer(output_size=(12, 12))
    >>> glimpse, theta = stn(np.ones((2, 30, 31, 1), "float32"), return_attention_scores=True)
    >>> tuple(glimpse.shape), tuple(theta.shape)
    ((2, 12, 12, 1), (2, 2, 3))
    """

    def __init__(
        self,
        output_size=None,
        localization_filters=None,
        localization_units=None,
        localization_rate=0.1,
        localization="pooled",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("localization", localization, LOCALIZATIONS)
        default_filters, default_units = LOCALIZATION_DEFAULTS[localization]
        localization_filters = default_filters if localization_filters is None else localization_filters
        localization_units = default_units if localization_units is None else localization_units
        if output_size is not None:
            output_size = check_ints("output_size", output_size, 1, length=2)
        self.output_size = output_size
        self.localization_filters = check_ints("localization_filters", localization_filters, 1, length=2)
        self.localization_units = check_int("localization_units", localization_units, 1)
        self.localization_rate = check_rate("localization_rate", localization_rate, allow_zero=False, allow_one=True)
        self.localization = localization

    def build(self, inputs_shape, theta_shape=None):
        channels = channels_of(inputs_shape, "SpatialTransformer")
        if self.localization == "convolutional":
            self._build_convolutional(inputs_shape, channels)
        else:
            self._build_pooled(channels)
        self.theta_dense = keras.layers.Dense(
            6,
            kernel_initializer="zeros",
            bias_initializer=keras.initializers.Constant(IDENTITY),
            dtype=self.dtype_policy,
            name="localization_theta",
        )
        self.theta_dense.build((None, self.localization_units))

    def _build_convolutional(self, inputs_shape, channels):
        """The paper's localisation net: pool, 5x5 convolution, pool, 5x5 convolution, flatten, dense."""
        height, width = inputs_shape[1], inputs_shape[2]
        if height is None or width is None:
            raise ValueError(
                'SpatialTransformer(localization="convolutional") needs images of a known height and width. '
                f"Received: inputs_shape={tuple(inputs_shape)}"
            )
        self.image_size = (int(height), int(width))
        first, second = self.localization_filters
        self.convolutional_layers = [
            keras.layers.MaxPooling2D(2, padding="same", dtype=self.dtype_policy, name="localization_pool_1"),
            keras.layers.Conv2D(
                first, 5, padding="same", activation="relu", dtype=self.dtype_policy, name="localization_conv_1"
            ),
            keras.layers.MaxPooling2D(2, padding="same", dtype=self.dtype_policy, name="localization_pool_2"),
            keras.layers.Conv2D(
                second, 5, padding="same", activation="relu", dtype=self.dtype_policy, name="localization_conv_2"
            ),
            keras.layers.Flatten(dtype=self.dtype_policy, name="localization_flatten"),
        ]
        shape = (None, *self.image_size, channels)
        for layer in self.convolutional_layers:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        self.hidden_dense = keras.layers.Dense(
            self.localization_units, activation="relu", dtype=self.dtype_policy, name="localization_hidden"
        )
        self.hidden_dense.build(shape)

    def _build_pooled(self, channels):
        """The softmax-pooled localisation net of any image size (see the class docstring)."""
        first, second = self.localization_filters
        self.first_conv = keras.layers.Conv2D(
            first, 3, strides=2, padding="same", activation="relu", dtype=self.dtype_policy, name="localization_conv_1"
        )
        self.first_conv.build((None, None, None, channels + 2))
        self.second_conv = keras.layers.Conv2D(
            second, 3, strides=2, padding="same", activation="relu", dtype=self.dtype_policy, name="localization_conv_2"
        )
        self.second_conv.build((None, None, None, first))
        self.saliency_conv = keras.layers.Conv2D(1, 1, dtype=self.dtype_policy, name="localization_saliency")
        self.saliency_conv.build((None, None, None, second))
        self.hidden_dense = keras.layers.Dense(
            self.localization_units, activation="relu", dtype=self.dtype_policy, name="localization_hidden"
        )
        self.hidden_dense.build((None, second + 4))

    def localize(self, inputs):
        """The localisation net: `[B, H, W, C]` images -> `theta` `[B, 2, 3]`."""
        summary = (
            self._convolutional_summary(inputs)
            if self.localization == "convolutional"
            else self._pooled_summary(inputs)
        )
        theta = self.theta_dense(self.hidden_dense(summary))  # (B, 6), the identity at initialization
        identity = ops.convert_to_tensor(IDENTITY, theta.dtype)
        theta = identity + self.localization_rate * (theta - identity)  # a slower transform, same start
        return ops.reshape(theta, (-1, 2, 3))  # (B, 2, 3)

    def _convolutional_summary(self, inputs):
        """The paper's net up to its hidden layer: `[B, H, W, C]` -> `[B, H/4 * W/4 * F]`."""
        size = tuple(inputs.shape[1:3])
        if None not in size and size != self.image_size:
            raise ValueError(
                f'SpatialTransformer(localization="convolutional") was built for {self.image_size[0]}x'
                f"{self.image_size[1]} images. Received: {size[0]}x{size[1]}"
            )
        x = inputs
        for layer in self.convolutional_layers:
            x = layer(x)
        return x

    def _pooled_summary(self, inputs):
        """The pooled net up to its hidden layer: `[B, H, W, C]` -> `[B, F + 4]` (see the class docstring)."""
        shape = ops.shape(inputs)
        x, y = affine_grid(ops.convert_to_tensor([[list(IDENTITY[:3]), list(IDENTITY[3:])]]), shape[1], shape[2])
        coordinates = ops.stack([x, y], axis=-1)  # (1, H, W, 2)
        coordinates = ops.broadcast_to(coordinates, (shape[0], shape[1], shape[2], 2))  # (B, H, W, 2)
        features = ops.concatenate([inputs, ops.cast(coordinates, inputs.dtype)], axis=-1)  # (B, H, W, C + 2)
        features = self.second_conv(self.first_conv(features))  # (B, H/4, W/4, F)
        feature_shape = ops.shape(features)
        scores = ops.reshape(self.saliency_conv(features), (feature_shape[0], -1))  # (B, H/4 * W/4)
        where = ops.softmax(ops.cast(scores, "float32"), axis=-1)  # (B, N), a distribution over positions
        fx, fy = affine_grid(ops.convert_to_tensor([[list(IDENTITY[:3]), list(IDENTITY[3:])]]), *feature_shape[1:3])
        positions = ops.reshape(ops.stack([fx, fy], axis=-1), (-1, 2))  # (N, 2), the cells' coordinates
        flat = ops.cast(ops.reshape(features, (feature_shape[0], -1, feature_shape[3])), "float32")  # (B, N, F)
        pooled = ops.einsum("bn,bnf->bf", where, flat)  # (B, F)
        centre = ops.matmul(where, positions)  # (B, 2)
        spread = ops.matmul(where, ops.square(positions))  # (B, 2)
        return ops.cast(ops.concatenate([pooled, centre, spread], axis=-1), self.compute_dtype)  # (B, F + 4)

    def call(self, inputs, theta=None, return_attention_scores=False):
        theta = self.localize(inputs) if theta is None else ops.reshape(ops.cast(theta, "float32"), (-1, 2, 3))
        theta = ops.cast(theta, "float32")
        if self.output_size is None:
            shape = ops.shape(inputs)
            height, width = shape[1], shape[2]
        else:
            height, width = self.output_size
        x, y = affine_grid(theta, height, width)  # (B, h, w) each
        outputs = bilinear_sample(inputs, x, y)  # (B, h, w, C)
        return (outputs, theta) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_size": None if self.output_size is None else list(self.output_size),
                "localization_filters": list(self.localization_filters),
                "localization_units": self.localization_units,
                "localization_rate": self.localization_rate,
                "localization": self.localization,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Configs saved before `localization_rate` existed moved the transform at the full rate.
        return cls(**{"localization_rate": 1.0, **config})
