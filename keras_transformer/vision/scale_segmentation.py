"""Attention to scale as its paper trains it: a class at every position, fused over scales at every position.

Chen, Yang, Wang, Xu and Yuille 2016, "Attention to Scale: Scale-aware Semantic Image
Segmentation" (https://arxiv.org/abs/1511.03339), sections 3.1-3.3. One trunk reads the image
at S sizes; each scale's features give a score map over the classes and the background, and a
softmax over the scales at every position, computed from the features, fuses the score maps:

    x_s = resize(x, 1 / f_s)                      (B, H / f_s, W / f_s, C), f_1 = 1 (bilinear)
    F_s = trunk(x_s)                              (B, h_s, w_s, C'), the same weights at every scale
    P_s = up(score(F_s))                          (B, h, w, K + 1), a 1x1 convolution, on the finest grid
    w = softmax_s(head([up(F_1); ...; up(F_S)]))  (B, h, w, S), `ScaleAttention`'s head
    P = sum_s w_s P_s                             (B, h, w, K + 1), logits; class 0 is the background

trained per position: the cross-entropy of softmax(P) against the class of each grid cell, plus,
as the paper's extra supervision, `extra_weight` x the cross-entropy of each softmax(P_s),
summed over the scales. A cell's class is the class of any labelled pixel in it (0 where there
is none): `cell_targets` reads it from a map of pixel labels (`pixel_labels`). The paper's two
baselines fuse the same score maps by their average and their maximum over the scales
(`fusion="average"`, `"max"`).

For a classification benchmark, `canvas_scores` reads one class per image from the fused map:
the mean over positions of each class's probability, the background left out.

Deviations: the head's input is layer-normalised at every position (`head_norm`) and its softmax
has a temperature (`temperature`, 10), both on by default here: without them the softmax put
weight 1.000 on one scale everywhere in some seeds on the cluttered glyphs. The trunk is the small
residual CNN of `models.build_scale_trunk`, not DeepLab; the
score maps come back to the finest grid by nearest-neighbour upsampling (`upsample_to_grid`), not
bilinear interpolation; the targets are the labels at the trunk's resolution (the paper
downsamples its ground truth too, by 8), read as "any labelled pixel in the cell".
"""

import keras
import numpy as np
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.vision.models import build_scale_trunk
from keras_transformer.vision.scale import FUSIONS, ScaleAttention, upsample_to_grid


def pixel_labels(masks, labels):
    """The label of every pixel: `labels + 1` on each image's mask, 0 (background) elsewhere.

    Args:
        masks: bool `[N, H, W]`, the object's pixels (`ClutteredGlyphs.masks`).
        labels: int `[N]`, the object's class in `[0, K)`.

    Returns:
        int32 NumPy array `[N, H, W]` with values in `[0, K]`.
    """
    masks, labels = np.asarray(masks, bool), np.asarray(labels)
    return np.where(masks, labels[:, None, None] + 1, 0).astype(np.int32)


def cell_targets(label_maps, cell):
    """Each `cell x cell` block's class: the largest pixel label in it (one object per image: its class, or 0).

    Args:
        label_maps: int tensor `[B, H, W]`, pixel labels (`pixel_labels`).
        cell: int, the block side (the trunk's total stride); the last blocks may be partial.

    Returns:
        int32 tensor `[B, ceil(H / cell), ceil(W / cell)]`.
    """
    maps = ops.cast(label_maps, "float32")[..., None]  # (B, H, W, 1)
    pooled = ops.max_pool(maps, pool_size=cell, strides=cell, padding="same")  # (B, h, w, 1)
    return ops.cast(pooled[..., 0], "int32")


def canvas_scores(scores):
    """One score per class and image from a score map: the mean over positions of each class's probability.

    Args:
        scores: float tensor `[B, h, w, K + 1]`, logits with the background first.

    Returns:
        float tensor `[B, K]`; its argmax is the image's class.
    """
    probabilities = ops.softmax(ops.cast(scores, "float32"), axis=-1)
    return ops.mean(probabilities[..., 1:], axis=(1, 2))


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaleSegmenter(keras.Model):
    """A per-position classifier over S scales of the image, its score maps fused by attention to scale.

    Chen et al. 2016 (https://arxiv.org/abs/1511.03339); the module docstring gives the equations.

    Args:
        num_classes: int, the object classes K (the score maps have K + 1, the background first).
        channels: int, the images' channels C.
        factors: tuple of S floats >= 1, 1 first: each scale's downsampling of the image; `(1,)`
            is the trunk at one scale, without fusion (a control).
        filters: tuple of ints, the trunk's residual blocks' channels.
        fusion: one of `scale.FUSIONS`: `"attention"`, `"average"` or `"max"` over the scales.
        units: int, the attention head's 3x3 convolution's channels.
        head_norm: bool, `ScaleAttention`'s layer normalisation of the head's input (a deviation
            from the paper against the softmax's collapse onto one scale).
        temperature: float > 0, `ScaleAttention`'s softmax temperature (the same deviation, the
            same reason).
        extra_weight: float >= 0, the weight of the scales' own cross-entropies in the loss.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        images: float tensor `[B, H, W, C]`, H and W known when the model is called.
        return_details: bool; if True (and always in training), return the dict below.

    Returns:
        the fused logits `[B, h, w, K + 1]`, h = H / 2^(len(filters) - 1) rounded up; or a dict:
        `"scores"` (those), `"scale_scores"` `[B, S, h, w, K + 1]` (each scale's own, on the
        same grid) and `"scale_weights"` `[B, h, w, S]`.

    Raises:
        ValueError: a bad argument, or images of unknown height or width with several scales.

    Example:
    >>> model = ScaleSegmenter(num_classes=3, factors=(1, 1.5), filters=(4, 4), units=4)
    >>> out = model(np.zeros((2, 12, 12, 1), "float32"), return_details=True)
    >>> tuple(out["scores"].shape), tuple(out["scale_scores"].shape), tuple(out["scale_weights"].shape)
    ((2, 6, 6, 4), (2, 2, 6, 6, 4), (2, 6, 6, 2))
    """

    def __init__(
        self,
        num_classes=10,
        channels=1,
        factors=(1, 1.5, 2),
        filters=(16, 32, 32),
        fusion="attention",
        units=32,
        head_norm=True,
        temperature=10.0,
        extra_weight=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_classes = check_int("num_classes", num_classes, 1)
        self.channels = check_int("channels", channels, 1)
        factors = tuple(float(check_number("factors", f, 1)) for f in factors)
        if not factors or factors[0] != 1 or len(set(factors)) != len(factors):
            raise ValueError(f"`factors` must be distinct numbers >= 1, 1 first. Received: factors={factors!r}")
        self.factors = factors
        self.filters = tuple(filters)
        self.fusion = check_choice("fusion", fusion, FUSIONS)
        self.units = check_int("units", units, 1)
        self.head_norm = bool(head_norm)
        self.temperature = check_number("temperature", temperature, greater_than=0)
        self.extra_weight = float(check_number("extra_weight", extra_weight, 0))
        self.trunk = build_scale_trunk(channels, self.filters)
        self.score = keras.layers.Conv2D(num_classes + 1, 1, name="scores")
        self.scale_attention = None
        if len(factors) > 1:
            self.scale_attention = ScaleAttention(fusion, units, head_norm, temperature, name="scale_attention")
        self.cell = 2 ** (len(self.filters) - 1)  # the trunk's total stride

    def build(self, input_shape):
        features = self.trunk.compute_output_shape((None, None, None, self.channels))
        self.score.build(features)
        if self.scale_attention is not None:
            self.scale_attention.build([features] * len(self.factors))
        self.built = True

    def call(self, images, training=None, return_details=False):
        height, width = images.shape[1], images.shape[2]
        if (height is None or width is None) and len(self.factors) > 1:
            raise ValueError(
                "ScaleSegmenter resizes the images to each scale: their height and width must be known "
                f"(a fixed-size input). Received: images of shape {tuple(images.shape)}"
            )
        features, scores = [], []
        for factor in self.factors:
            scaled = images
            if factor != 1:
                size = (max(1, round(height / factor)), max(1, round(width / factor)))
                scaled = ops.image.resize(images, size, interpolation="bilinear", antialias=True)
            features.append(self.trunk(scaled, training=training))  # (B, h_s, w_s, C')
            scores.append(self.score(features[-1]))  # (B, h_s, w_s, K + 1)
        if self.scale_attention is None:
            fused = scores[0]
            weights = ops.ones_like(fused[..., :1])  # (B, h, w, 1): one scale
        else:
            fused, weights = self.scale_attention(features, return_attention_scores=True, values=scores)
        if not (return_details or training):
            return fused
        grid = ops.shape(fused)
        scale_scores = ops.stack([scores[0]] + [upsample_to_grid(s, grid[1], grid[2]) for s in scores[1:]], axis=1)
        return {"scores": fused, "scale_scores": scale_scores, "scale_weights": weights}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The per-position cross-entropy of the fused map, plus `extra_weight` x each scale's own, summed.

        `y`: int `[B, H, W]` pixel labels (`pixel_labels`), read per cell by `cell_targets`. Sample
        weights are not supported (a `ValueError`).
        """
        if sample_weight is not None:
            raise ValueError("ScaleSegmenter's loss takes no sample weights: every cell of every image counts once.")
        scores = y_pred["scores"] if isinstance(y_pred, dict) else y_pred
        targets = cell_targets(y, self.cell)  # (B, h, w)
        cross_entropy = keras.losses.sparse_categorical_crossentropy
        loss = ops.mean(cross_entropy(targets, scores, from_logits=True))
        if isinstance(y_pred, dict) and self.extra_weight and len(self.factors) > 1:
            scale_scores = y_pred["scale_scores"]  # (B, S, h, w, K + 1)
            scale_targets = ops.broadcast_to(targets[:, None], ops.shape(scale_scores)[:4])  # (B, S, h, w)
            per_scale = cross_entropy(scale_targets, scale_scores, from_logits=True)  # (B, S, h, w)
            loss = loss + self.extra_weight * ops.sum(ops.mean(per_scale, axis=(0, 2, 3)))
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """The compiled metrics of the fused map against the cells' classes (`"accuracy"`: the share of cells)."""
        scores = y_pred["scores"] if isinstance(y_pred, dict) else y_pred
        return super().compute_metrics(x, cell_targets(y, self.cell), scores, sample_weight=sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "channels": self.channels,
                "factors": list(self.factors),
                "filters": list(self.filters),
                "fusion": self.fusion,
                "units": self.units,
                "head_norm": self.head_norm,
                "temperature": self.temperature,
                "extra_weight": self.extra_weight,
            }
        )
        return config
