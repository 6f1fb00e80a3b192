"""Cluttered glyphs: a task that needs attention, generated in the library (no download).

A small glyph (a digit, by default) is drawn at a random position, size and rotation on a larger
canvas strewn with fragments of other glyphs; the label is the glyph's class. Most of the canvas
is clutter, so a classifier does best by finding the glyph first: the setting of the cluttered
MNIST experiments of the Spatial Transformer and recurrent attention papers, rendered from a
5x7 pixel font instead of downloaded handwriting. Every example comes with the glyph's bounding
box and its placement (centre, height, angle), so one can check whether a model's attention
falls on the glyph and whether a spatial transformer undoes the placement.

Glyph sets (`GLYPH_SETS`):

    digits   0 1 2 3 4 5 6 7 8 9        ten classes, clearly different shapes
    fine     O Q C G E F P R B D        fine-grained: five pairs that differ in one small detail
                                        (Q's tail, G's bar, E's lower arm, R's leg, B's waist)

Rendering, per example (NumPy, float32, values in [0, 1], background 0):

1. the glyph's 5x7 bitmap, upsampled 4x (20x28) and smoothed by a 3x3 box filter, so strokes
   have soft edges;
2. drawn through an affine map: a height of `object_scale` x the canvas side (uniform in the
   range), a rotation uniform in +-`max_rotation` degrees, and a centre uniform over the
   positions where the rotated glyph fits inside the canvas; sampled bilinearly;
3. `clutter` fragments: a `fragment_size` x `fragment_size` square cut from another random glyph
   of the set (any class, the same size and rotation ranges), pasted at a random position off the
   glyph's box (the first of three random tries that does not overlap it; a fragment whose three
   tries all overlap is left out), the maximum where fragments overlap each other;
4. optional Gaussian pixel noise (`noise`, a standard deviation), clipped back to [0, 1].

The mask is the glyph's own ink: the pixels of the glyph alone on its canvas (step 2, before the
clutter and the noise) above 0.1; clutter never sets a mask pixel. The box is the tight box
`(top, left, bottom, right)` of the mask, in pixels, bottom and right exclusive.

Splits are deterministic and independent: split `s` of seed `n` is drawn from its own random
stream `(n, s)`, so the test split does not change when the training split grows.
"""

import dataclasses
import math

import numpy as np

from keras_transformer.checks import check_choice, check_int, check_number

SPLITS = ("train", "validation", "test")
GLYPH_SETS = {"digits": "0123456789", "fine": "OQCGEFPRBD"}
# 5x7 bitmaps, one string of 7 rows of 5 columns per character ("#" ink, "." background).
FONT = {
    "0": (".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."),
    "1": ("..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."),
    "2": (".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"),
    "3": ("#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."),
    "4": ("...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."),
    "5": ("#####", "#....", "####.", "....#", "....#", "#...#", ".###."),
    "6": ("..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."),
    "7": ("#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."),
    "8": (".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."),
    "9": (".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."),
    "O": (".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."),
    "Q": (".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"),
    "C": (".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."),
    "G": (".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".###."),
    "E": ("#####", "#....", "#....", "####.", "#....", "#....", "#####"),
    "F": ("#####", "#....", "#....", "####.", "#....", "#....", "#...."),
    "P": ("####.", "#...#", "#...#", "####.", "#....", "#....", "#...."),
    "R": ("####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"),
    "B": ("####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."),
    "D": ("####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."),
}
_UPSAMPLE = 4  # glyph pixels per font pixel
_PAD = 2  # blank glyph pixels around the upsampled bitmap
_INK = 0.1  # a canvas pixel above this belongs to the glyph (for its box)


@dataclasses.dataclass
class ClutteredGlyphs:
    """One split of the task: canvases, labels, boxes and each glyph's placement.

    Attributes:
        images: float32 `[N, size, size, 1]`, values in [0, 1].
        labels: int32 `[N]`, the glyph's class: its index in `characters`.
        boxes: float32 `[N, 4]`, the glyph's tight box `(top, left, bottom, right)` in pixels,
            bottom and right exclusive: the tight box of `masks`.
        centres: float32 `[N, 2]`, the glyph's centre `(row, column)` in pixels (pixel centres at
            integers).
        heights: float32 `[N]`, the glyph's height in pixels, before rotation (its 7 font rows).
        angles: float32 `[N]`, the glyph's rotation in radians; positive turns it from the x axis
            (right) towards the y axis (down), i.e. clockwise on the screen.
        characters: str, the characters of the classes, in label order.
        masks: bool `[N, size, size]`, True on the glyph's own ink: its pixels above 0.1 when drawn
            alone, before the clutter and the noise (the ground truth of salient-object
            detection, `keras_transformer.vision.saliency`).
    """

    images: np.ndarray
    labels: np.ndarray
    boxes: np.ndarray
    centres: np.ndarray
    heights: np.ndarray
    angles: np.ndarray
    characters: str
    masks: np.ndarray

    def __len__(self):
        return len(self.labels)

    @property
    def num_classes(self):
        """The number of classes, `len(characters)`."""
        return len(self.characters)

    def head(self, n):
        """The first `n` examples, as a new `ClutteredGlyphs`."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return ClutteredGlyphs(**{k: v if k == "characters" else v[:n] for k, v in fields.items()})


def glyph_bitmaps(characters):
    """The smoothed, upsampled glyph images of `characters`.

    Args:
        characters: str, each a key of `FONT`.

    Returns:
        float32 `[len(characters), 7 * 4 + 4, 5 * 4 + 4]` (32 x 24), ink near 1, background 0,
        with a blank border of 2 pixels.

    Raises:
        ValueError: a character has no bitmap in `FONT`.
    """
    unknown = sorted(set(characters) - set(FONT))
    if unknown:
        raise ValueError(f"No bitmap for {unknown}; the font has {''.join(sorted(FONT))}. Received: {characters!r}")
    glyphs = []
    for character in characters:
        bitmap = np.array([[c == "#" for c in row] for row in FONT[character]], np.float32)  # (7, 5)
        big = np.kron(bitmap, np.ones((_UPSAMPLE, _UPSAMPLE), np.float32))  # (28, 20)
        big = np.pad(big, _PAD)  # (32, 24)
        padded = np.pad(big, 1)
        smooth = sum(padded[i : i + big.shape[0], j : j + big.shape[1]] for i in range(3) for j in range(3)) / 9.0
        glyphs.append(smooth)
    return np.stack(glyphs)


def _sample(glyphs, index, rows, columns):
    """Bilinear samples of `glyphs[index]` at real `(rows, columns)` of glyph pixels, 0 outside."""
    _, height, width = glyphs.shape
    r0, c0 = np.floor(rows).astype(np.int64), np.floor(columns).astype(np.int64)
    out = np.zeros(rows.shape, np.float32)
    for dr in (0, 1):
        for dc in (0, 1):
            r, c = r0 + dr, c0 + dc
            weight = (1.0 - np.abs(rows - r)) * (1.0 - np.abs(columns - c))
            inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
            values = glyphs[index, np.clip(r, 0, height - 1), np.clip(c, 0, width - 1)]
            out += np.where(inside, weight * values, 0.0).astype(np.float32)
    return out


def _glyph_coordinates(rows, columns, centres, heights, angles, glyph_shape):
    """Glyph-pixel coordinates of canvas points, under `p = centre + s R(angle) (q - glyph_centre)`.

    `rows`, `columns`: canvas points `[N, ...]`; `centres [N, 2]`, `heights [N]`, `angles [N]`.
    """
    scale = heights / (7 * _UPSAMPLE)  # canvas pixels per glyph pixel
    extra = (slice(None),) + (None,) * (rows.ndim - 1)
    dy, dx = rows - centres[:, 0][extra], columns - centres[:, 1][extra]
    cos, sin = np.cos(angles)[extra], np.sin(angles)[extra]
    # q - glyph_centre = R(-angle) (p - centre) / s, with x along columns and y along rows.
    qx = (cos * dx + sin * dy) / scale[extra]
    qy = (-sin * dx + cos * dy) / scale[extra]
    return qy + (glyph_shape[0] - 1) / 2.0, qx + (glyph_shape[1] - 1) / 2.0


def generate(
    num_examples,
    seed=0,
    split="train",
    size=48,
    glyphs="digits",
    object_scale=(0.3, 0.45),
    max_rotation=30.0,
    clutter=6,
    fragment_size=None,
    noise=0.0,
    stream=None,
):
    """Generate one split of the cluttered-glyph task.

    Args:
        num_examples: int >= 0, the number of canvases.
        seed: int, the seed of the whole task; with `split`, it fixes every example.
        split: one of `SPLITS`.
        size: int >= 16, the canvas side in pixels.
        glyphs: a key of `GLYPH_SETS` (`"digits"`, `"fine"`) or a string of `FONT` characters.
        object_scale: `(low, high)`, the glyph's height as a fraction of `size`, drawn uniformly.
        max_rotation: float in [0, 180], the largest rotation in degrees, either way.
        clutter: int >= 0, fragments of other glyphs per canvas.
        fragment_size: int, the side of a fragment in pixels; None: a quarter of `size`.
        noise: float >= 0, the standard deviation of Gaussian pixel noise.
        stream: None (the split's own canvases), or an int >= 0: another independent draw of the
            split, never the same canvases as its own draw or another stream's (fresh training
            canvases, chunk after chunk: `datasets.fresh_canvas_dataset`).

    Returns:
        A `ClutteredGlyphs`.

    Raises:
        ValueError: an argument out of range; the message names it and its value.
    """
    fragment_size = _check_arguments(
        num_examples, split, size, object_scale, max_rotation, clutter, fragment_size, noise
    )
    characters = GLYPH_SETS.get(glyphs, glyphs)
    bitmaps = glyph_bitmaps(characters)
    entropy = [seed, SPLITS.index(split)]
    rng = np.random.default_rng(entropy if stream is None else entropy + [check_int("stream", stream, 0) + 1])
    n = num_examples
    labels, heights, angles, centres = _placements(rng, n, len(characters), object_scale, max_rotation, size)
    objects = _draw_glyphs(bitmaps, labels, centres, heights, angles, size)
    masks = objects > _INK
    boxes = _ink_boxes(masks)
    canvases = objects.reshape(n, size * size).copy()
    if clutter and n:
        _add_clutter(canvases, boxes, bitmaps, rng, clutter, object_scale, max_rotation, fragment_size, size)
    images = canvases.reshape(n, size, size, 1)
    if noise:
        images = np.clip(images + rng.normal(0.0, noise, images.shape), 0.0, 1.0)
    return ClutteredGlyphs(
        images=images.astype(np.float32),
        labels=labels,
        boxes=boxes,
        centres=centres,
        heights=heights,
        angles=angles,
        characters=characters,
        masks=masks,
    )


def _check_arguments(num_examples, split, size, object_scale, max_rotation, clutter, fragment_size, noise):
    """Check the arguments of `generate` (see there) and resolve the default fragment size.

    Args:
        num_examples: int >= 0.
        split: one of `SPLITS`.
        size: int >= 16.
        object_scale: `(low, high)`, 0.1 <= low <= high <= 0.9.
        max_rotation: float in [0, 180].
        clutter: int >= 0.
        fragment_size: int in [1, size], or None for a quarter of `size` (at least 2).
        noise: float >= 0.

    Returns:
        int, the fragment size: `fragment_size`, or its default when None.

    Raises:
        ValueError: an argument out of range; the message names it and its value.
    """
    check_choice("split", split, SPLITS)
    check_int("num_examples", num_examples, 0)
    check_int("size", size, 16)
    low, high = object_scale
    if not 0.1 <= low <= high <= 0.9:
        raise ValueError(
            f"`object_scale` must be (low, high), 0.1 <= low <= high <= 0.9. Received: object_scale={object_scale!r}"
        )
    check_number("max_rotation", max_rotation, 0, 180)
    check_number("noise", noise, 0)
    check_int("clutter", clutter, 0)
    return max(2, size // 4) if fragment_size is None else check_int("fragment_size", fragment_size, 1, size)


def _placements(rng, n, classes, object_scale, max_rotation, size):
    """Each example's class and its glyph's placement, drawn from `rng` in this order.

    Args:
        rng: the split's `np.random.Generator`.
        n: int, the number of examples N.
        classes: int, the number of glyph classes.
        object_scale: `(low, high)`, the glyph's height as a fraction of `size`, drawn uniformly.
        max_rotation: float, the largest rotation in degrees, either way.
        size: int, the canvas side in pixels.

    Returns:
        `(labels, heights, angles, centres)`: int32 `[N]`, float32 `[N]` in pixels, float32 `[N]`
        in radians, float32 `[N, 2]` as `(row, column)`, a centre that keeps the rotated glyph on
        the canvas.
    """
    low, high = object_scale
    labels = rng.integers(0, classes, n).astype(np.int32)
    heights = (rng.uniform(low, high, n) * size).astype(np.float32)
    angles = np.radians(rng.uniform(-max_rotation, max_rotation, n)).astype(np.float32)
    # The centre keeps the rotated glyph (its 5:7 ink box) on the canvas.
    half_height, half_width = heights / 2, heights * 5 / 14
    reach_rows = np.abs(np.cos(angles)) * half_height + np.abs(np.sin(angles)) * half_width + 1
    reach_columns = np.abs(np.sin(angles)) * half_height + np.abs(np.cos(angles)) * half_width + 1
    centres = np.stack(
        [rng.uniform(reach_rows, size - 1 - reach_rows), rng.uniform(reach_columns, size - 1 - reach_columns)], axis=1
    ).astype(np.float32)
    return labels, heights, angles, centres


def _draw_glyphs(bitmaps, labels, centres, heights, angles, size):
    """Each example's glyph alone on its canvas, sampled bilinearly through its placement.

    Args:
        bitmaps: float32 `[classes, 32, 24]`, the `glyph_bitmaps` of the glyph set.
        labels: int `[N]`, each example's class.
        centres: float32 `[N, 2]`, each glyph's centre `(row, column)` in pixels.
        heights: float32 `[N]`, each glyph's height in pixels.
        angles: float32 `[N]`, each glyph's rotation in radians.
        size: int, the canvas side in pixels.

    Returns:
        float32 `[N, size, size]`, values in [0, 1], background 0.
    """
    n, glyph_shape = len(labels), bitmaps.shape[1:]
    axis = np.arange(size, dtype=np.float32)
    grid_rows, grid_columns = np.meshgrid(axis, axis, indexing="ij")  # (size, size): row index, column index
    objects = np.zeros((n, size, size), np.float32)
    for start in range(0, n, 512):  # in chunks, to bound memory
        part = slice(start, min(n, start + 512))
        count = part.stop - part.start
        rows = np.broadcast_to(grid_rows, (count, size, size))
        columns = np.broadcast_to(grid_columns, (count, size, size))
        q_rows, q_columns = _glyph_coordinates(rows, columns, centres[part], heights[part], angles[part], glyph_shape)
        objects[part] = _sample(bitmaps, labels[part][:, None, None], q_rows, q_columns)
    return objects


def _ink_boxes(ink):
    """The tight box of each glyph's mask.

    Args:
        ink: bool `[N, size, size]`, each glyph's pixels above `_INK` when drawn alone.

    Returns:
        float32 `[N, 4]`, `(top, left, bottom, right)` in pixels, bottom and right exclusive.
    """
    size = ink.shape[1]
    any_row, any_column = ink.any(axis=2), ink.any(axis=1)
    return np.stack(
        [
            any_row.argmax(axis=1),
            any_column.argmax(axis=1),
            size - any_row[:, ::-1].argmax(axis=1),
            size - any_column[:, ::-1].argmax(axis=1),
        ],
        axis=1,
    ).astype(np.float32)


def _add_clutter(canvases, boxes, bitmaps, rng, clutter, object_scale, max_rotation, fragment_size, size):
    """Paste `clutter` fragments of random glyphs on every canvas, off its glyph's box, in place.

    Each fragment is a square cut from a random glyph of the set (the glyphs' size and rotation
    ranges), centred on a random point of that glyph's ink box; it is pasted where the first of
    three random tries keeps it off the canvas's glyph box, or left out when all three overlap it.
    Where fragments overlap each other, the canvas takes the maximum.

    Args:
        canvases: float32 `[N, size * size]`, the canvases with their glyphs, flattened; written in place.
        boxes: float32 `[N, 4]`, each glyph's box `(top, left, bottom, right)`.
        bitmaps: float32 `[classes, 32, 24]`, the `glyph_bitmaps` of the glyph set.
        rng: the split's `np.random.Generator`, after the glyphs' placements were drawn.
        clutter: int >= 1, fragments per canvas.
        object_scale: `(low, high)`, the fragment's glyph height as a fraction of `size`.
        max_rotation: float, the fragment glyph's largest rotation in degrees, either way.
        fragment_size: int, the side f of a fragment in pixels.
        size: int, the canvas side in pixels.
    """
    low, high = object_scale
    n, classes = len(canvases), len(bitmaps)
    m = n * clutter
    owner = np.repeat(np.arange(n), clutter)
    which = rng.integers(0, classes, m)
    fragment_heights = rng.uniform(low, high, m) * size
    fragment_angles = np.radians(rng.uniform(-max_rotation, max_rotation, m))
    # The fragment's middle sits on a random point of its glyph's ink box, so it has strokes.
    on_glyph = np.stack([rng.uniform(-0.4, 0.4, m) * 7, rng.uniform(-0.4, 0.4, m) * 5], axis=1) * _UPSAMPLE
    # The fragment's top-left on the canvas: the first of three random tries that keeps it off the
    # glyph's box (a fragment whose three tries all overlap the box is left out).
    tries = rng.integers(0, size - fragment_size + 1, (3, m, 2))
    box = boxes[owner]
    clear = (
        (tries[..., 0] + fragment_size <= box[:, 0])
        | (tries[..., 0] >= box[:, 2])
        | (tries[..., 1] + fragment_size <= box[:, 1])
        | (tries[..., 1] >= box[:, 3])
    )  # (3, m)
    corner = tries[clear.argmax(axis=0), np.arange(m)]  # (m, 2)
    values = _fragment_pixels(bitmaps, which, fragment_heights, fragment_angles, on_glyph, fragment_size)
    values = values * clear.any(axis=0)[:, None, None]
    rows = corner[:, 0, None, None] + np.arange(fragment_size)[None, :, None]
    columns = corner[:, 1, None, None] + np.arange(fragment_size)[None, None, :]
    flat_index = owner[:, None, None] * size * size + rows * size + columns
    np.maximum.at(canvases.reshape(-1), flat_index.reshape(-1), values.reshape(-1))


def _fragment_pixels(bitmaps, which, heights, angles, on_glyph, fragment_size):
    """The pixels of fragments: squares cut from glyphs through their placements, sampled bilinearly.

    Args:
        bitmaps: float32 `[classes, 32, 24]`, the `glyph_bitmaps` of the glyph set.
        which: int `[M]`, each fragment's glyph class.
        heights: float `[M]`, each fragment glyph's height in canvas pixels.
        angles: float `[M]`, each fragment glyph's rotation in radians.
        on_glyph: float `[M, 2]`, the fragment's middle `(row, column)` in glyph pixels from the
            glyph's centre.
        fragment_size: int, the side f of a fragment in pixels.

    Returns:
        float32 `[M, f, f]`, values in [0, 1].
    """
    glyph_shape = bitmaps.shape[1:]
    scale = heights / (7 * _UPSAMPLE)
    offsets = np.arange(fragment_size, dtype=np.float64) - (fragment_size - 1) / 2.0
    d_rows, d_columns = np.meshgrid(offsets, offsets, indexing="ij")  # (f, f)
    cos, sin = np.cos(angles)[:, None, None], np.sin(angles)[:, None, None]
    q_x = (cos * d_columns + sin * d_rows) / scale[:, None, None] + on_glyph[:, 1, None, None]
    q_y = (-sin * d_columns + cos * d_rows) / scale[:, None, None] + on_glyph[:, 0, None, None]
    return _sample(
        bitmaps, which[:, None, None], q_y + (glyph_shape[0] - 1) / 2.0, q_x + (glyph_shape[1] - 1) / 2.0
    )  # (m, f, f)


def generate_splits(sizes, seed=0, **options):
    """Every split of the task at once.

    Args:
        sizes: `{split: num_examples}`, e.g. `{"train": 10000, "validation": 1000, "test": 2000}`.
        seed: int, the task's seed.
        **options: the other arguments of `generate` (`size`, `glyphs`, `clutter`, ...).

    Returns:
        `{split: ClutteredGlyphs}`, in the order of `sizes`.
    """
    return {split: generate(n, seed=seed, split=split, **options) for split, n in sizes.items()}


def placement_theta(data, glimpse_fraction):
    """The affine transforms that would cut each glyph out centred and upright: what an STN should find.

    The transform, from glimpse to canvas coordinates (normalized to [-1, 1] over pixel centres,
    as `keras_transformer.vision.affine_grid` reads them), that maps a glimpse whose height is
    `glimpse_fraction` x the glyph's height onto the glyph: scale, rotation by the glyph's angle,
    translation to its centre.

    Args:
        data: a `ClutteredGlyphs`.
        glimpse_fraction: float > 0, the glimpse's side over the glyph's height (e.g. 1.4 leaves a
            margin around the glyph).

    Returns:
        float32 `[N, 2, 3]`.
    """
    size = data.images.shape[1]
    half = (size - 1) / 2.0
    scale = data.heights * glimpse_fraction / 2.0 / half  # the glimpse's half side, normalized
    cos, sin = np.cos(data.angles) * scale, np.sin(data.angles) * scale
    centre_x = data.centres[:, 1] / half - 1.0
    centre_y = data.centres[:, 0] / half - 1.0
    return np.stack([np.stack([cos, -sin, centre_x], 1), np.stack([sin, cos, centre_y], 1)], 1).astype(np.float32)


def theta_placement(theta, size):
    """The centre (pixels), side (pixels) and angle (radians) of the glimpses of affine transforms.

    The inverse of `placement_theta` up to the glimpse's margin: the translation gives the
    centre, the rotation-and-scale part (its closest similarity, ignoring shear) the side and
    the angle.

    Args:
        theta: float `[N, 2, 3]`, transforms from glimpse to canvas coordinates.
        size: int, the canvas side in pixels.

    Returns:
        `(centres [N, 2] as (row, column), sides [N], angles [N])`, float64.
    """
    theta = np.asarray(theta, np.float64)
    half = (size - 1) / 2.0
    centres = np.stack([(theta[:, 1, 2] + 1.0) * half, (theta[:, 0, 2] + 1.0) * half], axis=1)
    a = (theta[:, 0, 0] + theta[:, 1, 1]) / 2.0  # s cos
    b = (theta[:, 1, 0] - theta[:, 0, 1]) / 2.0  # s sin
    return centres, 2.0 * np.hypot(a, b) * half, np.arctan2(b, a)


def angle_error(predicted, true):
    """The absolute difference of two angles in radians, folded into [0, pi]."""
    return np.abs((np.asarray(predicted) - np.asarray(true) + math.pi) % (2 * math.pi) - math.pi)
