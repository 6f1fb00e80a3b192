"""The figure of the scale study: the winning scale per position on small, medium and large glyphs, and bars."""

import numpy as np

from benchmarks.vision.scale.train import TERCILES, terciles


def plot_scales(path, test, weights, edges, run, factors, title):
    """Test canvases of small, medium and large glyphs, the winning scale per position, and bars by tercile.

    Per tercile the canvas shown is the first whose glyph height is closest to the tercile's median.

    Args:
        path: `Path` of the PNG.
        test: the test `ClutteredGlyphs`.
        weights: float `[N, h, w, S]`, the attention model's scale weights on the test canvases.
        edges: the two tercile edges (pixels).
        run: that model's result (its `"scale_weights"` summary).
        factors: the S factors.
        title: str, the figure's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Rectangle

    size = test.images.shape[1]
    groups = terciles(test.heights, edges)
    shown = []  # per tercile, the first canvas whose glyph height is closest to the tercile's median
    for t in range(len(TERCILES)):
        members = np.flatnonzero(groups == t)
        if len(members):
            heights = test.heights[members]
            shown.append(int(members[np.argmin(np.abs(heights - np.median(heights)))]))
    scales = len(factors)
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 1.0, scales))
    cmap, norm = ListedColormap(colours), BoundaryNorm(np.arange(scales + 1) - 0.5, scales)
    figure = plt.figure(figsize=(10.5, 2.8 * len(shown) + 0.6), layout="constrained")
    left, right = figure.subfigures(1, 2, width_ratios=[1.25, 1.0])
    axes = left.subplots(len(shown), 2, squeeze=False)
    for row, i in enumerate(shown):
        canvas, winners = axes[row]
        canvas.imshow(test.images[i, ..., 0], cmap="gray", vmin=0, vmax=1, extent=(0, size, size, 0))
        top, box_left, bottom, box_right = test.boxes[i]
        canvas.set_title(f"{TERCILES[groups[i]]} glyph, {test.heights[i]:.1f} px", fontsize=8)
        image = winners.imshow(
            weights[i].argmax(-1), cmap=cmap, norm=norm, extent=(0, size, size, 0), interpolation="nearest"
        )
        winners.set_title("winning scale per position", fontsize=8)
        for axis in (canvas, winners):
            axis.add_patch(
                Rectangle((box_left, top), box_right - box_left, bottom - top, fill=False, ec="red", ls="--", lw=1.2)
            )
            axis.set_xlabel("column (pixels)", fontsize=7)
            axis.set_ylabel("row (pixels)", fontsize=7)
            axis.tick_params(labelsize=6)
        bar = left.colorbar(image, ax=winners, ticks=range(scales))
        bar.ax.set_yticklabels([f"x{f}" for f in factors], fontsize=7)
        bar.set_label("downsampling factor", fontsize=7)
    bars = right.subplots(2, 1, sharey=True)
    summary = run["scale_weights"]
    present = [t for t in TERCILES if t in summary["inside"]]
    width = 0.8 / scales
    for axis, key in zip(bars, ("inside", "outside")):
        for s in range(scales):
            values = [summary[key][t][s] for t in present]
            positions = np.arange(len(present)) + (s - (scales - 1) / 2) * width
            axis.bar(positions, values, width, color=colours[s], label=f"x{factors[s]}")
        axis.set_xticks(range(len(present)), [f"{t}\n(glyph height tercile)" for t in present], fontsize=7)
        axis.set_ylabel("mean scale weight", fontsize=8)
        axis.set_title(f"{key} the glyph's box (mean over test canvases)", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.legend(title="factor", fontsize=7, title_fontsize=7)
    figure.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
