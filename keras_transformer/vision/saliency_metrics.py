"""The standard scores of salient-object detection: MAE, max F-measure, and the pointing game with its tolerance.

For saliency maps `S [N, H, W]` with values in [0, 1] and binary ground-truth masks
`G [N, H, W]` (NumPy, float64, no TensorFlow):

    mae                the mean absolute error mean_pixels |S - G| of each image (Perazzi et al.
                       2012, "Saliency Filters"); a dataset's MAE is the mean over its images
    precision_recall   each image's precision and recall of the binary map `S >= t` against G,
                       at 256 thresholds t_k = k / 255, k = 0 .. 255 (the thresholds of 8-bit
                       maps: Achanta et al. 2009, "Frequency-tuned Salient Region Detection",
                       https://doi.org/10.1109/CVPR.2009.5206596)
    max_f_measure      F_beta = (1 + beta^2) P R / (beta^2 P + R) with beta^2 = 0.3 (precision
                       weighted over recall, as Achanta et al. 2009), computed from the MEAN
                       precision and the MEAN recall over the images at each threshold, then the
                       maximum over the thresholds: the convention of Borji, Cheng, Jiang and Li
                       2015, "Salient Object Detection: A Benchmark" (https://arxiv.org/abs/1501.02741)
    pointing_hits      the pointing game (Zhang et al. 2016, "Top-down Neural Attention by
                       Excitation Backprop", https://arxiv.org/abs/1608.00507): a hit when the
                       map's maximum lies within a tolerance of the object, here of a pixel of
                       the mask (distance between pixel centres); the paper's tolerance is 15
                       pixels on 224-pixel images, `pointing_tolerance(side)` scales it to
                       15 / 224 x side (2.68 pixels on a 40-pixel canvas, 4.02 on a 60-pixel one);
                       tied maxima count as a random pick among them (the share of them that hit),
                       as in `keras_transformer.vision.pointing`, so a flat map scores the share of
                       the image within the tolerance of the mask

Conventions where a ratio has no denominator: a binary map with no pixel on has precision 0
(so an all-zero map has precision 0 and recall 0 at every threshold above 0, and F 0 there); a
mask with no pixel on has recall 0; F is 0 where P + R = 0. At t_0 = 0 every pixel is on:
precision is the mask's share of the image and recall 1, so a map that knows nothing scores
max F = (1 + beta^2) p / (beta^2 p + 1), p the mean share of the masks.
"""

import numpy as np

from keras_transformer.checks import check_number

BETA_SQUARED = 0.3
THRESHOLDS = np.arange(256) / 255.0
POINTING_TOLERANCE_224 = 15.0  # pixels on a 224-pixel image (Zhang et al. 2016)


def _check(maps, masks):
    maps = np.asarray(maps, np.float64)
    masks = np.asarray(masks).astype(bool)
    if maps.ndim != 3 or maps.shape != masks.shape:
        raise ValueError(
            f"`maps` and `masks` must both be [N, H, W] of one shape. Received: maps {maps.shape}, masks {masks.shape}"
        )
    if maps.size and (maps.min() < 0.0 or maps.max() > 1.0):
        raise ValueError(f"`maps` must lie in [0, 1]. Received: values from {maps.min()} to {maps.max()}")
    return maps, masks


def mae(maps, masks):
    """The mean absolute error of each map against its binary mask, float64 `[N]`.

    Args:
        maps: float `[N, H, W]` in [0, 1].
        masks: bool (or 0/1) `[N, H, W]`.
    """
    maps, masks = _check(maps, masks)
    return np.abs(maps - masks).mean(axis=(1, 2))


def precision_recall(maps, masks, thresholds=THRESHOLDS):
    """Each image's precision and recall of the binary maps `maps >= t` against `masks`, at each threshold.

    Args:
        maps: float `[N, H, W]` in [0, 1].
        masks: bool (or 0/1) `[N, H, W]`.
        thresholds: float `[T]`, by default `THRESHOLDS` (k / 255, k = 0 .. 255).

    Returns:
        `(precision, recall)`, float64 `[N, T]` each (0 where the binary map, or the mask, is empty).
    """
    maps, masks = _check(maps, masks)
    thresholds = np.asarray(thresholds, np.float64)
    n = len(maps)
    flat, truth = maps.reshape(n, -1), masks.reshape(n, -1)
    # Counts per threshold, from each image's sorted values: pixels >= t and, of those, mask pixels.
    precision = np.zeros((n, len(thresholds)))
    recall = np.zeros((n, len(thresholds)))
    for i in range(n):
        order = np.argsort(flat[i], kind="stable")
        values = flat[i][order]
        on_mask = np.concatenate([np.cumsum(truth[i][order][::-1])[::-1], [0]])  # mask pixels at index >= j
        first = np.searchsorted(values, thresholds, side="left")  # first index with value >= t
        selected = len(values) - first
        hits = on_mask[first]
        precision[i] = hits / np.maximum(selected, 1)
        recall[i] = hits / max(int(truth[i].sum()), 1)
    return precision, recall


def f_measure(precision, recall, beta_squared=BETA_SQUARED):
    """`(1 + beta^2) P R / (beta^2 P + R)`, elementwise, 0 where P + R = 0."""
    precision, recall = np.asarray(precision, np.float64), np.asarray(recall, np.float64)
    denominator = beta_squared * precision + recall
    return np.where(denominator > 0, (1 + beta_squared) * precision * recall / np.maximum(denominator, 1e-300), 0.0)


def max_f_measure(maps, masks, thresholds=THRESHOLDS, beta_squared=BETA_SQUARED):
    """The max F-measure of a set of maps: F of the mean precision and mean recall at each threshold, the maximum.

    Args:
        maps: float `[N, H, W]` in [0, 1].
        masks: bool (or 0/1) `[N, H, W]`.
        thresholds: float `[T]`, by default `THRESHOLDS`.
        beta_squared: float, the weight beta^2 of the F-measure (0.3).

    Returns:
        `(max_f, threshold)`: the maximum, a float, and the threshold where it is reached.
    """
    precision, recall = precision_recall(maps, masks, thresholds)
    curve = f_measure(precision.mean(axis=0), recall.mean(axis=0), beta_squared)
    best = int(np.argmax(curve))
    return float(curve[best]), float(np.asarray(thresholds)[best])


def pointing_tolerance(side):
    """The pointing game's tolerance on an image of `side` pixels: 15 / 224 x side (15 pixels at 224)."""
    return POINTING_TOLERANCE_224 / 224.0 * side


def within_tolerance(masks, tolerance):
    """Bool `[N, H, W]`: the pixels within `tolerance` (Euclidean, between pixel centres) of a mask pixel."""
    masks = np.asarray(masks).astype(bool)
    reach = int(np.floor(tolerance))
    _, height, width = masks.shape
    padded = np.pad(masks, ((0, 0), (reach, reach), (reach, reach)))
    near = np.zeros_like(masks)
    for dr in range(-reach, reach + 1):
        for dc in range(-reach, reach + 1):
            if dr * dr + dc * dc <= tolerance * tolerance:
                near |= padded[:, reach + dr : reach + dr + height, reach + dc : reach + dc + width]
    return near


def pointing_hits(maps, masks, tolerance=None):
    """Whether each map's maximum lies within `tolerance` of its mask: 1 or 0, or the share of tied maxima that do.

    Args:
        maps: float `[N, H, W]`.
        masks: bool (or 0/1) `[N, H, W]`.
        tolerance: float >= 0 in pixels; None: `pointing_tolerance(max(H, W))`.

    Returns:
        float64 `[N]` in [0, 1].
    """
    maps = np.asarray(maps, np.float64)
    masks = np.asarray(masks).astype(bool)
    if maps.shape != masks.shape or maps.ndim != 3:
        raise ValueError(
            f"`maps` and `masks` must both be [N, H, W] of one shape. Received: maps {maps.shape}, masks {masks.shape}"
        )
    tolerance = pointing_tolerance(max(maps.shape[1:])) if tolerance is None else tolerance
    check_number("tolerance", tolerance, 0)
    near = within_tolerance(masks, tolerance)
    peak = maps == maps.max(axis=(1, 2), keepdims=True)
    return (peak & near).sum(axis=(1, 2)) / peak.sum(axis=(1, 2))


def saliency_scores(maps, masks, tolerance=None):
    """MAE, max F (beta^2 = 0.3) and the pointing game of a set of maps, over the images.

    Args:
        maps: float `[N, H, W]` in [0, 1].
        masks: bool `[N, H, W]`.
        tolerance: the pointing game's, in pixels; None: `pointing_tolerance(max(H, W))`.

    Returns:
        `{"mae": mean MAE, "max_f": max F-measure, "max_f_threshold": its threshold,
        "pointing_hit_rate": mean of `pointing_hits`, "pointing_tolerance_px": the tolerance,
        "chance_hit_rate": a uniform random pixel's chance, the mean share of the image within the tolerance of
        the mask}`.
    """
    maps, masks = _check(maps, masks)
    tolerance = pointing_tolerance(max(maps.shape[1:])) if tolerance is None else tolerance
    best, threshold = max_f_measure(maps, masks)
    return {
        "mae": float(mae(maps, masks).mean()),
        "max_f": best,
        "max_f_threshold": threshold,
        "pointing_hit_rate": float(pointing_hits(maps, masks, tolerance).mean()),
        "pointing_tolerance_px": float(tolerance),
        "chance_hit_rate": float(within_tolerance(masks, tolerance).mean()),
    }
