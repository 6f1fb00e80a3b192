"""A small CNN classifier, plain or with one kind of attention, and the spatial map it attends with.

`build_classifier(attention=...)` builds the same convolutional network with each attention of
`keras_transformer.vision` (`ATTENTIONS`), so that they can be compared at equal depth and width.
Its blocks are residual blocks (`block="residual"`, the default) or plain ones (`block="plain"`):

    images [B, H, W, C]                                   any size
      stn only: SpatialTransformer -> glimpse [B, g, g, C]   (`build_stn_classifier`, head "pooled")
      per block i (filters f_i), input x [B, h, w, c]:
        residual block:
          branch = conv_3x3(x)                            [B, h, w, f_i], no activation
                   "sk": SelectiveKernel(f_i, (3, 5))(x) instead (the 5x5: a 3x3 dilated by 2)
                   "residual": ResidualAttention(f_i)(x), (1 + M(x)) * T(x), instead
          branch = SqueezeExcitation(branch)              "se" only
                   CBAM(branch)                           "cbam" only
          x = relu(shortcut(x) + branch)                  shortcut: conv_1x1 (no bias) if c != f_i,
                                                          the identity otherwise
        plain block: the same branch with a relu after conv_3x3, and x = branch
        x = max_pool_2x2(x)                               [B, ceil(h/2), ceil(w/2), f_i]
      global average pooling -> Dense(classes)            logits [B, classes]

`build_stn_classifier` is the one builder of a spatial transformer in front of these blocks:
`build_classifier("stn")` is its pooled head, the Spatial Transformer paper's ST-CNN
(`keras_transformer.vision.st_cnn`) its dense head on plain blocks.

The residual block puts the attention where the SE and CBAM papers put it: on the residual
branch, before the addition, so a gate near 0 damps only the branch and the block still passes
`x` on. In the plain block the gates (about 0.5 at initialization) scale everything that goes to
the next block. Deviation: the papers' residual blocks are ResNet's (two or three convolutions
per branch); here the branch has one convolution, so that both kinds of block have the same
depth. As in ResNet, the branch's last convolution has no activation (the relu comes after the
addition); SelectiveKernel and ResidualAttention keep the relus of their own formulas.

Normalization (`batch_norm=True`, the papers' setting; off by default, the models as first
built): batch normalization after the branch's convolution (before the plain block's relu) and
after the 1x1 shortcut, as in ResNet, and inside the attentions where their papers put it:
after SelectiveKernel's convolutions and fuse layer, between CBAM's spatial convolution and its
sigmoid, after ResidualAttention's trunk and mask convolutions. SE's and CBAM's channel MLPs
have none, as in their papers.

Each model also reports one spatial map `[B, H, W]` over the input image (`attention_map`), to
check whether it looks at the object:

    cbam        the last block's spatial attention map M_s, upsampled to the image
    residual    the last block's mask M(x), averaged over channels, upsampled
    stn         the glimpse's footprint: 1 on the input pixels inside the sampled parallelogram,
                0 elsewhere
    none, se, sk    no spatial attention: the mean over channels of the last block's (relu)
                    outputs, upsampled; a reference, not attention
"""

import collections

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_ints
from keras_transformer.vision.channel import SelectiveKernel, SqueezeExcitation
from keras_transformer.vision.mixed import CBAM, ResidualAttention
from keras_transformer.vision.normalized import MOMENTUM
from keras_transformer.vision.patches import PatchEmbedding, RolloutMap
from keras_transformer.vision.scale import ScaleAttention, upsample_to_grid
from keras_transformer.vision.spatial import SpatialTransformer, normalized_coordinates

ATTENTIONS = ("none", "se", "sk", "cbam", "residual", "stn", "vit")
BLOCKS = ("residual", "plain")
# `build_stn_classifier`'s heads and front ends.
HEADS = ("pooled", "dense")
TRANSFORMS = ("learned", "identity", "none")
LABELS = {
    "none": "baseline CNN",
    "se": "+ SE",
    "sk": "+ SK",
    "cbam": "+ CBAM",
    "residual": "+ residual attention",
    "stn": "STN in front",
    "vit": "ViT (no CNN)",
}
# What each model's `attention_map` is.
MAP_KINDS = {
    "none": "activation",
    "se": "activation",
    "sk": "activation",
    "cbam": "spatial attention",
    "residual": "mask",
    "stn": "glimpse",
    "vit": "attention rollout",
}

Classifier = collections.namedtuple("Classifier", ["model", "attention_model"])
Classifier.__doc__ = """A classifier and the same network with its spatial map as a second output.

Attributes:
    model: `keras.Model`, images `[B, H, W, C]` -> logits `[B, classes]`; train this one.
    attention_model: `keras.Model` sharing every layer with `model`, images -> `{"logits": [B,
        classes], "attention_map": [B, H, W]}`; save and export this one.
"""


@keras.saving.register_keras_serializable(package="keras_transformer")
class UpsampleToImage(keras.layers.Layer):
    """A map `[B, h, w]` over a feature grid, resized (nearest neighbour) to the image `[B, H, W, C]`: `[B, H, W]`.

    Image row i reads feature row `floor((i + 0.5) h / H)`, the cell it falls in when the grid's
    cells tile the image evenly (`keras_transformer.vision.scale.upsample_to_grid`).
    """

    def call(self, feature_map, images):
        image = ops.shape(images)
        return upsample_to_grid(feature_map[..., None], image[1], image[2])[..., 0]  # (B, H, W)


@keras.saving.register_keras_serializable(package="keras_transformer")
class GlimpseFootprint(keras.layers.Layer):
    """Where a spatial transformer looks: 1 on the input pixels inside its glimpse, 0 elsewhere, `[B, H, W]`.

    The glimpse of `theta [B, 2, 3]` is the parallelogram `theta @ (u, v, 1)` for u, v in [-1, 1]
    (normalized coordinates, as `affine_grid`): a pixel at p is inside when
    `A^-1 (p - t)` lies in the square, with `A` the first two columns of theta and `t` the third.
    """

    def call(self, theta, images):
        shape = ops.shape(images)
        theta = ops.cast(theta, "float32")
        x = normalized_coordinates(shape[2])[None, None, :]  # (1, 1, W)
        y = normalized_coordinates(shape[1])[None, :, None]  # (1, H, 1)
        a, b, tx = theta[:, 0, 0, None, None], theta[:, 0, 1, None, None], theta[:, 0, 2, None, None]
        c, d, ty = theta[:, 1, 0, None, None], theta[:, 1, 1, None, None], theta[:, 1, 2, None, None]
        determinant = a * d - b * c
        determinant = ops.where(ops.abs(determinant) < 1e-6, 1e-6, determinant)
        dx, dy = x - tx, y - ty  # (B, H, W)
        u = (d * dx - b * dy) / determinant
        v = (-c * dx + a * dy) / determinant
        return ops.cast((ops.abs(u) <= 1.0) & (ops.abs(v) <= 1.0), "float32")  # (B, H, W)


def build_classifier(
    attention="none",
    block="residual",
    num_classes=10,
    channels=1,
    filters=(16, 32, 32),
    reduction=16,
    spatial_kernel_size=7,
    glimpse_size=(24, 24),
    image_size=None,
    batch_norm=False,
):
    """The small CNN with one kind of attention (or none), and its spatial map; or a small ViT instead.

    Args:
        attention: one of `ATTENTIONS`: `"none"` (the baseline), `"se"`, `"sk"`, `"cbam"`,
            `"residual"`, `"stn"`.
        block: one of `BLOCKS`: `"residual"`, each block `relu(shortcut(x) + branch(x))` with the
            attention on the branch, or `"plain"`, each block `branch(x)` (the module docstring
            draws both).
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.
        filters: tuple of ints, the convolution channels of each block (one block each).
        reduction: int, the reduction ratio of SE, SK and CBAM's channel MLP (the papers' 16; SE
            and CBAM keep at least 8 hidden units, SK at least 32, as its paper's L).
        spatial_kernel_size: odd int, the size of CBAM's spatial convolution (the paper's 7).
        glimpse_size: `(height, width)` of the spatial transformer's output (`"stn"` only).
        image_size: `(height, width)` of the images (`"vit"` only, which needs it; the others
            take any size). `"vit"` is `build_vit_classifier` at its defaults: no CNN at all.
        batch_norm: bool, batch normalization in the trunk and in every attention branch, as the
            papers build them (the module docstring says where); not for `"vit"`.

    Returns:
        A `Classifier(model, attention_model)`; both take images of any height and width (but
        `"vit"`'s, of `image_size`).

    Raises:
        ValueError: an unknown `attention` or `block`, empty `filters`, `"vit"` without `image_size`.
    """
    check_choice("attention", attention, ATTENTIONS)
    check_choice("block", block, BLOCKS)
    filters = check_ints("filters", filters, 1)  # one block each
    name = f"classifier_{attention}" if block == "residual" else f"classifier_{attention}_plain"
    if attention == "vit":
        if image_size is None:
            raise ValueError("attention='vit' needs image_size: its position embeddings are one per patch")
        return build_vit_classifier(image_size, num_classes=num_classes, channels=channels)
    if attention == "stn":
        return build_stn_classifier(
            "pooled",
            block=block,
            glimpse_size=glimpse_size,
            num_classes=num_classes,
            channels=channels,
            filters=filters,
            batch_norm=batch_norm,
            name=name,
        )
    images = keras.Input((None, None, channels), name="images")
    x, scores, last_features = _blocks(images, filters, attention, block, reduction, spatial_kernel_size, batch_norm)
    logits = _head(x, "pooled", num_classes)
    return _classifier(images, logits, _attention_map(attention, images, scores, last_features), name)


def build_vit_classifier(
    image_size, patch_size=4, d_model=64, num_heads=4, num_blocks=4, d_ff=128, num_classes=10, channels=1
):
    """A small Vision Transformer (Dosovitskiy et al. 2021) of the package's own layers, and its rollout map.

        images [B, H, W, C] -> PatchEmbedding (P x P patches, a class token, learned positions) [B, 1 + N, D]
          -> EncoderBlock x num_blocks (the Transformer's: multi-head self-attention, feed-forward,
             LayerNorm after each residual, as in the paper's encoder; the ViT paper puts it before)
          -> the class token's vector -> Dense(classes) = logits

    The spatial map (`attention_map`) is the class token's attention rollout over the patches
    (`patches.attention_rollout`), resized to the image.

    Args:
        image_size: `(height, width)`, multiples of `patch_size`.
        patch_size: int P.
        d_model: int D.
        num_heads: int, heads of every self-attention; `d_model` must be divisible by it.
        num_blocks: int, encoder blocks.
        d_ff: int, the feed-forward's inner width.
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.

    Returns:
        A `Classifier(model, attention_model)` named `classifier_vit`.
    """
    from keras_transformer.layers import EncoderBlock

    height, width = check_ints("image_size", image_size, 1)
    check_int("num_blocks", num_blocks, 1)
    images = keras.Input((height, width, channels), name="images")
    tokens = PatchEmbedding(patch_size, d_model, name="patch_embedding")(images)  # (B, 1 + N, D)
    weights = []
    for index in range(num_blocks):
        block = EncoderBlock(num_heads=num_heads, d_ff=d_ff, name=f"encoder_block_{index}")
        tokens, block_weights = block(tokens, return_attention_scores=True)
        weights.append(block_weights["self_attention"])  # (B, heads, 1 + N, 1 + N)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(tokens[:, 0])
    rollout = RolloutMap(height // patch_size, width // patch_size, name="rollout")(weights)
    return _classifier(images, logits, UpsampleToImage(name="rollout_on_image")(rollout, images), "classifier_vit")


def build_stn_classifier(
    head="pooled",
    transform="learned",
    block="residual",
    image_size=None,
    glimpse_size=(24, 24),
    localization="pooled",
    localization_rate=0.1,
    num_classes=10,
    channels=1,
    filters=(16, 32, 32),
    units=256,
    batch_norm=False,
    name="stn_classifier",
):
    """A spatial transformer in front of the small CNN, with a pooled or a dense head: the one builder of both.

    `build_classifier("stn")` is its pooled head (any image size); the Spatial Transformer
    paper's ST-CNN (`keras_transformer.vision.st_cnn.build_st_cnn`) is its dense head, plain
    blocks and the paper's convolutional localisation net:

        images [B, H, W, C]
          "learned":  SpatialTransformer(localization) -> glimpse [B, g, g, C]
          "identity": the same, its transform frozen at the identity (the whole image, resampled)
          "none":     no transformer: the image as it is
          per block i: `build_classifier`'s block (no attention), max_pool_2x2
          head "pooled": global average pooling -> Dense(classes)                   any image size
          head "dense":  flatten -> Dense(units), relu -> Dense(classes)            a fixed size

    A dense head cares where in its input the object lies, so the glimpse's position matters to
    it; a pooled head reads the object anywhere. The spatial map (`attention_map`) is the
    glimpse's footprint on the image (`GlimpseFootprint`), all ones without a transformer.

    Args:
        head: one of `HEADS`: `"pooled"` or `"dense"`.
        transform: one of `TRANSFORMS`: `"learned"`, `"identity"` (the transformer, frozen) or
            `"none"` (no transformer).
        block: one of `BLOCKS`: `"residual"` or `"plain"` (`build_classifier`'s blocks).
        image_size: `(height, width)` the model takes, or None for any size; the dense head and
            the `"convolutional"` localisation net need one.
        glimpse_size: `(height, width)` of the transformer's output (not `"none"`).
        localization: `SpatialTransformer`'s localisation net: `"pooled"` or `"convolutional"`
            (the paper's).
        localization_rate: float in (0, 1], `SpatialTransformer`'s rate.
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.
        filters: tuple of ints, the convolution channels of each block (one block each).
        units: int, the width of the dense head's hidden layer (`"dense"` only).
        batch_norm: bool, batch normalization in the blocks (`build_classifier`'s).
        name: str, the model's name; the attention model's is `f"{name}_with_map"`.

    Returns:
        A `Classifier(model, attention_model)`: images `[B, H, W, C]` -> logits `[B, classes]`,
        and `{"logits", "attention_map" [B, H, W]}`. With a transformer, its layer is named
        `"spatial_transformer"`.

    Raises:
        ValueError: an unknown `head`, `transform` or `block`; a dense head without
            `image_size`; sizes, filters or units that are not positive ints.
    """
    check_choice("head", head, HEADS)
    check_choice("transform", transform, TRANSFORMS)
    check_choice("block", block, BLOCKS)
    if image_size is None and head == "dense":
        raise ValueError('`image_size` must be (height, width) for head="dense". Received: image_size=None')
    image_size = (None, None) if image_size is None else check_ints("image_size", image_size, 1, length=2)
    glimpse_size = check_ints("glimpse_size", glimpse_size, 1, length=2)
    filters = check_ints("filters", filters, 1)  # one block each
    units = check_int("units", units, 1)
    images = keras.Input(image_size + (channels,), name="images")
    x, theta = images, None
    if transform != "none":
        transformer = SpatialTransformer(
            output_size=glimpse_size,
            localization=localization,
            localization_rate=localization_rate,
            name="spatial_transformer",
        )
        x, theta = transformer(x, return_attention_scores=True)
        transformer.trainable = transform == "learned"  # after the call: its sublayers exist once built
    x, _, _ = _blocks(x, filters, "none", block, batch_norm=batch_norm)
    logits = _head(x, head, num_classes, units)
    if theta is None:  # the CNN reads every pixel
        attention_map = ops.ones_like(images[..., 0])
    else:
        attention_map = GlimpseFootprint(name="attention_map")(theta, images)
    return _classifier(images, logits, attention_map, name)


def _blocks(x, filters, attention, block, reduction=16, spatial_kernel_size=7, batch_norm=False):
    """The classifier's blocks (`_block`), each followed by its 2x2 max pooling.

    Returns:
        `(x, scores, last_features)`: the last pooling's output, the last block's attention
        scores (see `_block`), and its output before the pooling.
    """
    for i, width in enumerate(filters, start=1):
        x, scores = _block(x, i, width, attention, block, reduction, spatial_kernel_size, batch_norm)
        last_features = x
        x = keras.layers.MaxPooling2D(2, padding="same", name=f"block_{i}_pool")(x)
    return x, scores, last_features


def _head(x, head, num_classes, units=None):
    """The logits `[B, classes]` of the blocks' output `x`: through a pooled or a dense head (`HEADS`)."""
    if head == "pooled":
        x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    else:
        x = keras.layers.Flatten(name="flatten")(x)
        x = keras.layers.Dense(units, activation="relu", name="hidden")(x)
    return keras.layers.Dense(num_classes, name="logits")(x)


def _classifier(images, logits, attention_map, name):
    """The `Classifier` of symbolic images, logits and spatial map: the model, and the same with its map."""
    model = keras.Model(images, logits, name=name)
    attention_model = keras.Model(images, {"logits": logits, "attention_map": attention_map}, name=f"{name}_with_map")
    return Classifier(model, attention_model)


def _block(x, index, width, attention, block, reduction, spatial_kernel_size, batch_norm=False):
    """One block of the classifier, before its pooling: the branch with its attention, and the shortcut.

    Args:
        x: symbolic `[B, h, w, c]`, the block's input.
        index: int, the block's number from 1, in its layers' names.
        width: int, the block's convolution channels f_i.
        attention: one of `ATTENTIONS`.
        block: one of `BLOCKS`.
        reduction: int, the reduction ratio of SE, SK and CBAM's channel MLP.
        spatial_kernel_size: odd int, the size of CBAM's spatial convolution.
        batch_norm: bool, batch normalization after the branch's and the shortcut's convolutions
            (before any relu), and inside SK, CBAM's spatial attention and residual attention.

    Returns:
        `(x, scores)`: the block's output `[B, h, w, f_i]`, and the attention scores its spatial
        map is made of: ResidualAttention's mask `[B, h, w, f_i]` (`"residual"`), CBAM's
        `{"channel": [B, f_i], "spatial": [B, h, w, 1]}` (`"cbam"`), or None.
    """
    shortcut, scores = x, None
    if attention == "sk":
        x = SelectiveKernel(width, (3, 5), reduction=reduction, batch_norm=batch_norm, name=f"block_{index}_sk")(x)
    elif attention == "residual":
        x, scores = ResidualAttention(width, batch_norm=batch_norm, name=f"block_{index}_residual_attention")(
            x, return_attention_scores=True
        )
    else:
        activation = "relu" if block == "plain" else None  # residual: the relu comes after the addition
        conv = keras.layers.Conv2D(
            width, 3, padding="same", use_bias=not batch_norm, name=f"block_{index}_conv",
            activation=None if batch_norm else activation,
        )(x)  # fmt: skip
        x = _normalized(conv, f"block_{index}_bn", activation) if batch_norm else conv
    if attention == "se":
        x = SqueezeExcitation(reduction, name=f"block_{index}_se")(x)
    elif attention == "cbam":
        x, scores = CBAM(reduction, spatial_kernel_size, batch_norm=batch_norm, name=f"block_{index}_cbam")(
            x, return_attention_scores=True
        )
    if block == "residual":
        if shortcut.shape[-1] != width:
            shortcut = keras.layers.Conv2D(width, 1, use_bias=False, name=f"block_{index}_shortcut")(shortcut)
            if batch_norm:
                shortcut = _normalized(shortcut, f"block_{index}_shortcut_bn", None)
        x = keras.layers.Add(name=f"block_{index}_add")([shortcut, x])
        x = keras.layers.ReLU(name=f"block_{index}_relu")(x)
    return x, scores


def _normalized(x, name, activation):
    """`x` through batch normalization (named `name`, `MOMENTUM`), then `activation` (None: none)."""
    x = keras.layers.BatchNormalization(momentum=MOMENTUM, name=name)(x)
    return keras.layers.Activation(activation, name=f"{name}_{activation}")(x) if activation else x


def _attention_map(attention, images, scores, last_features):
    """The classifier's spatial map over the input image (the module docstring says which, per attention).

    Args:
        attention: one of `ATTENTIONS` but `"stn"` (whose map `build_stn_classifier` makes).
        images: symbolic `[B, H, W, C]`, the classifier's input.
        scores: the last block's attention scores (see `_block`), or None.
        last_features: symbolic `[B, h, w, f]`, the last block's output before its pooling.

    Returns:
        Symbolic `[B, H, W]`.
    """
    if attention == "cbam":
        grid_map = scores["spatial"][..., 0]
    elif attention == "residual":
        grid_map = ops.mean(scores, axis=-1)
    else:
        grid_map = ops.mean(last_features, axis=-1)
    return UpsampleToImage(name="attention_map")(grid_map, images)


def build_scale_trunk(channels=1, filters=(16, 32, 32)):
    """The trunk the scales share: residual blocks of `filters` channels, a 2x2 max pool after each but the last.

    A `keras.Model` named `"trunk"`: images `[B, H, W, channels]` -> features `[B, H', W', filters[-1]]`,
    H' = H / 2^(len(filters) - 1) rounded up.
    """
    filters = check_ints("filters", filters, 1)
    trunk_input = keras.Input((None, None, channels), name="trunk_images")
    x = trunk_input
    for i, width in enumerate(filters, start=1):
        x, _ = _block(x, i, width, "none", "residual", 16, 7)
        if i < len(filters):
            x = keras.layers.MaxPooling2D(2, padding="same", name=f"block_{i}_pool")(x)
    return keras.Model(trunk_input, x, name="trunk")


def build_scale_classifier(fusion="attention", factors=(1, 2, 4), num_classes=10, channels=1, filters=(16, 32, 32)):
    """The small CNN as a shared trunk over the image at several scales, fused by `ScaleAttention`.

    The trunk (the residual blocks of `build_classifier`, without attention, pooling after every
    block but the last) reads the image average-pooled by each factor; `ScaleAttention(fusion)`
    fuses the S feature maps on the finest one's grid; global average pooling and a dense layer
    classify.

        images [B, H, W, C] -> avg_pool_f -> trunk -> [B, H/(f 2^(n-1)), ..., C']   one per factor f
        ScaleAttention -> [B, H/2^(n-1), W/2^(n-1), C'] -> global average pool -> Dense -> logits

    Args:
        fusion: one of `keras_transformer.vision.scale.FUSIONS`.
        factors: tuple of S ints, the downsampling factor of each scale, 1 (the image as it is)
            first; `(1,)` is the same network at one scale, without fusion (a control).
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.
        filters: tuple of ints, the trunk's blocks' channels.

    Returns:
        A `Classifier(model, attention_model)`; the attention model outputs `{"logits",
        "scale_weights"}`, the weights `[B, h, w, S]` of each scale on the fused grid.

    Raises:
        ValueError: `factors` not positive ints starting with 1, or empty `filters`.
    """
    factors = check_ints("factors", factors, 1)
    if factors[0] != 1:
        raise ValueError(f"`factors` must be a tuple of ints >= 1, 1 first. Received: factors={factors!r}")
    trunk = build_scale_trunk(channels, filters)
    images = keras.Input((None, None, channels), name="images")
    features = [
        trunk(images if f == 1 else keras.layers.AveragePooling2D(f, padding="same", name=f"down_{f}")(images))
        for f in factors
    ]
    if len(factors) == 1:  # the same network at one scale: the control of the comparison
        fused = features[0]
        weights = keras.layers.Rescaling(0.0, offset=1.0, name="one_scale")(fused[..., :1])  # all 1: one scale
    else:
        fused, weights = ScaleAttention(fusion, name="scale_attention")(features, return_attention_scores=True)
    logits = keras.layers.Dense(num_classes, name="logits")(keras.layers.GlobalAveragePooling2D(name="pool")(fused))
    name = f"scale_classifier_{fusion}"
    model = keras.Model(images, logits, name=name)
    attention_model = keras.Model(images, {"logits": logits, "scale_weights": weights}, name=f"{name}_with_weights")
    return Classifier(model, attention_model)
