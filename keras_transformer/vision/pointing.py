"""Does a spatial map fall on the object? Pointing-game scores against a uniform map.

For a non-negative map over the image and the object's box (NumPy, no TensorFlow):

    mass_in_box     the share of the map's total mass inside the box, in [0, 1]
    uniform_share   the same for a uniform map: the box's area over the image's; a map that knows
                    nothing about the object scores this on average
    pointing_hits   the pointing game (Zhang et al. 2016, "Top-down Neural Attention by Excitation
                    Backprop", https://arxiv.org/abs/1608.00507): whether the map's maximum falls
                    inside the box; tied maxima count as a random pick among them (the share of
                    them inside), so a flat map scores what a uniform one does

Boxes are `(top, left, bottom, right)` in pixels, bottom and right exclusive, as
`keras_transformer.vision.cluttered` gives them.
"""

import numpy as np


def box_masks(boxes, height, width):
    """Bool `[N, height, width]`: True on the pixels of each box."""
    boxes = np.asarray(boxes)
    rows = np.arange(height)[None, :, None]
    columns = np.arange(width)[None, None, :]
    top, left, bottom, right = (boxes[:, i, None, None] for i in range(4))
    return (rows >= top) & (rows < bottom) & (columns >= left) & (columns < right)


def mass_in_box(maps, boxes):
    """The share of each map's mass inside its box.

    Args:
        maps: non-negative float `[N, H, W]`.
        boxes: `[N, 4]`, `(top, left, bottom, right)`.

    Returns:
        float64 `[N]` in [0, 1]; an all-zero map counts as uniform (`uniform_share`).
    """
    maps = np.asarray(maps, np.float64)
    if np.any(maps < 0):
        raise ValueError(f"Maps must be non-negative. Received: a minimum of {maps.min()}")
    inside = box_masks(boxes, *maps.shape[1:])
    total = maps.sum(axis=(1, 2))
    share = np.where(inside, maps, 0.0).sum(axis=(1, 2)) / np.maximum(total, 1e-30)
    return np.where(total > 0, share, uniform_share(boxes, *maps.shape[1:]))


def uniform_share(boxes, height, width):
    """A uniform map's share inside each box: the box's area over the image's, float64 `[N]`."""
    return box_masks(boxes, height, width).sum(axis=(1, 2)) / float(height * width)


def pointing_hits(maps, boxes):
    """Whether each map's maximum falls inside its box: 1 or 0, or, for tied maxima, the share of them inside.

    Args:
        maps: float `[N, H, W]`.
        boxes: `[N, 4]`, `(top, left, bottom, right)`.

    Returns:
        float64 `[N]` in [0, 1].
    """
    maps = np.asarray(maps)
    inside = box_masks(boxes, *maps.shape[1:])
    peak = maps == maps.max(axis=(1, 2), keepdims=True)
    return (peak & inside).sum(axis=(1, 2)) / peak.sum(axis=(1, 2))


def pointing_summary(maps, boxes):
    """The scores of a set of maps, averaged over the examples.

    Args:
        maps: non-negative float `[N, H, W]`.
        boxes: `[N, 4]`.

    Returns:
        `{"mass_in_box": mean share, "uniform_share": mean share of a uniform map, "lift":
        their ratio, "pointing_hit_rate": mean of `pointing_hits`, "uniform_hit_rate": a
        uniform random point's chance, the mean box area share}`.
    """
    mass, uniform = mass_in_box(maps, boxes), uniform_share(boxes, *np.shape(maps)[1:])
    return {
        "mass_in_box": float(mass.mean()),
        "uniform_share": float(uniform.mean()),
        "lift": float(mass.mean() / uniform.mean()),
        "pointing_hit_rate": float(pointing_hits(maps, boxes).mean()),
        "uniform_hit_rate": float(uniform.mean()),
    }
