"""The figure of the DCN study: test canvases with the DCN's chosen patches, and its saliency maps."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402


def plot_patches(path, test, shown, patch_size, characters, title):
    """Draw the DCN's chosen patches and saliency maps on test canvases, a PNG at `path`.

    Top row: the canvases, the glyph's box (green, dashed) and the chosen patches (red, numbered
    by saliency rank); bottom row: the saliency map over the grid.

    Args:
        path: `Path` of the PNG.
        test: the test `ClutteredGlyphs`.
        shown: dict of the first canvases' `"positions"` `[n, k]`, `"saliency"` `[n, h, w]`,
            `"logits"` and `"coarse_logits"` `[n, K]`.
        patch_size: int, p.
        characters: str, the class names.
        title: str, the figure's title.
    """
    n = len(shown["positions"])
    size = test.images.shape[1]
    h, w = shown["saliency"].shape[1:]
    figure, axes = plt.subplots(2, n, figsize=(2.3 * n, 5.6), squeeze=False)
    for i in range(n):
        top, bottom = axes[0, i], axes[1, i]
        top.imshow(test.images[i, ..., 0], cmap="gray", vmin=0, vmax=1, extent=(0, size, size, 0))
        box_top, box_left, box_bottom, box_right = test.boxes[i]
        top.add_patch(
            Rectangle(
                (box_left, box_top), box_right - box_left, box_bottom - box_top, fill=False, ec="lime", ls="--", lw=1.2
            )
        )
        for rank, position in enumerate(shown["positions"][i], start=1):
            row, column = divmod(int(position), w)
            top.add_patch(
                Rectangle((column * patch_size, row * patch_size), patch_size, patch_size, fill=False, ec="red", lw=1.5)
            )
            top.text(column * patch_size + 1, row * patch_size + 3, str(rank), color="red", fontsize=7)
        top.set_xlim(0, size)
        top.set_ylim(size, 0)
        true = characters[test.labels[i]]
        predicted = characters[shown["logits"][i].argmax()]
        coarse = characters[shown["coarse_logits"][i].argmax()]
        top.set_title(f"true {true}, DCN {predicted}\ncoarse {coarse}", fontsize=8)
        top.set_xlabel("column (pixels)", fontsize=7, labelpad=1)
        bottom.imshow(shown["saliency"][i], cmap="magma", extent=(0, w * patch_size, h * patch_size, 0))
        bottom.set_xlabel("column (pixels)", fontsize=7)
        bottom.set_title("saliency ||dH/dc||", fontsize=8)
        for axis in (top, bottom):
            axis.tick_params(labelsize=6)
        if i == 0:
            top.set_ylabel("row (pixels)", fontsize=7)
            bottom.set_ylabel("row (pixels)", fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout(h_pad=2.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
