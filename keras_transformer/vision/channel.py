"""Channel attention: one weight per feature map, from the whole image.

A convolution's output channels are detectors of features. Channel attention rescales them per
image: the feature maps that matter for this image are kept, the others damped. All three layers
squeeze each channel to one number over the image (global pooling), compute channel weights from
those numbers with a small bottleneck network, and multiply the feature maps by them:

    SqueezeExcitation   sigmoid(MLP(avg_pool(x)))                       Hu et al. 2018
    ChannelAttention    sigmoid(MLP(avg_pool(x)) + MLP(max_pool(x)))     CBAM's channel half, Woo et al. 2018
    SelectiveKernel     softmax over branches of kernels of different sizes, per channel    Li et al. 2019

`channel_weights_by_class` reads a trained model's last SE or SK weights, per image and per class.
"""

import functools

import keras
import numpy as np
from keras import ops

from keras_transformer.checks import check_int, check_ints
from keras_transformer.vision.normalized import linear_unit


def bottleneck_units(channels, reduction, min_units):
    """The hidden width R of a C -> R -> C channel MLP: `min(C, max(C // reduction, min_units))`.

    The papers' ratio 16 leaves a narrow layer (16 or 32 channels) one or two hidden units;
    `min_units` keeps at least that many, and no more than C.
    """
    return min(channels, max(channels // reduction, min_units))


def channels_of(input_shape, layer):
    """The channel count C of a `[B, H, W, C]` input shape; a `ValueError` naming the shape otherwise."""
    if len(input_shape) != 4 or input_shape[-1] is None:
        raise ValueError(
            f"{layer} takes feature maps [batch, height, width, channels] with a known channel count. "
            f"Received: input_shape={input_shape}"
        )
    return int(input_shape[-1])


@keras.saving.register_keras_serializable(package="keras_transformer")
class SqueezeExcitation(keras.layers.Layer):
    """Squeeze-and-Excitation: a weight per channel from its mean over the image.

    Hu, Shen and Sun 2018, "Squeeze-and-Excitation Networks" (https://arxiv.org/abs/1709.01507),
    section 3:

        z = mean_{h, w} x[:, h, w, :]                        squeeze: global average pooling, (B, C)
        s = sigmoid(W_2 relu(W_1 z + b_1) + b_2)             excitation: bottleneck MLP, C -> R -> C
        outputs = x * s                                      each feature map rescaled by its weight

    with `R = min(C, max(C // reduction, min_units))` (`bottleneck_units`). The paper's MLP has no
    biases in its equations; these `Dense` layers have them, as its reference implementation does.

    Args:
        reduction: int r >= 1, the bottleneck's reduction ratio (the paper's 16).
        min_units: int >= 1, the smallest hidden width, for narrow layers where `C // reduction`
            would leave one or two units (at most C is used).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, channels]`.
        return_attention_scores: bool; if True, also return the channel weights `s`.

    Returns:
        float tensor `[batch, height, width, channels]`; and the weights `[batch, channels]`, each
        in (0, 1), if requested.

    Example:
    >>> se = SqueezeExcitation(reduction=4)
    >>> outputs, weights = se(np.ones((2, 5, 7, 8), "float32"), return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 5, 7, 8), (2, 8))
    """

    def __init__(self, reduction=16, min_units=8, **kwargs):
        super().__init__(**kwargs)
        self.reduction = check_int("reduction", reduction, 1)
        self.min_units = check_int("min_units", min_units, 1)

    def build(self, input_shape):
        channels = channels_of(input_shape, "SqueezeExcitation")
        units = bottleneck_units(channels, self.reduction, self.min_units)
        self.squeeze_dense = keras.layers.Dense(units, activation="relu", dtype=self.dtype_policy, name="squeeze")
        self.squeeze_dense.build((None, channels))
        self.excite_dense = keras.layers.Dense(channels, activation="sigmoid", dtype=self.dtype_policy, name="excite")
        self.excite_dense.build((None, units))

    def call(self, inputs, return_attention_scores=False):
        squeezed = ops.mean(inputs, axis=(1, 2))  # (B, C)
        weights = self.excite_dense(self.squeeze_dense(squeezed))  # (B, C)
        outputs = inputs * weights[:, None, None, :]  # (B, H, W, C)
        return (outputs, weights) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update({"reduction": self.reduction, "min_units": self.min_units})
        return config

    @classmethod
    def from_config(cls, config):
        # Configs saved before `min_units` existed had the hidden width max(1, C // reduction).
        return cls(**{"min_units": 1, **config})


@keras.saving.register_keras_serializable(package="keras_transformer")
class ChannelAttention(keras.layers.Layer):
    """CBAM's channel attention: average- and max-pooled descriptors through one shared MLP.

    Woo, Park, Lee and Kweon 2018, "CBAM: Convolutional Block Attention Module"
    (https://arxiv.org/abs/1807.06521), section 3, equation (2):

        M_c = sigmoid(MLP(avg_pool(x)) + MLP(max_pool(x)))    MLP(z) = W_1 relu(W_0 z + b_0) + b_1
        outputs = x * M_c

    The same MLP (C -> R -> C, `R = min(C, max(C // reduction, min_units))`) reads both descriptors: the maximum
    keeps the most distinctive response of each feature map, which the mean dilutes over a
    large image. Squeeze-and-Excitation is this with the average alone.

    Args:
        reduction: int r >= 1, the MLP's reduction ratio (the paper's 16).
        min_units: int >= 1, the smallest hidden width (at most C is used).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, channels]`.
        return_attention_scores: bool; if True, also return the channel weights `M_c`.

    Returns:
        float tensor `[batch, height, width, channels]`; and the weights `[batch, channels]` if
        requested.

    Example:
    >>> attention = ChannelAttention(reduction=2)
    >>> tuple(attention(np.ones((1, 3, 3, 4), "float32")).shape)
    (1, 3, 3, 4)
    """

    def __init__(self, reduction=16, min_units=8, **kwargs):
        super().__init__(**kwargs)
        self.reduction = check_int("reduction", reduction, 1)
        self.min_units = check_int("min_units", min_units, 1)

    def build(self, input_shape):
        channels = channels_of(input_shape, "ChannelAttention")
        units = bottleneck_units(channels, self.reduction, self.min_units)
        self.hidden_dense = keras.layers.Dense(units, activation="relu", dtype=self.dtype_policy, name="hidden")
        self.hidden_dense.build((None, channels))
        self.output_dense = keras.layers.Dense(channels, dtype=self.dtype_policy, name="output")
        self.output_dense.build((None, units))

    def shared_mlp(self, descriptor):
        """The MLP both descriptors go through: `[B, C]` -> `[B, C]`, before the sigmoid."""
        return self.output_dense(self.hidden_dense(descriptor))

    def call(self, inputs, return_attention_scores=False):
        average = ops.mean(inputs, axis=(1, 2))  # (B, C)
        maximum = ops.max(inputs, axis=(1, 2))  # (B, C)
        weights = ops.sigmoid(self.shared_mlp(average) + self.shared_mlp(maximum))  # (B, C)
        outputs = inputs * weights[:, None, None, :]  # (B, H, W, C)
        return (outputs, weights) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update({"reduction": self.reduction, "min_units": self.min_units})
        return config

    @classmethod
    def from_config(cls, config):
        # Configs saved before `min_units` existed had the hidden width max(1, C // reduction).
        return cls(**{"min_units": 1, **config})


@keras.saving.register_keras_serializable(package="keras_transformer")
class SelectiveKernel(keras.layers.Layer):
    """Selective Kernel convolution: branches of different kernel sizes, mixed per channel by a softmax.

    Li, Wang, Hu and Yang 2019, "Selective Kernel Networks" (https://arxiv.org/abs/1903.06586),
    section 3.1. Split, fuse, select:

        U_m = relu(conv_{k_m}(x))                 split: one convolution per kernel size k_m, (B, H, W, C)
        U = sum_m U_m                             fuse: element-wise sum of the branches
        s = mean_{h, w} U                         global average pooling, (B, C)
        z = relu(W_z s + b_z)                     a compact descriptor, (B, R), R = max(C // reduction, min_units)
        a_m = softmax_m(A_m z)                    select: a softmax over the M branches, per channel, (B, M, C)
        outputs = sum_m a_m * U_m

    Each output channel chooses, per image, how much of its receptive field comes from each
    kernel size: the branch weights of one channel sum to 1.

    As in the paper, a branch of kernel size k > 3 is by default (`dilated=True`) a 3x3
    convolution with dilation `(k - 1) // 2`: the same k x k field of view at a 3x3's cost (the
    paper's 5x5 branch is a 3x3 with dilation 2); `dilated=False` makes it a plain k x k
    convolution. With `batch_norm=True` each convolution and `W_z` is followed by batch
    normalization before its relu, as in the paper (`keras_transformer.vision.normalized`);
    without it (the default, as before the option) they have biases and no normalization.

    Args:
        filters: int C, the output channels of every branch (and of the layer).
        kernel_sizes: tuple of M >= 2 odd ints, the branches' fields of view (the paper's (3, 5)).
        reduction: int r >= 1, reduction ratio of `z` (the paper's 16).
        min_units: int L >= 1, the smallest width of `z` (the paper's 32).
        dilated: bool, whether a branch wider than 3 is a dilated 3x3 convolution (the paper's)
            rather than a plain k x k one.
        batch_norm: bool, batch normalization after each convolution and after `W_z` (the paper's).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor `[batch, height, width, input channels]`.
        return_attention_scores: bool; if True, also return the branch weights `a`.
        training: bool or None, the batch normalization's mode (`batch_norm=True` only).

    Returns:
        float tensor `[batch, height, width, filters]`; and the weights `[batch, M, filters]`,
        summing to 1 over M, if requested.

    Example:
    >>> sk = SelectiveKernel(filters=8, kernel_sizes=(3, 5), reduction=2, min_units=4)
    >>> outputs, weights = sk(np.ones((2, 9, 9, 3), "float32"), return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 9, 9, 8), (2, 2, 8))
    """

    def __init__(
        self, filters, kernel_sizes=(3, 5), reduction=16, min_units=32, dilated=True, batch_norm=False, **kwargs
    ):
        super().__init__(**kwargs)
        self.filters = check_int("filters", filters, 1)
        kernel_sizes = check_ints("kernel_sizes", kernel_sizes, 1, min_length=2)
        if any(k % 2 == 0 for k in kernel_sizes):
            raise ValueError(
                f"`kernel_sizes` must be a tuple of 2 or more odd ints >= 1. Received: kernel_sizes={kernel_sizes!r}"
            )
        self.kernel_sizes = kernel_sizes
        self.reduction = check_int("reduction", reduction, 1)
        self.min_units = check_int("min_units", min_units, 1)
        self.dilated = bool(dilated)
        self.batch_norm = bool(batch_norm)

    def build(self, input_shape):
        channels_of(input_shape, "SelectiveKernel")
        self.branch_convs = []
        for k in self.kernel_sizes:
            size, dilation = (3, (k - 1) // 2) if self.dilated and k > 3 else (k, 1)
            conv = functools.partial(
                keras.layers.Conv2D, self.filters, size, padding="same", dilation_rate=dilation, dtype=self.dtype_policy
            )
            self.branch_convs.append(
                linear_unit(conv, "relu", self.batch_norm, input_shape, f"branch_{k}x{k}", self.dtype_policy)
            )
        units = max(self.filters // self.reduction, self.min_units)
        fuse = functools.partial(keras.layers.Dense, units, dtype=self.dtype_policy)
        self.fuse_dense = linear_unit(fuse, "relu", self.batch_norm, (None, self.filters), "fuse", self.dtype_policy)
        # A_m for every branch at once: (R, M * C), no bias (the paper's A, B).
        self.select_dense = keras.layers.Dense(
            len(self.kernel_sizes) * self.filters, use_bias=False, dtype=self.dtype_policy, name="select"
        )
        self.select_dense.build((None, units))

    def call(self, inputs, return_attention_scores=False, training=None):
        branches = ops.stack([conv(inputs, training=training) for conv in self.branch_convs], axis=1)  # (B, M, H, W, C)
        descriptor = self.fuse_dense(ops.mean(ops.sum(branches, axis=1), axis=(1, 2)), training=training)  # (B, R)
        logits = ops.reshape(self.select_dense(descriptor), (-1, len(self.kernel_sizes), self.filters))  # (B, M, C)
        weights = ops.softmax(logits, axis=1)  # (B, M, C)
        outputs = ops.sum(branches * weights[:, :, None, None, :], axis=1)  # (B, H, W, C)
        return (outputs, weights) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "filters": self.filters,
                "kernel_sizes": list(self.kernel_sizes),
                "reduction": self.reduction,
                "min_units": self.min_units,
                "dilated": self.dilated,
                "batch_norm": self.batch_norm,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Configs saved before `dilated` existed had plain k x k branches.
        return cls(**{"dilated": False, **config})


def channel_weights_by_class(model, images, labels, num_classes, batch_size=250):
    """The channel attention of a model's last SE or SK layer on `images`, and its mean per class.

    Channel attention is computed per image; averaging it over the images of each class shows
    whether different classes switch different feature maps on.

    Args:
        model: a model with at least one `SqueezeExcitation` or `SelectiveKernel` layer (as
            `keras_transformer.vision.models.build_classifier("se")` or `("sk")` builds); the last
            one is read.
        images: `[N, H, W, C]` array, the model's inputs.
        labels: `[N]` int array, each image's class in `[0, num_classes)`.
        num_classes: int, the classes K.
        batch_size: int, images per forward pass.

    Returns:
        `(per_image, per_class)`, NumPy arrays: SE's weights s_c, `[N, C]` and `[K, C]`, or SK's
        branch weights a_mc, `[N, M, C]` and `[K, M, C]`. A class with no image gets NaN.

    Raises:
        ValueError: the model has no SE or SK layer.
    """
    layers = [layer for layer in model.layers if isinstance(layer, (SqueezeExcitation, SelectiveKernel))]
    if not layers:
        raise ValueError(f"model {model.name!r} has no SqueezeExcitation or SelectiveKernel layer")
    layer = layers[-1]
    features = keras.Model(model.inputs, layer.input).predict(images, batch_size=batch_size, verbose=0)
    per_image = np.concatenate(
        [
            np.asarray(ops.convert_to_numpy(layer(features[i : i + batch_size], return_attention_scores=True)[1]))
            for i in range(0, len(features), batch_size)
        ]
    )
    labels = np.asarray(labels)
    per_class = np.stack(
        [
            per_image[labels == k].mean(0) if np.any(labels == k) else np.full(per_image.shape[1:], np.nan)
            for k in range(num_classes)
        ]
    )
    return per_image, per_class
