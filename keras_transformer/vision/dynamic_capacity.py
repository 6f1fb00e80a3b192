"""Dynamic Capacity Networks: a cheap network everywhere, an expensive one only where the entropy says.

Almahairi, Ballas, Cooijmans, Zheng, Larochelle and Courville 2016, "Dynamic Capacity Networks"
(https://arxiv.org/abs/1511.07838), sections 2 and 3:

    c = f_c(x)                                   coarse features on a grid, (B, h, w, D): cheap, the whole image
    z_c = g(c), p_c = softmax(z_c)               the coarse prediction
    s_ij = || dH(p_c) / dc_ij ||_2               saliency: how much the features at (i, j) move the
                                                 entropy H = -sum_k p_k log p_k of the coarse prediction
    I = top_k(s)                                 the k most salient positions
    f_ij = f_f(x_ij), (i, j) in I                fine features of those positions' input patches only
    m = c with c_ij replaced by f_ij on I         the mixed map, (B, h, w, D)
    z = g(m)                                     the prediction

and trained with the cross-entropy of the mixed prediction, the coarse prediction's own
cross-entropy, and the hint term sum_{ij in I} ||c_ij - stop_gradient(f_ij)||^2 that pulls the
coarse features toward the fine ones where both exist. The selection (and the gradient that
makes it) is a constant to training.

Here, for images `[B, H, W, C]` padded with zeros at the bottom and right to a multiple of the
patch size p, the grid has h = ceil(H / p) rows and w = ceil(W / p) columns, one per p x p
block of the image:

    f_c   the image downsampled by `coarse_factor` and 3x3 convolutions (relu, `coarse_filters`),
          then a `p / coarse_factor` convolution of that stride (linear, D). The downsampling is
          average pooling before the convolutions (`coarse_downsample="pool"`) or, as in the
          paper, strides of 2 in the first log2(`coarse_factor`) convolutions, which then read
          the full-resolution image (`"stride"`)
    f_f   on one p x p patch: 3x3 convolutions (relu, `fine_filters`) at full resolution, a 2x2
          max pool after every one but the first, and a convolution as large as what is left
          (linear, D): one D-vector per patch, the same shape as the coarse features of a position
    g     a 3x3 convolution (relu, `top_units`), a global pooling over positions (`top_pooling`:
          average, or the paper's max, under which a few fine vectors are not diluted among the
          coarse ones), a dense layer

With `batch_norm` naming a network (`"coarse"`, `"fine"`, or both; the paper trains with batch
normalisation) every 3x3 convolution of that network is followed by batch normalisation before
its relu; the top network is left without it, so that the saliency below stays the same closed
form in training and inference.

The saliency is computed in closed form with `keras.ops` (no autodiff inside the forward pass,
so on any backend), by `entropy_saliency`: with u the top convolution's pre-activations and W
the dense kernel,

    dH/dz  = -p (log p + H)                      (B, K)
    dH/du  = 1[u > 0] (W dH/dz) / (h w)          (B, h, w, U), the relu's mask and the average pool;
                                                 with max pooling, 1[u > 0] (W dH/dz) at each
                                                 channel's largest u only (split among ties)
    dH/dc  = conv_transpose(dH/du, kernel)        (B, h, w, D), the convolution's gradient in its input

The relu and the convolution are what make the gradient differ from one position to another: if
g only pooled, it would be the same vector at every position.

`DynamicCapacityNetwork(mode=...)` builds the DCN (`"dcn"`) and its two bounds with the same top
network: `"coarse"` (g on the coarse features alone) and `"fine"` (g on the fine features of every
patch). `dynamic_capacity_flops.flop_counts` counts their forward FLOPs from the layers' shapes.

Deviations from the paper: its coarse and fine networks and top layers are larger, and its patches
are the receptive fields of the positions (which overlap); here each position's patch is its own
p x p block of the image (they tile it), so that the fine-everywhere model is exactly the fine
network on every block. The hint term is averaged over the selected positions and the D
features (the paper sums squared distances), weighted by `hint_weight`. Both networks' last
convolutions are linear: with a relu there, the fine network of the benchmark (vision_dcn.py)
sent every feature to 0 in its first steps and stayed at chance (a blank patch gives exactly 0,
where the relu has no gradient); the 3x3 convolutions start from He-normal weights.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_ints, check_number
from keras_transformer.vision.normalized import Normalized

MODES = ("dcn", "coarse", "fine")
DOWNSAMPLINGS = ("pool", "stride")
TOP_POOLINGS = ("average", "max")
NETWORKS = ("coarse", "fine")


def grid_size(height, width, patch_size):
    """The grid of an image `height x width` cut into `patch_size` blocks: `(ceil(height / p), ceil(width / p))`."""
    return -(-height // patch_size), -(-width // patch_size)


def pad_to_patches(images, patch_size):
    """`images [B, H, W, C]` zero-padded at the bottom and right to `[B, h p, w p, C]`, h = ceil(H/p), w = ceil(W/p)."""
    shape = ops.shape(images)
    pad_h, pad_w = (-shape[1]) % patch_size, (-shape[2]) % patch_size
    if isinstance(pad_h, int) and isinstance(pad_w, int) and pad_h == 0 and pad_w == 0:
        return images
    return ops.pad(images, [[0, 0], [0, pad_h], [0, pad_w], [0, 0]])


def image_patches(images, patch_size):
    """The p x p blocks of images `[B, H, W, C]` (zero-padded as `pad_to_patches`), row by row.

    Args:
        images: float tensor `[B, H, W, C]`.
        patch_size: int, the block side p.

    Returns:
        float tensor `[B, h * w, p, p, C]`: block n is rows `(n // w) p ...` and columns
        `(n % w) p ...` of the padded image.
    """
    padded = pad_to_patches(images, patch_size)
    shape = ops.shape(padded)
    h, w, channels = shape[1] // patch_size, shape[2] // patch_size, shape[3]
    blocks = ops.reshape(padded, (shape[0], h, patch_size, w, patch_size, channels))
    blocks = ops.transpose(blocks, (0, 1, 3, 2, 4, 5))  # (B, h, w, p, p, C)
    return ops.reshape(blocks, (shape[0], h * w, patch_size, patch_size, channels))


def gather_positions(values, positions):
    """`values [B, N, ...]` at `positions [B, k]` (ints in [0, N)) of each row: `[B, k, ...]`."""
    shape = ops.shape(values)
    batch, n = shape[0], shape[1]
    flat = ops.reshape(values, (-1, *values.shape[2:]))  # (B * N, ...)
    index = ops.reshape(positions + ops.arange(batch, dtype=positions.dtype)[:, None] * n, (-1,))  # (B * k,)
    gathered = ops.take(flat, index, axis=0)  # (B * k, ...)
    return ops.reshape(gathered, (batch, ops.shape(positions)[1], *values.shape[2:]))


def scatter_positions(coarse, fine, positions):
    """The mixed map: `coarse [B, N, D]` with the rows at `positions [B, k]` replaced by `fine [B, k, D]`.

    The positions of a row must be distinct (as `top_k`'s are). Differentiable in `coarse` (where it
    is kept) and in `fine`.

    Returns:
        float tensor `[B, N, D]`.
    """
    selected = ops.one_hot(positions, ops.shape(coarse)[1], dtype=coarse.dtype)  # (B, k, N)
    replaced = ops.sum(selected, axis=1)[:, :, None]  # (B, N, 1): 1 where a fine vector goes
    placed = ops.einsum("bkn,bkd->bnd", selected, ops.cast(fine, coarse.dtype))  # (B, N, D)
    return coarse * (1.0 - replaced) + placed


def entropy_saliency(pre_activations, logits, top_kernel, dense_kernel, pooling="average"):
    """The paper's saliency: the norm of the gradient of the coarse prediction's entropy in each position's features.

    For the top network g = conv (kernel `top_kernel`, "same" padding, stride 1, relu) -> global
    pool (`pooling`) -> dense (`dense_kernel`) -> softmax, in closed form (the module docstring gives
    the three steps). Nothing here is differentiated through: call it on stopped gradients.

    Args:
        pre_activations: float tensor `[B, h, w, U]`, the top convolution's outputs u before its relu.
        logits: float tensor `[B, K]`, the coarse prediction's logits z = g(c).
        top_kernel: float tensor `[kh, kw, D, U]` (odd kh, kw), the top convolution's kernel.
        dense_kernel: float tensor `[U, K]`, the dense layer's kernel.
        pooling: `"average"` (the pooled gradient spread evenly over the h w positions) or `"max"`
            (all of it at the position of each channel's largest relu(u), split evenly among ties;
            none for a channel whose u is nowhere positive).

    Returns:
        `(saliency, gradient)`: float tensors `[B, h, w]` (the norms s_ij) and `[B, h, w, D]`
        (dH/dc).
    """
    check_choice("pooling", pooling, TOP_POOLINGS)
    logits = ops.cast(logits, "float32")
    log_p = ops.log_softmax(logits, axis=-1)
    p = ops.exp(log_p)
    entropy = -ops.sum(p * log_p, axis=-1, keepdims=True)  # (B, 1)
    d_logits = -p * (log_p + entropy)  # (B, K)
    d_pooled = ops.matmul(d_logits, ops.transpose(ops.cast(dense_kernel, "float32")))  # (B, U)
    pre_activations = ops.cast(pre_activations, "float32")
    mask = ops.cast(pre_activations > 0, "float32")  # (B, h, w, U)
    if pooling == "average":
        shape = ops.shape(pre_activations)
        share = mask / ops.cast(shape[1] * shape[2], "float32")  # d mean / d relu(u), through the relu
    else:
        active = ops.relu(pre_activations)
        winners = mask * ops.cast(active >= ops.max(active, axis=(1, 2), keepdims=True), "float32")
        share = winners / ops.maximum(ops.sum(winners, axis=(1, 2), keepdims=True), 1.0)
    d_pre = share * d_pooled[:, None, None, :]  # (B, h, w, U)
    gradient = ops.conv_transpose(d_pre, ops.cast(top_kernel, "float32"), strides=1, padding="same")  # (B, h, w, D)
    return ops.sqrt(ops.sum(ops.square(gradient), axis=-1)), gradient


@keras.saving.register_keras_serializable(package="keras_transformer")
class DynamicCapacityNetwork(keras.Model):
    """A Dynamic Capacity Network (Almahairi et al. 2016), or one of its two bounds, as a classifier.

    Almahairi et al. 2016, "Dynamic Capacity Networks" (https://arxiv.org/abs/1511.07838); the
    module docstring gives the equations, the three networks and the deviations.

    Args:
        num_classes: int, the classes K of the logits.
        channels: int, the images' channels C.
        patch_size: int, the side p of the image block behind each grid position (and of a fine
            patch); a multiple of `coarse_factor`.
        coarse_factor: int, the coarse network's downsampling of the image before its last
            convolution (by average pooling, or by strided convolutions: `coarse_downsample`).
        coarse_filters: tuple of ints, the coarse network's 3x3 convolutions (may be empty with
            `"pool"`; at least log2(`coarse_factor`) of them with `"stride"`).
        coarse_downsample: `"pool"` (average pooling by `coarse_factor`, then the convolutions at
            the lower resolution) or `"stride"` (the paper's: the convolutions read the
            full-resolution image, the first log2(`coarse_factor`) with stride 2; `coarse_factor`
            a power of 2).
        fine_filters: tuple of ints, the fine network's 3x3 convolutions (at least one).
        features: int, the feature width D of both networks at each position.
        top_units: int, the top convolution's channels U.
        top_kernel_size: odd int, the top convolution's size.
        top_pooling: `"average"` or `"max"` (the paper's), g's global pooling over positions.
        batch_norm: the networks whose 3x3 convolutions are followed by batch normalisation before
            their relu (`normalized.Normalized`; the convolution loses its bias): a list of
            `NETWORKS` (`"coarse"`, `"fine"`), or a bool (True: both, False: neither). The linear
            last convolutions and the top network stay as they are.
        k: int, the patches the fine network reads per image (`"dcn"` only); at most h * w.
        mode: one of `MODES`: `"dcn"`, `"coarse"` (g(f_c(x)), the cheap bound) or `"fine"`
            (g of f_f on every patch, the expensive bound).
        hint_weight: float >= 0, the weight of the hint term in the training loss (`"dcn"`).
        coarse_weight: float >= 0, the weight of the coarse prediction's cross-entropy (`"dcn"`).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        images: float tensor `[B, H, W, C]`, any H and W (padded to a multiple of p inside).
        training: bool; with `"dcn"`, True returns the dict below (the loss needs its coarse
            logits and hint).
        return_details: bool; if True, return the dict below.
        k: None (the model's `k`) or an int, the patches to read in this call (`"dcn"`).
        positions: None (the k most salient) or int tensor `[B, k']`, distinct flat grid indices
            per image: the patches to read instead (`"dcn"`; a control, e.g. random patches).

    Returns:
        logits `[B, K]`; or a dict: `"logits"` `[B, K]`, `"features"` `[B, h, w, D]` (the map g
        reads: coarse, fine, or mixed), and for `"dcn"` also `"coarse_logits"` `[B, K]`,
        `"saliency"` `[B, h, w]`, `"positions"` `[B, k]` (int32, flat grid indices `row * w +
        column`, most salient first), `"coarse_features"` `[B, h, w, D]`, `"fine_features"`
        `[B, k, D]` and `"hint"` (scalar).

    Raises:
        ValueError: a bad argument, or `k` larger than the grid (h * w) of the images.

    Example:
    >>> model = DynamicCapacityNetwork(num_classes=3, patch_size=4, coarse_factor=2, fine_filters=(4,), k=2,
    ...                                features=4, top_units=4, coarse_filters=(4,))
    >>> out = model(np.zeros((2, 13, 16, 1), "float32"), return_details=True)
    >>> tuple(out["logits"].shape), tuple(out["saliency"].shape), tuple(out["positions"].shape)
    ((2, 3), (2, 4, 4), (2, 2))
    """

    def __init__(
        self,
        num_classes=10,
        channels=1,
        patch_size=8,
        coarse_factor=4,
        coarse_filters=(16,),
        fine_filters=(32, 32, 64),
        features=32,
        top_units=32,
        top_kernel_size=3,
        top_pooling="average",
        coarse_downsample="pool",
        batch_norm=False,
        k=4,
        mode="dcn",
        hint_weight=1.0,
        coarse_weight=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("mode", mode, MODES)
        check_choice("top_pooling", top_pooling, TOP_POOLINGS)
        check_choice("coarse_downsample", coarse_downsample, DOWNSAMPLINGS)
        for name, value in (
            ("num_classes", num_classes),
            ("channels", channels),
            ("patch_size", patch_size),
            ("coarse_factor", coarse_factor),
            ("features", features),
            ("top_units", top_units),
            ("k", k),
        ):
            check_int(name, value, 1)
        if patch_size % coarse_factor:
            raise ValueError(
                f"`patch_size` must be a multiple of `coarse_factor` ({coarse_factor}). "
                f"Received: patch_size={patch_size!r}"
            )
        if check_int("top_kernel_size", top_kernel_size, 1) % 2 == 0:
            raise ValueError(
                f"`top_kernel_size` must be an odd int >= 1. Received: top_kernel_size={top_kernel_size!r}"
            )
        check_number("hint_weight", hint_weight, 0)
        check_number("coarse_weight", coarse_weight, 0)
        self.num_classes, self.channels, self.patch_size = num_classes, channels, patch_size
        self.coarse_factor = coarse_factor
        self.coarse_filters = check_ints("coarse_filters", coarse_filters, 1, min_length=0)
        if coarse_downsample == "stride":
            halvings = coarse_factor.bit_length() - 1
            if coarse_factor != 1 << halvings or len(self.coarse_filters) < halvings:
                raise ValueError(
                    "With coarse_downsample='stride', `coarse_factor` must be a power of 2 and `coarse_filters` "
                    f"hold at least log2(coarse_factor) convolutions. Received: coarse_factor={coarse_factor!r}, "
                    f"coarse_filters={coarse_filters!r}"
                )
        self.top_pooling, self.coarse_downsample = top_pooling, coarse_downsample
        if isinstance(batch_norm, bool):
            batch_norm = NETWORKS if batch_norm else ()
        elif isinstance(batch_norm, str):
            batch_norm = (batch_norm,)
        self.batch_norm = tuple(check_choice("batch_norm", name, NETWORKS) for name in dict.fromkeys(batch_norm))
        self.fine_filters = check_ints("fine_filters", fine_filters, 1)
        self.features, self.top_units, self.top_kernel_size = features, top_units, top_kernel_size
        self.k, self.mode = k, mode
        self.hint_weight, self.coarse_weight = float(hint_weight), float(coarse_weight)
        if mode in ("dcn", "coarse"):
            self.coarse_net = keras.Sequential(self._coarse_layers(), name="coarse")
        if mode in ("dcn", "fine"):
            self.fine_net = keras.Sequential(self._fine_layers(), name="fine")
        self.top_conv = keras.layers.Conv2D(
            top_units, top_kernel_size, padding="same", kernel_initializer="he_normal", name="top_conv"
        )
        pool = keras.layers.GlobalMaxPooling2D if top_pooling == "max" else keras.layers.GlobalAveragePooling2D
        self.top_pool = pool(name="top_pool")
        self.classifier = keras.layers.Dense(num_classes, name="logits")

    def _relu_conv(self, network, width, name, strides=1):
        """A 3x3 "same" convolution of `network` and its relu, normalised between them if `batch_norm` names it."""
        if network not in self.batch_norm:
            return keras.layers.Conv2D(
                width, 3, strides, padding="same", activation="relu", kernel_initializer="he_normal", name=name
            )
        conv = keras.layers.Conv2D(
            width, 3, strides, padding="same", use_bias=False, kernel_initializer="he_normal", name="linear"
        )
        return Normalized(conv, "relu", name=name)

    def _coarse_layers(self):
        """f_c's layers: downsample by `coarse_factor` (pooling or strides), 3x3 convolutions, a last one to D."""
        pool = self.coarse_downsample == "pool" and self.coarse_factor > 1
        layers = [keras.layers.AveragePooling2D(self.coarse_factor, name="downsample")] if pool else []
        left = self.coarse_factor if self.coarse_downsample == "stride" else 1  # the stride still to take
        for i, width in enumerate(self.coarse_filters, start=1):
            layers.append(self._relu_conv("coarse", width, f"coarse_conv_{i}", 2 if left > 1 else 1))
            left = max(left // 2, 1)
        cell = self.patch_size // self.coarse_factor
        layers.append(keras.layers.Conv2D(self.features, cell, strides=cell, name="coarse_out"))  # linear
        return layers

    def _fine_layers(self):
        """f_f's layers on a p x p patch: 3x3 convolutions, a 2x2 max pool after each but the first, a last one to D."""
        layers, side = [], self.patch_size
        for i, width in enumerate(self.fine_filters, start=1):
            layers.append(self._relu_conv("fine", width, f"fine_conv_{i}"))
            if i > 1:
                layers.append(keras.layers.MaxPooling2D(2, padding="same", name=f"fine_pool_{i}"))
                side = -(-side // 2)
        layers.append(keras.layers.Conv2D(self.features, side, name="fine_out"))  # (N, 1, 1, D), linear
        return layers

    def build(self, input_shape):
        if self.mode in ("dcn", "coarse"):
            self.coarse_net.build((None, None, None, self.channels))
        if self.mode in ("dcn", "fine"):
            self.fine_net.build((None, self.patch_size, self.patch_size, self.channels))
        self.top_conv.build((None, None, None, self.features))
        self.classifier.build((None, self.top_units))
        self.built = True

    def coarse_features(self, images):
        """f_c on the whole (padded) image: `[B, H, W, C]` -> `[B, h, w, D]`."""
        return self.coarse_net(pad_to_patches(images, self.patch_size))

    def fine_features(self, patches):
        """f_f on patches `[N, p, p, C]` -> `[N, D]`."""
        return ops.reshape(self.fine_net(patches), (-1, self.features))

    def top(self, features):
        """g: `[B, h, w, D]` -> `(logits [B, K], pre-activations of the top convolution [B, h, w, U])`."""
        pre_activations = self.top_conv(features)
        return self.classifier(self.top_pool(ops.relu(pre_activations))), pre_activations

    def call(self, images, training=None, return_details=False, k=None, positions=None):
        if self.mode == "coarse":
            features = self.coarse_features(images)
            logits, _ = self.top(features)
            return {"logits": logits, "features": features} if return_details else logits
        shape = ops.shape(images)
        patches = image_patches(images, self.patch_size)  # (B, N, p, p, C)
        h, w = grid_size(shape[1], shape[2], self.patch_size)
        if self.mode == "fine":
            fine = self.fine_features(ops.reshape(patches, (-1, self.patch_size, self.patch_size, self.channels)))
            features = ops.reshape(fine, (shape[0], h, w, self.features))
            logits, _ = self.top(features)
            return {"logits": logits, "features": features} if return_details else logits
        k = self.k if k is None else check_int("k", k, 1)
        if isinstance(h, int) and isinstance(w, int) and k > h * w:
            raise ValueError(
                f"`k` must be at most the grid's {h} x {w} = {h * w} positions of {shape[1]} x {shape[2]} images "
                f"in {self.patch_size}-pixel patches. Received: k={k!r}"
            )
        coarse = self.coarse_features(images)  # (B, h, w, D)
        coarse_logits, pre_activations = self.top(coarse)
        saliency, _ = entropy_saliency(
            ops.stop_gradient(pre_activations),
            ops.stop_gradient(coarse_logits),
            ops.stop_gradient(self.top_conv.kernel),
            ops.stop_gradient(self.classifier.kernel),
            self.top_pooling,
        )
        if positions is None:
            _, positions = ops.top_k(ops.reshape(saliency, (shape[0], -1)), k)  # (B, k), most salient first
        positions = ops.cast(positions, "int32")
        k = positions.shape[1]
        chosen = gather_positions(patches, positions)  # (B, k, p, p, C)
        fine = self.fine_features(ops.reshape(chosen, (-1, self.patch_size, self.patch_size, self.channels)))
        fine = ops.reshape(fine, (shape[0], k, self.features))  # (B, k, D)
        coarse_flat = ops.reshape(coarse, (shape[0], -1, self.features))  # (B, N, D)
        mixed = ops.reshape(scatter_positions(coarse_flat, fine, positions), ops.shape(coarse))
        logits, _ = self.top(mixed)
        if not (return_details or training):
            return logits
        hint = ops.mean(ops.square(gather_positions(coarse_flat, positions) - ops.stop_gradient(fine)))
        return {
            "logits": logits,
            "features": mixed,
            "coarse_logits": coarse_logits,
            "saliency": saliency,
            "positions": positions,
            "coarse_features": coarse,
            "fine_features": fine,
            "hint": hint,
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss of the logits; with the training dict of `"dcn"`, plus the coarse and hint terms.

        The paper's objective: the compiled loss (the cross-entropy) of the mixed prediction +
        `coarse_weight` x the cross-entropy of the coarse prediction + `hint_weight` x the hint.
        """
        if not isinstance(y_pred, dict):
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        loss = super().compute_loss(x, y, y_pred["logits"], sample_weight, training=training)
        coarse = keras.losses.sparse_categorical_crossentropy(y, y_pred["coarse_logits"], from_logits=True)
        if sample_weight is not None:
            coarse = coarse * ops.cast(ops.reshape(sample_weight, ops.shape(coarse)), coarse.dtype)
        return loss + self.coarse_weight * ops.mean(coarse) + self.hint_weight * y_pred["hint"]

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """The compiled metrics of the logits (of the training dict's `"logits"` in training)."""
        if isinstance(y_pred, dict):
            y_pred = y_pred["logits"]
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def grid(self, height, width):
        """The grid `(h, w)` of `height x width` images."""
        return grid_size(height, width, self.patch_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "channels": self.channels,
                "patch_size": self.patch_size,
                "coarse_factor": self.coarse_factor,
                "coarse_filters": list(self.coarse_filters),
                "fine_filters": list(self.fine_filters),
                "features": self.features,
                "top_units": self.top_units,
                "top_kernel_size": self.top_kernel_size,
                "top_pooling": self.top_pooling,
                "coarse_downsample": self.coarse_downsample,
                "batch_norm": list(self.batch_norm),
                "k": self.k,
                "mode": self.mode,
                "hint_weight": self.hint_weight,
                "coarse_weight": self.coarse_weight,
            }
        )
        return config
