"""Numerical tests of the vision attention layers, `keras_transformer.vision`.

Each layer is compared, with its weights copied out, to a NumPy version of its paper's formula
written here in float64 (convolutions and pooling by explicit loops, the bilinear sampler as the
STN paper's sum over every pixel, never the package's code), and held to the properties its
users rely on: the spatial transformer's identity start, its gradients, any spatial size (odd,
batch 1), config round trips, and errors that name the argument and value.

Tiny sizes: B=2, H=7, W=5 (odd on purpose), C=4.
"""

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.vision import (
    CBAM,
    ChannelAttention,
    ResidualAttention,
    ScaleAttention,
    SelectiveKernel,
    SpatialAttention,
    SpatialTransformer,
    SqueezeExcitation,
    bilinear_sample,
)
from keras_transformer.vision.normalized import Normalized

B, H, W, C = 2, 7, 5, 4
ATOL = 1e-5


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def randomize(layer, rng, scale=0.5):
    """Every weight of a built layer (biases and batch-norm statistics included) set to random values.

    So the comparison exercises each; a moving variance is drawn positive, as a variance is.
    """
    values = [rng.normal(scale=scale, size=w.shape) for w in layer.weights]
    values = [np.abs(v) + 0.5 if w.path.endswith("moving_variance") else v for w, v in zip(layer.weights, values)]
    layer.set_weights([v.astype("float32") for v in values])


def images(rng, batch=B, height=H, width=W, channels=C):
    return rng.normal(size=(batch, height, width, channels)).astype("float32")


# ---------------------------------------------------------------------------
# NumPy references, float64
# ---------------------------------------------------------------------------
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def dense(x, layer, training=False):
    """`x @ kernel + bias` with a Keras `Dense`'s weights (bias optional), in float64.

    A `Normalized` unit: its `Dense` without bias, `batch_norm`, then its activation.
    """
    if isinstance(layer, Normalized):
        return normalized(dense(x, layer.layer), layer, training)
    out = np.asarray(x, np.float64) @ to_numpy(layer.kernel).astype(np.float64)
    return out + to_numpy(layer.bias) if layer.use_bias else out


def batch_norm(z, layer, training):
    """Ioffe and Szegedy 2015: `gamma (z - mu) / sqrt(var + eps) + beta` over every axis but the last.

    `mu` and `var` (the biased variance) of this batch in training, the moving averages otherwise.
    """
    axes = tuple(range(z.ndim - 1))
    if training:
        mean, variance = z.mean(axis=axes), z.var(axis=axes)
    else:
        mean, variance = to_numpy(layer.moving_mean), to_numpy(layer.moving_variance)
    return to_numpy(layer.gamma) * (z - mean) / np.sqrt(variance + layer.epsilon) + to_numpy(layer.beta)


def normalized(z, unit, training):
    """A `Normalized` unit's output from its linear layer's output `z`: batch norm, then the activation."""
    activation = {None: lambda v: v, "linear": lambda v: v, "relu": relu, "sigmoid": sigmoid}
    return activation[keras.activations.serialize(unit.activation)](batch_norm(z, unit.norm, training))


def conv2d_same(x, kernel, bias=None, dilation=1):
    """Stride-1 "same" convolution (odd kernel, zero padding): `[B, H, W, I]` x `[k, k, I, O]` -> `[B, H, W, O]`.

    With `dilation` d, kernel tap (i, j) reads the input `d * (i - k // 2)` rows and `d * (j - k // 2)`
    columns away.
    """
    x = np.asarray(x, np.float64)
    k = kernel.shape[0]
    half = dilation * (k // 2)
    padded = np.pad(x, ((0, 0), (half, half), (half, half), (0, 0)))
    out = np.zeros((*x.shape[:3], kernel.shape[-1]))
    for i in range(k):
        for j in range(k):
            rows, columns = (
                slice(i * dilation, i * dilation + x.shape[1]),
                slice(j * dilation, j * dilation + x.shape[2]),
            )
            out += padded[:, rows, columns, :] @ kernel[i, j].astype(np.float64)
    return out if bias is None else out + bias


def conv(x, layer, training=False):
    """A Keras `Conv2D` (stride 1, same padding, any dilation) of `x`, its activation included, by `conv2d_same`.

    A `Normalized` unit: its `Conv2D` without bias, `batch_norm`, then its activation.
    """
    if isinstance(layer, Normalized):
        return normalized(conv(x, layer.layer), layer, training)
    dilation = layer.get_config()["dilation_rate"][0]
    out = conv2d_same(x, to_numpy(layer.kernel), to_numpy(layer.bias) if layer.use_bias else None, dilation)
    activation = layer.get_config()["activation"]
    return {"linear": lambda v: v, "relu": relu, "sigmoid": sigmoid}[activation](out)


def max_pool_2x2_same(x):
    """2x2 max pooling with stride 2; an odd edge pools its last row / column alone (TF's "same")."""
    batch, height, width, channels = x.shape
    out = np.full((batch, math.ceil(height / 2), math.ceil(width / 2), channels), -np.inf)
    for i in range(height):
        for j in range(width):
            out[:, i // 2, j // 2] = np.maximum(out[:, i // 2, j // 2], x[:, i, j])
    return out


def squeeze_excitation_reference(x, layer):
    """Hu et al. 2018: `s = sigmoid(W_2 relu(W_1 mean(x) + b_1) + b_2)`, `x * s`."""
    z = np.asarray(x, np.float64).mean(axis=(1, 2))
    s = sigmoid(dense(relu(dense(z, layer.squeeze_dense)), layer.excite_dense))
    return x * s[:, None, None, :], s


def channel_attention_reference(x, layer):
    """CBAM eq. (2): `M_c = sigmoid(MLP(avg) + MLP(max))` with one shared MLP, `x * M_c`."""

    def mlp(v):
        return dense(relu(dense(v, layer.hidden_dense)), layer.output_dense)

    x = np.asarray(x, np.float64)
    weights = sigmoid(mlp(x.mean(axis=(1, 2))) + mlp(x.max(axis=(1, 2))))
    return x * weights[:, None, None, :], weights


def spatial_attention_reference(x, layer, training=False):
    """CBAM eq. (3): `M_s = sigmoid(conv([mean_c; max_c]))` (batch norm before the sigmoid if asked), `x * M_s`."""
    x = np.asarray(x, np.float64)
    pooled = np.concatenate([x.mean(-1, keepdims=True), x.max(-1, keepdims=True)], axis=-1)
    spatial_map = sigmoid(conv(pooled, layer.map_conv, training))
    return x * spatial_map, spatial_map


def selective_kernel_reference(x, layer, training=False):
    """SKNet, split / fuse / select: `sum_m softmax_m(A_m z) * U_m`."""
    branches = np.stack([conv(x, branch, training) for branch in layer.branch_convs], axis=1)  # (B, M, H, W, C)
    z = relu(dense(branches.sum(axis=1).mean(axis=(1, 2)), layer.fuse_dense, training))
    logits = dense(z, layer.select_dense).reshape(len(branches), len(layer.kernel_sizes), layer.filters)
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return (branches * weights[:, :, None, None, :]).sum(axis=1), weights


def upsample_nearest(x, height, width):
    """Nearest-neighbour upsampling by 2, cut to `height` x `width`: output row i reads row i // 2."""
    return x[:, np.arange(height) // 2][:, :, np.arange(width) // 2]


def residual_attention_reference(x, layer, training=False):
    """Wang et al. 2017: `(1 + M(x)) * T(x)`, M an hourglass: down twice, up with a skip, two 1x1 convs, a sigmoid."""
    x = np.asarray(x, np.float64)
    trunk = conv(x, layer.trunk_conv, training)
    down = conv(max_pool_2x2_same(x), layer.down_conv, training)
    bottom = conv(max_pool_2x2_same(down), layer.bottom_conv, training)
    up = conv(upsample_nearest(bottom, *down.shape[1:3]) + down, layer.up_conv, training)
    hidden = conv(upsample_nearest(up, *x.shape[1:3]), layer.mask_hidden_conv, training)
    mask = conv(hidden, layer.mask_output_conv)
    return (1.0 + mask) * trunk, mask


def bilinear_warp_reference(image, theta, out_height, out_width):
    """The STN paper's eq. (5), summed over every input pixel: `sum_nm U_nm max(0, 1-|x-m|) max(0, 1-|y-n|)`.

    `image [H, W, C]`, `theta [2, 3]` from output to input coordinates, normalized to [-1, 1]
    over the pixel centres.
    """
    height, width = image.shape[:2]

    def normalized(n):
        return np.zeros(1) if n == 1 else np.linspace(-1.0, 1.0, n)

    out = np.zeros((out_height, out_width, image.shape[2]))
    rows, columns = np.arange(height)[:, None], np.arange(width)[None, :]
    for i, y_t in enumerate(normalized(out_height)):
        for j, x_t in enumerate(normalized(out_width)):
            x_s, y_s = np.asarray(theta, np.float64) @ np.array([x_t, y_t, 1.0])
            px, py = (x_s + 1) * (width - 1) / 2, (y_s + 1) * (height - 1) / 2
            kernel = np.maximum(0, 1 - np.abs(px - columns)) * np.maximum(0, 1 - np.abs(py - rows))  # (H, W)
            out[i, j] = np.tensordot(kernel, image, axes=([0, 1], [0, 1]))
    return out


def rotation(angle, scale=1.0, shift=(0.0, 0.0)):
    """`theta [2, 3]`: rotate by `angle` radians and scale, then shift, from output to input coordinates."""
    cos, sin = math.cos(angle) * scale, math.sin(angle) * scale
    return np.array([[cos, -sin, shift[0]], [sin, cos, shift[1]]], "float32")


# ---------------------------------------------------------------------------
# Each layer against its reference, at odd sizes and batch 1
# ---------------------------------------------------------------------------
SIZES = [(B, H, W), (1, 1, 1), (1, 6, 9), (3, 2, 3)]
CHANNEL_LAYERS = {
    "squeeze_excitation": (lambda: SqueezeExcitation(reduction=2), squeeze_excitation_reference),
    "channel_attention": (lambda: ChannelAttention(reduction=2), channel_attention_reference),
    "spatial_attention": (lambda: SpatialAttention(kernel_size=3), spatial_attention_reference),
    "selective_kernel": (
        lambda: SelectiveKernel(filters=3, kernel_sizes=(1, 3, 5), reduction=2, min_units=2),
        selective_kernel_reference,
    ),
    "selective_kernel_plain": (
        lambda: SelectiveKernel(filters=3, kernel_sizes=(3, 5), reduction=2, min_units=2, dilated=False),
        selective_kernel_reference,
    ),
    "residual_attention": (lambda: ResidualAttention(filters=3), residual_attention_reference),
}
# The papers' batch normalisation after the convolutions (and SK's fuse layer), in inference here and in
# training below.
BATCH_NORM_LAYERS = {
    "spatial_attention_batch_norm": (
        lambda: SpatialAttention(kernel_size=3, batch_norm=True),
        spatial_attention_reference,
    ),
    "selective_kernel_batch_norm": (
        lambda: SelectiveKernel(filters=3, kernel_sizes=(3, 5), reduction=2, min_units=2, batch_norm=True),
        selective_kernel_reference,
    ),
    "residual_attention_batch_norm": (
        lambda: ResidualAttention(filters=3, batch_norm=True),
        residual_attention_reference,
    ),
}
CHANNEL_LAYERS.update(BATCH_NORM_LAYERS)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(CHANNEL_LAYERS))
def test_layer_matches_its_formula(name, size):
    rng = np.random.default_rng(0)
    make, reference = CHANNEL_LAYERS[name]
    x = images(rng, *size)
    layer = make()
    layer(x)
    randomize(layer, rng)
    outputs, attention = layer(x, return_attention_scores=True)
    expected_outputs, expected_attention = reference(x, layer)
    assert outputs.shape == expected_outputs.shape and attention.shape == expected_attention.shape
    np.testing.assert_allclose(to_numpy(outputs), expected_outputs, atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(attention), expected_attention, atol=ATOL, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(layer(x)), expected_outputs, atol=ATOL, rtol=1e-5)  # without the attention


@pytest.mark.parametrize("size", SIZES[:3], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(BATCH_NORM_LAYERS))
def test_batch_norm_layers_use_the_batchs_statistics_in_training(name, size):
    rng = np.random.default_rng(4)
    make, reference = BATCH_NORM_LAYERS[name]
    x = images(rng, *size)
    layer = make()
    layer(x)
    randomize(layer, rng)
    outputs, attention = layer(x, return_attention_scores=True, training=True)
    expected_outputs, expected_attention = reference(x, layer, training=True)
    np.testing.assert_allclose(to_numpy(outputs), expected_outputs, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(to_numpy(attention), expected_attention, atol=1e-4, rtol=1e-4)
    inference, _ = reference(x, layer, training=False)
    assert np.abs(inference - expected_outputs).max() > 1e-2  # the two modes differ: the flag reached every norm


def test_batch_norm_is_off_by_default_and_keeps_the_weights_the_layers_had():
    """Without `batch_norm` a layer has exactly the weights it had before the option (saved models load)."""
    x = np.ones((1, 5, 5, 4), "float32")
    for make in (lambda **k: SelectiveKernel(4, **k), lambda **k: CBAM(**k), lambda **k: ResidualAttention(4, **k)):
        plain, normed = make(), make(batch_norm=True)
        plain(x), normed(x)
        assert not any("batch_norm" in w.path for w in plain.weights)
        assert sum("moving_variance" in w.path for w in normed.weights) >= 1
        assert normed.get_config()["batch_norm"] is True and plain.get_config()["batch_norm"] is False


@pytest.mark.parametrize("batch_norm", [False, True], ids=["plain", "batch_norm"])
@pytest.mark.parametrize("size", SIZES[:3], ids=lambda s: "x".join(map(str, s)))
def test_cbam_is_channel_attention_then_spatial_attention(size, batch_norm):
    rng = np.random.default_rng(1)
    x = images(rng, *size)
    cbam = CBAM(reduction=2, kernel_size=5, batch_norm=batch_norm)
    cbam(x)
    randomize(cbam, rng)
    outputs, attention = cbam(x, return_attention_scores=True)
    refined, channel_weights = channel_attention_reference(x, cbam.channel_attention)
    expected, spatial_map = spatial_attention_reference(refined, cbam.spatial_attention)
    np.testing.assert_allclose(to_numpy(attention["channel"]), channel_weights, atol=ATOL)
    np.testing.assert_allclose(to_numpy(attention["spatial"]), spatial_map, atol=ATOL)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=ATOL, rtol=1e-5)
    assert attention["spatial"].shape == (*size, 1)


def test_attention_weights_lie_where_their_formulas_put_them():
    rng = np.random.default_rng(2)
    x = images(rng)
    _, se = SqueezeExcitation(reduction=2)(x, return_attention_scores=True)
    _, sk = SelectiveKernel(filters=6, reduction=2, min_units=2)(x, return_attention_scores=True)
    _, mask = ResidualAttention(filters=3)(x, return_attention_scores=True)
    assert np.all((to_numpy(se) > 0) & (to_numpy(se) < 1))
    assert sk.shape == (B, 2, 6)
    np.testing.assert_allclose(to_numpy(sk).sum(axis=1), 1.0, atol=1e-6)  # a softmax over the branches
    assert np.all((to_numpy(mask) > 0) & (to_numpy(mask) < 1))


@pytest.mark.parametrize(
    "make, channels, units",
    [
        (lambda: SqueezeExcitation(), 16, 8),  # 16 // 16 = 1, raised to the minimum, 8
        (lambda: SqueezeExcitation(), 256, 16),  # the paper's ratio where the layer is wide
        (lambda: SqueezeExcitation(), 4, 4),  # never wider than the channels
        (lambda: ChannelAttention(), 32, 8),
        (lambda: SqueezeExcitation(reduction=2, min_units=1), 4, 2),
    ],
)
def test_channel_bottleneck_keeps_the_papers_ratio_and_a_minimum_width(make, channels, units):
    layer = make()
    layer(np.ones((1, 3, 3, channels), "float32"))
    hidden = layer.squeeze_dense if isinstance(layer, SqueezeExcitation) else layer.hidden_dense
    assert hidden.units == units


def test_papers_defaults_cbam_seven_by_seven_sk_dilated_three_by_three():
    cbam, sk = CBAM(), SelectiveKernel(filters=8)
    cbam(np.ones((1, 9, 9, 16), "float32"))
    sk(np.ones((1, 9, 9, 4), "float32"))
    assert (cbam.reduction, cbam.kernel_size, cbam.min_units) == (16, 7, 8)
    assert tuple(cbam.spatial_attention.map_conv.kernel.shape) == (7, 7, 2, 1)
    five = sk.branch_convs[1]  # the paper's 5x5 branch: a 3x3 convolution dilated by 2
    assert tuple(five.kernel.shape[:2]) == (3, 3) and five.get_config()["dilation_rate"] == (2, 2)
    assert sk.fuse_dense.units == 32  # L = 32 where C // 16 is smaller


def test_configs_saved_before_the_papers_defaults_load_as_they_were():
    """A config without `min_units` (SE, channel attention, CBAM) or `dilated` (SK) rebuilds the old layer."""
    se = SqueezeExcitation.from_config({"name": "se", "reduction": 2})
    se(np.ones((1, 3, 3, 4), "float32"))
    assert se.squeeze_dense.units == 2  # max(1, 4 // 2), as before
    cbam = CBAM.from_config({"name": "cbam", "reduction": 16, "kernel_size": 3})
    cbam(np.ones((1, 3, 3, 16), "float32"))
    assert cbam.channel_attention.hidden_dense.units == 1
    sk = SelectiveKernel.from_config(
        {"name": "sk", "filters": 4, "kernel_sizes": [3, 5], "reduction": 2, "min_units": 2}
    )
    sk(np.ones((1, 7, 7, 3), "float32"))
    assert tuple(sk.branch_convs[1].kernel.shape[:2]) == (5, 5)


def test_residual_attention_with_a_closed_mask_is_its_trunk_and_never_less():
    rng = np.random.default_rng(3)
    x = images(rng)
    layer = ResidualAttention(filters=3)
    layer(x)
    layer.mask_output_conv.bias.assign(np.full(3, -100.0, "float32"))  # M = sigmoid(-100 + ...) ~ 0
    layer.mask_output_conv.kernel.assign(np.zeros_like(to_numpy(layer.mask_output_conv.kernel)))
    trunk = to_numpy(layer.trunk_conv(x))
    np.testing.assert_allclose(to_numpy(layer(x)), trunk, atol=1e-6)
    layer.mask_output_conv.bias.assign(np.full(3, 100.0, "float32"))  # M ~ 1: twice the trunk
    np.testing.assert_allclose(to_numpy(layer(x)), 2 * trunk, atol=1e-5)


# ---------------------------------------------------------------------------
# SpatialTransformer
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_spatial_transformer_starts_as_the_identity(size):
    rng = np.random.default_rng(4)
    x = images(rng, *size)
    outputs, theta = SpatialTransformer()(x, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(theta), np.broadcast_to([[1, 0, 0], [0, 1, 0]], (size[0], 2, 3)))
    np.testing.assert_allclose(to_numpy(outputs), x, atol=1e-5)


@pytest.mark.parametrize(
    "theta, out_size",
    [
        (rotation(0.0, shift=(0.5, -0.25)), None),  # a translation
        (rotation(math.pi / 6), None),  # a rotation about the centre
        (rotation(-0.4, scale=0.6, shift=(0.2, 0.3)), None),  # rotate, zoom in, move
        (rotation(0.3, scale=0.5, shift=(-0.1, 0.2)), (4, 3)),  # a smaller glimpse
        (np.array([[1.2, 0.3, 0.0], [-0.2, 0.9, 0.1]], "float32"), (6, 8)),  # any affine map
    ],
)
def test_spatial_transformer_matches_a_numpy_bilinear_warp(theta, out_size):
    rng = np.random.default_rng(5)
    x = images(rng, 2, 9, 11, 3)
    height, width = out_size or x.shape[1:3]
    thetas = np.stack([theta, rotation(0.1)])  # each image its own transform
    outputs = to_numpy(SpatialTransformer(output_size=out_size)(x, theta=thetas))
    assert outputs.shape == (2, height, width, 3)
    for b in range(2):
        np.testing.assert_allclose(outputs[b], bilinear_warp_reference(x[b], thetas[b], height, width), atol=ATOL)


def test_a_quarter_turn_about_the_centre_turns_the_image():
    x = images(np.random.default_rng(6), 1, 5, 5, 1)
    turned = to_numpy(SpatialTransformer()(x, theta=rotation(math.pi / 2)[None]))
    # Output pixel (i, j) reads the input at (x, y) = (-y_t, x_t): row j, column 4 - i.
    np.testing.assert_allclose(turned[0], np.rot90(x[0], k=1), atol=1e-5)


def test_spatial_transformer_samples_zero_outside_the_image():
    x = np.ones((1, 4, 4, 1), "float32")
    outputs = to_numpy(SpatialTransformer()(x, theta=rotation(0.0, shift=(3.0, 0.0))[None]))  # moved 3 half-widths
    assert np.all(outputs == 0.0)


def test_gradients_reach_the_transform_and_the_localisation_net():
    rng = np.random.default_rng(7)
    x = tf.constant(images(rng, 2, 8, 9, 2))
    theta = tf.Variable(np.stack([rotation(0.2, 0.7, (0.13, -0.21)), rotation(-0.3, 0.8, (0.07, 0.11))]))
    target = tf.constant(rng.normal(size=(2, 5, 6, 2)).astype("float32"))
    stn = SpatialTransformer(output_size=(5, 6))

    def loss_of(t):
        return tf.reduce_sum(stn(x, theta=t) * target)

    with tf.GradientTape() as tape:
        loss = loss_of(theta)
    gradient = tape.gradient(loss, theta).numpy()
    # Central differences of the loss in each of the 12 parameters.
    numerical = np.zeros_like(gradient)
    step = 1e-3
    for index in np.ndindex(*gradient.shape):
        delta = np.zeros_like(gradient)
        delta[index] = step
        numerical[index] = (loss_of(theta + delta).numpy() - loss_of(theta - delta).numpy()) / (2 * step)
    np.testing.assert_allclose(gradient, numerical, rtol=2e-2, atol=2e-2)
    assert np.all(np.abs(gradient) > 0)

    # The localisation net's theta: its last layer starts at zero weights, so only that layer gets a
    # non-zero gradient at the start, but every weight of the net is on the gradient's path.
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(stn(x) * tf.constant(rng.normal(size=(2, 5, 6, 2)).astype("float32")))
    gradients = dict(zip([v.path for v in stn.trainable_variables], tape.gradient(loss, stn.trainable_variables)))
    assert len(gradients) == 10 and all(g is not None for g in gradients.values())
    for weight in (stn.theta_dense.kernel, stn.theta_dense.bias):
        assert np.any(gradients[weight.path].numpy())


def test_localization_rate_scales_how_far_the_transform_moves_from_the_identity():
    rng = np.random.default_rng(10)
    x = images(rng)
    slow, full = SpatialTransformer(localization_rate=0.1), SpatialTransformer(localization_rate=1.0)
    slow(x), full(x)
    randomize(full, rng)
    slow.set_weights(full.get_weights())
    _, slow_theta = slow(x, return_attention_scores=True)
    _, full_theta = full(x, return_attention_scores=True)
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    moved = to_numpy(full_theta) - identity
    assert np.abs(moved).max() > 0.1
    np.testing.assert_allclose(to_numpy(slow_theta) - identity, 0.1 * moved, atol=1e-5)
    old_config = {"name": "stn", "output_size": [4, 4], "localization_filters": [4, 4], "localization_units": 8}
    assert SpatialTransformer.from_config(old_config).localization_rate == 1.0  # saved before the rate existed


def test_bilinear_sample_reads_pixel_centres_exactly_and_interpolates_between_them():
    image = np.arange(12, dtype="float32").reshape(1, 3, 4, 1)
    x = np.array([[[-1.0, 1.0, -1.0 / 3.0]]], "float32")  # columns 0, 3 and 1
    y = np.array([[[-1.0, 1.0, 0.0]]], "float32")  # rows 0, 2 and 1
    np.testing.assert_allclose(to_numpy(bilinear_sample(image, x, y))[0, 0, :, 0], [0.0, 11.0, 5.0], atol=1e-5)
    halfway = to_numpy(bilinear_sample(image, np.array([[[0.0]]], "float32"), np.array([[[0.0]]], "float32")))
    np.testing.assert_allclose(halfway[0, 0, 0, 0], (5.0 + 6.0) / 2, atol=1e-5)  # between columns 1 and 2 of row 1


# ---------------------------------------------------------------------------
# Any size in a model, configs, errors
# ---------------------------------------------------------------------------
LAYERS = {
    "squeeze_excitation": lambda: SqueezeExcitation(reduction=2),
    "channel_attention": lambda: ChannelAttention(reduction=2),
    "spatial_attention": lambda: SpatialAttention(kernel_size=3),
    "cbam": lambda: CBAM(reduction=2, kernel_size=3),
    "selective_kernel": lambda: SelectiveKernel(filters=5, kernel_sizes=(3, 5), reduction=2, min_units=2),
    "residual_attention": lambda: ResidualAttention(filters=5),
    "cbam_batch_norm": lambda: CBAM(reduction=2, kernel_size=3, batch_norm=True),
    "selective_kernel_batch_norm": lambda: SelectiveKernel(filters=5, reduction=2, min_units=2, batch_norm=True),
    "residual_attention_batch_norm": lambda: ResidualAttention(filters=5, batch_norm=True),
    "spatial_transformer": lambda: SpatialTransformer(output_size=(4, 6), localization_filters=(4, 4)),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_config_round_trip_rebuilds_the_same_layer(name):
    rng = np.random.default_rng(8)
    x = images(rng)
    layer = LAYERS[name]()
    layer(x)
    randomize(layer, rng, scale=0.2)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    rebuilt = keras.saving.deserialize_keras_object(config)
    rebuilt(x)
    rebuilt.set_weights(layer.get_weights())
    assert rebuilt.get_config() == layer.get_config()
    np.testing.assert_allclose(to_numpy(rebuilt(x)), to_numpy(layer(x)), atol=1e-6)


def test_one_model_serves_every_image_size_and_saves(tmp_path):
    inputs = keras.Input((None, None, C))
    x = inputs
    for name in LAYERS:
        x = LAYERS[name]()(x) if name != "spatial_transformer" else x
    outputs = SpatialTransformer(localization_filters=(4, 4))(x)
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(9)
    for size in [(1, 1, 1), (2, 7, 5), (1, 10, 3)]:
        assert model(images(rng, *size)).shape == (*size, 5)
    path = tmp_path / "layers.keras"
    model.save(path)
    x = images(rng, 2, 6, 9)
    np.testing.assert_allclose(to_numpy(keras.saving.load_model(path)(x)), to_numpy(model(x)), atol=1e-5)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SqueezeExcitation(reduction=0), "`reduction` must be an int >= 1. Received: reduction=0"),
        (lambda: CBAM(reduction=1.5), "`reduction` must be an int >= 1. Received: reduction=1.5"),
        (lambda: SpatialAttention(kernel_size=4), "`kernel_size` must be an odd int >= 1. Received: kernel_size=4"),
        (lambda: CBAM(kernel_size=0), "Received: kernel_size=0"),
        (lambda: SelectiveKernel(0), "`filters` must be an int >= 1. Received: filters=0"),
        (
            lambda: SelectiveKernel(4, kernel_sizes=(3,)),
            r"`kernel_sizes` must be a tuple of 2 or more ints >= 1. Received: kernel_sizes=\(3,\)",
        ),
        (
            lambda: SelectiveKernel(4, kernel_sizes=(3, 4)),
            r"`kernel_sizes` must be a tuple of 2 or more odd ints >= 1. Received: kernel_sizes=\(3, 4\)",
        ),
        (lambda: SelectiveKernel(4, min_units=0), "`min_units` must be an int >= 1. Received: min_units=0"),
        (lambda: SqueezeExcitation(min_units=0), "`min_units` must be an int >= 1. Received: min_units=0"),
        (lambda: CBAM(min_units=1.5), "`min_units` must be an int >= 1. Received: min_units=1.5"),
        (lambda: ResidualAttention(filters=-1), "`filters` must be an int >= 1. Received: filters=-1"),
        (lambda: SpatialTransformer(output_size=(4,)), r"Received: output_size=\(4,\)"),
        (lambda: SpatialTransformer(localization_filters=(8,)), r"Received: localization_filters=\(8,\)"),
        (lambda: SpatialTransformer(localization_units=0), "Received: localization_units=0"),
        (lambda: SpatialTransformer(localization_rate=0), r"\(0, 1\]. Received: localization_rate=0"),
        (lambda: SpatialTransformer(localization_rate=1.5), "Received: localization_rate=1.5"),
    ],
)
def test_bad_arguments_are_errors_naming_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_feature_maps_without_a_channel_count_are_an_error_naming_the_shape():
    with pytest.raises(ValueError, match=r"\[batch, height, width, channels\].*Received: input_shape=\(2, 5, 4\)"):
        SqueezeExcitation(reduction=2)(np.ones((2, 5, 4), "float32"))


# ---------------------------------------------------------------------------
# ScaleAttention: fusing one trunk's maps of several scales
# ---------------------------------------------------------------------------
def scale_attention_reference(features, layer):
    """Chen et al. 2016: each map resized to the finest grid (nearest), then softmax weights per position."""
    height, width = features[0].shape[1:3]

    def up(f):
        rows = np.floor((np.arange(height) + 0.5) * f.shape[1] / height).astype(int)
        columns = np.floor((np.arange(width) + 0.5) * f.shape[2] / width).astype(int)
        return np.asarray(f, np.float64)[:, rows][:, :, columns]

    maps = np.stack([up(f) for f in features], axis=-1)  # (B, h, w, C, S)
    if layer.fusion == "average":
        return maps.mean(-1)
    if layer.fusion == "max":
        return maps.max(-1)
    head_input = np.concatenate([maps[..., s] for s in range(maps.shape[-1])], axis=-1)  # (B, h, w, C S)
    if layer.head_norm:  # layer normalisation per position, then its gamma and beta
        gamma, beta = (np.asarray(v, np.float64) for v in layer.head_norm_layer.get_weights())
        centred = head_input - head_input.mean(-1, keepdims=True)
        head_input = centred / np.sqrt(centred.var(-1, keepdims=True) + layer.head_norm_layer.epsilon) * gamma + beta
    logits = conv(conv(head_input, layer.head_conv), layer.scale_logits) / layer.temperature
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return (maps * weights[:, :, :, None, :]).sum(-1)


@pytest.mark.parametrize("fusion, head_norm", [("attention", False), ("average", False), ("max", False),
                                               ("attention", True)])  # fmt: skip
def test_scale_attention_matches_its_formula_on_grids_of_any_size(fusion, head_norm):
    rng = np.random.default_rng(11)
    features = [images(rng, 2, 7, 5, 3), images(rng, 2, 4, 3, 3), images(rng, 2, 2, 2, 3)]  # odd sizes on purpose
    layer = ScaleAttention(fusion, units=4, head_norm=head_norm, temperature=3.0 if head_norm else 1.0)
    layer(features)
    randomize(layer, rng)
    outputs, weights = layer(features, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(outputs), scale_attention_reference(features, layer), atol=ATOL, rtol=1e-5)
    assert weights.shape == (2, 7, 5, 3)
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=1e-5)  # a distribution over the scales
    assert layer.get_config()["head_norm"] == head_norm
    assert ScaleAttention.from_config({"fusion": fusion, "units": 4}).head_norm is False  # saved before the option
    rebuilt = ScaleAttention.from_config(layer.get_config())
    rebuilt(features)
    rebuilt.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(rebuilt(features)), to_numpy(outputs), atol=1e-6)


def test_scale_attention_rejects_bad_arguments_naming_them():
    with pytest.raises(ValueError, match="`fusion` must be one of .*fusion='median'"):
        ScaleAttention("median")
    with pytest.raises(ValueError, match="`units` must be an int >= 1. Received: units=0"):
        ScaleAttention(units=0)
    with pytest.raises(ValueError, match="`temperature` must be a number > 0. Received: temperature=0"):
        ScaleAttention(temperature=0)
    with pytest.raises(ValueError, match="two or more scales. Received: 1"):
        ScaleAttention()([np.ones((1, 4, 4, 2), "float32")])
    with pytest.raises(ValueError, match="the same channels"):
        ScaleAttention()([np.ones((1, 4, 4, 2), "float32"), np.ones((1, 2, 2, 3), "float32")])
