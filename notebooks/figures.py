"""The walkthroughs' figure settings, and the checks that keep every figure readable.

`use()`, in each notebook's first cell (after `%matplotlib inline`), sets one resolution for all of
them (`DPI`) and the default text size, and installs `watch` as a figure hook: every figure drawn
is then checked (`problems`) as it is rendered into the notebook. The checks:

- the figure's resolution is `DPI` (at least 100);
- no visible text is smaller than `MIN_TEXT_PX` pixels (its font size at that resolution);
- no text shows TeX unrendered (`l_{t-1}` outside `$...$`);
- no two texts are drawn over each other, and no text of a diagram runs over the edges of its box;
- no legend runs over its axes' frame or is drawn over the data (a line's points, a bar);
- every heatmap (an image in a colour map other than grey) has a labelled colour bar of its scale,
  not much taller than the heatmaps it describes.

The problems go to the file named by the environment variable `NOTEBOOK_FIGURE_CHECKS` (one JSON
line per figure drawn: its number and its problems), which the notebook tests read; without the
variable, as when a learner runs a notebook, nothing is written.

Two drawing helpers every notebook may use: `colour_bar` (a labelled colour bar as tall as its
heatmaps) and `show` (a grey-scale canvas of the vision notebooks, its glyph box outlined).
"""

import json
import os
import re

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch, Rectangle

DPI = 110  # every notebook's figures: one resolution
MIN_TEXT_PX = 10  # the smallest font size allowed, in pixels at DPI (7 points are 10.7 pixels)
FONT_SIZE = 10  # points
CHECKS_ENV = "NOTEBOOK_FIGURE_CHECKS"
# TeX that only math mode renders: `x_{t-1}`, `x^{2}`, `\\sigma`; and a one-letter name with an index or
# exponent written out, `l_0`, `W^O`.
_TEX_OUTSIDE_MATH = re.compile(r"[_^]\{|\\[A-Za-z]+|(?<![A-Za-z0-9_])[A-Za-z][_^][A-Za-z0-9](?![A-Za-z0-9_])")
_drawn = {"count": 0}


def use():
    """Set the figures' resolution and text size, and check every figure drawn from now on (`watch`)."""
    plt.rcParams.update(
        {"figure.dpi": DPI, "savefig.dpi": DPI, "font.size": FONT_SIZE, "figure.hooks": [f"{__name__}:watch"]}
    )


def show(ax, image, box=None, title=None, **imshow_args):
    """A grey-scale image in [0, 1] on `ax`, without ticks; `box (top, left, bottom, right)` outlined in cyan.

    `imshow_args` go to `ax.imshow` (e.g. `extent`). Returns the `AxesImage`.
    """
    shown = ax.imshow(image, cmap="gray", vmin=0, vmax=1, **imshow_args)
    if box is not None:
        top, left, bottom, right = box
        ax.add_patch(Rectangle((left - 0.5, top - 0.5), right - left, bottom - top, fill=False, ec="cyan", lw=1))
    if title:
        ax.set_title(title, fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    return shown


def colour_bar(image, label, ax=None, side="right", cax=None):
    """A colour bar for `image`, labelled `label`, beside `ax` (default: the image's axes) and as tall as it.

    For several heatmaps on one scale, give the last of them as `ax`. `side="bottom"` puts a
    horizontal bar under `ax` instead, as wide as it. `cax`: an axes to draw the bar in instead
    (a narrow column of the figure's grid), so that no heatmap is shrunk to make room for it.

    Returns:
        the `Colorbar`.
    """
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    ax = image.axes if ax is None else ax
    if cax is not None:
        return ax.figure.colorbar(image, cax=cax, label=label)
    bar_axes = make_axes_locatable(ax).append_axes(side, size="5%", pad=0.08 if side == "right" else 0.6)
    orientation = "vertical" if side == "right" else "horizontal"
    return ax.figure.colorbar(image, cax=bar_axes, label=label, orientation=orientation)


def _texts(figure):
    """Every visible, non-empty text of `figure`: titles, labels, tick labels, legends, annotations."""
    for text in figure.findobj(lambda artist: hasattr(artist, "get_text") and hasattr(artist, "get_fontsize")):
        if text.get_visible() and text.get_text().strip():
            yield text


def _drawn_texts(figure):
    """`_texts` less the labels of ticks outside their axis' limits, which matplotlib keeps but does not draw."""
    undrawn = set()
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            drawn = {id(tick) for tick in axis._update_ticks()}
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if id(tick) not in drawn:
                    undrawn.update((id(tick.label1), id(tick.label2)))
    return [text for text in _texts(figure) if id(text) not in undrawn]


def _overlaps(figure, renderer):
    """Pairs of texts of `figure` drawn over each other (a label on a label, a tick label on the next)."""
    boxes = [(text, text.get_window_extent(renderer)) for text in _drawn_texts(figure)]
    found = []
    for i, (text, extent) in enumerate(boxes):
        for other, other_extent in boxes[i + 1 :]:
            width = min(extent.x1, other_extent.x1) - max(extent.x0, other_extent.x0)
            height = min(extent.y1, other_extent.y1) - max(extent.y0, other_extent.y0)
            if width > 1 and height > 1:  # more than a pixel each way
                found.append(f"texts {text.get_text()[:25]!r} and {other.get_text()[:25]!r} overlap")
    return found


def _spills(figure, renderer):
    """Texts written in a box of a diagram (a `FancyBboxPatch` around the text's anchor) that run over its edges."""
    found = []
    for axes in figure.axes:
        boxes = [patch.get_window_extent(renderer) for patch in axes.patches if isinstance(patch, FancyBboxPatch)]
        for text in axes.texts:
            if not (text.get_visible() and text.get_text().strip()):
                continue
            anchor = axes.transData.transform(text.get_position())
            extent = text.get_window_extent(renderer)
            for box in boxes:
                inside = box.x0 <= anchor[0] <= box.x1 and box.y0 <= anchor[1] <= box.y1
                outside = min(extent.x0 - box.x0, box.x1 - extent.x1, extent.y0 - box.y0, box.y1 - extent.y1)
                if inside and outside < -1:  # over an edge by more than a pixel
                    found.append(f"text {text.get_text()[:30]!r} runs over the edges of its box")
                    break
    return found


def _legends(figure, renderer):
    """Legends that run over their axes' frame, or that are drawn over the data (a line's point, a bar)."""
    found = []
    for axes in figure.axes:
        legend = axes.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box, frame = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
        overlaps = box.x1 > frame.x0 and box.x0 < frame.x1 and box.y1 > frame.y0 and box.y0 < frame.y1
        inside = box.x0 >= frame.x0 - 1 and box.x1 <= frame.x1 + 1 and box.y0 >= frame.y0 - 1 and box.y1 <= frame.y1 + 1
        if overlaps and not inside:
            found.append(f"the legend of {axes.get_title()[:30]!r} runs over the axes' frame")
        points = [line.get_transform().transform(line.get_xydata()) for line in axes.get_lines()]
        points += [
            collection.get_offset_transform().transform(collection.get_offsets()) for collection in axes.collections
        ]
        points = [xy for xy in points if len(xy)]
        covered = any(
            ((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)).any()
            for xy in points
        )
        bars = [patch.get_window_extent(renderer) for patch in axes.patches if isinstance(patch, Rectangle)]
        covered = covered or any(
            min(bar.x1, box.x1) - max(bar.x0, box.x0) > 1 and min(bar.y1, box.y1) - max(bar.y0, box.y0) > 1
            for bar in bars
        )
        if covered:
            found.append(f"the legend of {axes.get_title()[:30]!r} covers data")
    return found


PICTURE_COLORMAPS = ("gray", "Greys", "binary", "gray_r", "Greys_r", "binary_r")  # images, not values


def _colour_bars(figure, renderer):
    """Heatmaps without a colour bar of their scale; colour bars unlabelled or much taller than their heatmaps."""
    images = [image for axes in figure.axes for image in axes.images]
    bars = {id(image.colorbar): image.colorbar for image in images if image.colorbar is not None}.values()
    found = []
    for image in images:
        if image.get_cmap().name in PICTURE_COLORMAPS:
            continue
        scale = (image.get_cmap().name, image.norm.vmin, image.norm.vmax)
        if not any((bar.mappable.get_cmap().name, bar.norm.vmin, bar.norm.vmax) == scale for bar in bars):
            found.append(f"the heatmap {image.axes.get_title()[:30]!r} has no colour bar")
    for bar in bars:
        if not (bar.ax.get_ylabel() or bar.ax.get_xlabel()):
            found.append(f"a colour bar of {bar.mappable.axes.get_title()[:30]!r} has no label")
        tallest = max(image.get_window_extent(renderer).height for image in images if image.colorbar is bar)
        if bar.ax.get_window_extent(renderer).height > 1.3 * tallest:
            found.append(f"a colour bar of {bar.mappable.axes.get_title()[:30]!r} is much taller than its heatmaps")
    return found


def problems(figure, renderer=None):
    """What makes `figure` hard to read, as short sentences (empty when none).

    With the `renderer` that drew it, texts drawn over each other or over the edges of their box
    in a diagram, legends over the frame or the data, and heatmaps without a fitting colour bar are
    found too.
    """
    found = []
    if renderer is not None:
        for check in (_overlaps, _spills, _legends, _colour_bars):
            found += check(figure, renderer)
    if round(figure.dpi) != DPI:
        found.append(f"drawn at {figure.dpi:g} dpi, not {DPI}")
    for text in _texts(figure):
        content = text.get_text()
        pixels = text.get_fontsize() * figure.dpi / 72
        if pixels < MIN_TEXT_PX - 1e-6:
            found.append(f"text {content[:30]!r} is {pixels:.1f} px, under {MIN_TEXT_PX}")
        outside_math = re.sub(r"\$[^$]*\$", "", content) if content.count("$") >= 2 else content
        if _TEX_OUTSIDE_MATH.search(outside_math):
            found.append(f"text {content[:30]!r} shows TeX unrendered")
    return found


def watch(figure):
    """The figure hook of `use`: check `figure` each time it is drawn, when `NOTEBOOK_FIGURE_CHECKS` names a file."""
    path = os.environ.get(CHECKS_ENV)
    if not path:
        return
    _drawn["count"] += 1
    number = _drawn["count"]

    def record(event):
        with open(path, "a", encoding="utf-8") as file:
            titles = [axes.get_title() for axes in figure.axes if axes.get_title()]
            first = figure._suptitle.get_text() if figure._suptitle else (titles[0] if titles else "")
            line = {"figure": number, "title": first, "problems": problems(figure, event.renderer)}
            file.write(json.dumps(line) + "\n")

    figure.canvas.mpl_connect("draw_event", record)
