"""Attention to scale: one network over the image at several sizes, and a softmax over the sizes at each position.

Chen, Yang, Wang, Xu and Yuille 2016, "Attention to Scale: Scale-aware Semantic Image
Segmentation" (https://arxiv.org/abs/1511.03339), section 3: a shared trunk reads the image at
S scales; its feature maps, brought back to one grid, are fused by weights that a small head
computes from them, a softmax over the scales at every position:

    F_s = up(trunk(down_s(x)))                    (B, h, w, C), s = 1 .. S, the finest grid
    w = softmax_s(head([F_1; ...; F_S]))          (B, h, w, S), head = conv_3x3 (relu) then conv_1x1
    outputs = sum_s w_s * F_s                     (B, h, w, C)

A small object is read best where the image is large, a large one where the image is small (so
that it fits the trunk's receptive field); the weights say which scale each position trusts.
`ScaleAttention` is the fusion; `keras_transformer.vision.models.build_scale_classifier` the
network around it. The paper's baselines are kept as fusions: the average and the maximum over
the scales.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.vision.channel import channels_of

FUSIONS = ("attention", "average", "max")


def upsample_to_grid(features, height, width):
    """Nearest-neighbour resize of `features [B, h, w, C]` to `[B, height, width, C]`.

    Row i reads row `floor((i + 0.5) h / height)`: the cell it falls in when both grids tile the
    same image evenly (so a grid pooled by 2 comes back by repeating each row twice).
    """
    shape = ops.shape(features)

    def cells(target, source):
        positions = (ops.cast(ops.arange(target), "float32") + 0.5) * ops.cast(source, "float32")
        return ops.cast(ops.floor(positions / ops.cast(target, "float32")), "int32")

    rows = ops.take(features, cells(height, shape[1]), axis=1)  # (B, height, w, C)
    return ops.take(rows, cells(width, shape[2]), axis=2)  # (B, height, width, C)


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaleAttention(keras.layers.Layer):
    """Fuse feature maps of the same trunk at S scales: a softmax over the scales per position, or a pooling.

    Args:
        fusion: one of `FUSIONS`: `"attention"` (the paper's weights), `"average"` or `"max"`
            over the scales (its baselines).
        units: int, the channels of the attention head's 3x3 convolution.
        head_norm: bool; True normalises the head's input at every position (layer
            normalisation over the S scales' concatenated channels) before its 3x3 convolution.
            Deviation from the paper, against a collapse: without it, on the cluttered glyphs,
            the softmax put weight 1.000 on one scale at every position within a few hundred
            steps of Adam, as the trunk's unnormalised features grew.
        temperature: float > 0; the weights are softmax(logits / temperature). Above 1 the head's
            logits must grow that many times larger for the same sharpness, which slows how fast
            Adam (whose steps do not shrink with the gradient) can saturate the softmax. Deviation
            from the paper (whose softmax has none), against the same collapse.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        features: list of S >= 2 float tensors `[batch, h_s, w_s, channels]`, the trunk's maps of
            the scales, the finest (largest grid) first; the others are resized to its grid.
        return_attention_scores: bool; if True, also return the weights `[batch, h, w, S]` (for
            `"average"` 1/S everywhere; for `"max"` the share of channels each scale wins).
        values: None, or S float tensors `[batch, h_s, w_s, channels']` on the grids of
            `features`: the maps to fuse instead of `features`, which then only compute the
            attention weights (the paper fuses each scale's score map with weights computed from
            its features).

    Returns:
        float tensor `[batch, h, w, channels]` (`channels'` with `values`); and the weights if requested.

    Raises:
        ValueError: an unknown fusion, `units` not a positive int, fewer than two scales, or
            scales of different channel counts.

    Example:
    >>> fuse = ScaleAttention(units=4)
    >>> fine, coarse = np.ones((2, 6, 6, 3), "float32"), np.ones((2, 3, 3, 3), "float32")
    >>> outputs, weights = fuse([fine, coarse], return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 6, 6, 3), (2, 6, 6, 2))
    """

    def __init__(self, fusion="attention", units=32, head_norm=False, temperature=1.0, **kwargs):
        super().__init__(**kwargs)
        self.fusion = check_choice("fusion", fusion, FUSIONS)
        self.units = check_int("units", units, 1)
        self.head_norm = bool(head_norm)
        self.temperature = check_number("temperature", temperature, greater_than=0)

    def build(self, features_shape):
        features_shape = list(features_shape)
        if len(features_shape) < 2:
            raise ValueError(f"ScaleAttention fuses two or more scales. Received: {len(features_shape)} feature map(s)")
        channels = {channels_of(shape, "ScaleAttention") for shape in features_shape}
        if len(channels) != 1:
            raise ValueError(f"The scales' feature maps must have the same channels. Received: {features_shape}")
        (channels,) = channels
        self.num_scales = len(features_shape)
        if self.fusion == "attention":
            self.head_conv = keras.layers.Conv2D(
                self.units, 3, padding="same", activation="relu", dtype=self.dtype_policy, name="head"
            )
            self.head_conv.build((None, None, None, channels * self.num_scales))
            if self.head_norm:
                self.head_norm_layer = keras.layers.LayerNormalization(dtype=self.dtype_policy, name="head_norm")
                self.head_norm_layer.build((None, None, None, channels * self.num_scales))
            self.scale_logits = keras.layers.Conv2D(self.num_scales, 1, dtype=self.dtype_policy, name="scale_logits")
            self.scale_logits.build((None, None, None, self.units))

    def call(self, features, return_attention_scores=False, values=None):
        shape = ops.shape(features[0])
        maps = [features[0]] + [upsample_to_grid(f, shape[1], shape[2]) for f in features[1:]]
        if values is not None:
            if len(values) != len(features):
                raise ValueError(f"`values` must hold one map per scale ({len(features)}). Received: {len(values)}")
            values = [values[0]] + [upsample_to_grid(v, shape[1], shape[2]) for v in values[1:]]
        stacked = ops.stack(maps if values is None else values, axis=-1)  # (B, h, w, C, S)
        if self.fusion == "attention":
            head_input = ops.concatenate(maps, axis=-1)  # (B, h, w, C S)
            if self.head_norm:
                head_input = self.head_norm_layer(head_input)
            logits = self.scale_logits(self.head_conv(head_input))  # (B, h, w, S)
            weights = ops.softmax(ops.cast(logits, "float32") / self.temperature, axis=-1)
            outputs = ops.sum(stacked * ops.cast(weights, stacked.dtype)[:, :, :, None, :], axis=-1)
        elif self.fusion == "average":
            outputs = ops.mean(stacked, axis=-1)
            weights = ops.ones_like(stacked[..., 0, :]) / self.num_scales  # (B, h, w, S)
        else:
            outputs = ops.max(stacked, axis=-1)
            winners = ops.one_hot(ops.argmax(stacked, axis=-1), self.num_scales)  # (B, h, w, C, S)
            weights = ops.mean(winners, axis=3)  # (B, h, w, S): the share of channels each scale wins
        return (outputs, weights) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {"fusion": self.fusion, "units": self.units, "head_norm": self.head_norm, "temperature": self.temperature}
        )
        return config
