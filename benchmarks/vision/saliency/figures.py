"""The PNG figures of the saliency study, in the `--out` folder.

`<stem>_maps.png`: six test canvases, their ground-truth masks, each saliency model's map (the
first seed's run), the classifier's gradient saliency and the centre prior, each row with its
colour bar; `<stem>.png`: each score (MAE, max F, pointing hits) per model and reference, each
seed a dot. The stem is `__main__.result_stem`.
"""

import numpy as np

COLUMNS = 6
ROW_TITLES = {
    "none": "encoder-decoder",
    "cbam": "+ CBAM",
    "residual": "+ residual att.",
    "gradient": "gradient saliency",
    "centre_prior": "centre prior",
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_maps(path, args, test, shown, reference_images):
    """Canvases, ground truth, each model's test maps (first seed), the gradient saliency and the centre prior."""
    plt = _pyplot()
    rows = [("canvas", test.images[:COLUMNS, ..., 0], "gray", "pixel value")]
    rows.append(("ground truth", test.masks[:COLUMNS].astype(float), "gray", "mask (1: glyph)"))
    for name, maps in shown.items():
        bar = "|d logit / d pixel| / max" if name == "gradient" else "P(object)"
        rows.append((ROW_TITLES.get(name, name), maps[:COLUMNS], "magma", bar))
    centre = np.broadcast_to(reference_images["centre_prior"], (COLUMNS, *reference_images["centre_prior"].shape))
    rows.append((ROW_TITLES["centre_prior"], centre, "magma", "prior value"))
    count = min(COLUMNS, len(test))
    figure, axes = plt.subplots(
        len(rows), count, figsize=(1.6 * count + 1.4, 1.6 * len(rows)), squeeze=False, layout="constrained"
    )
    for r, (title, images, cmap, bar) in enumerate(rows):
        for c in range(count):
            axis = axes[r, c]
            image = axis.imshow(images[c], cmap=cmap, vmin=0.0, vmax=1.0)
            axis.set_xticks([0, args.size - 1])
            axis.set_yticks([0, args.size - 1])
            axis.tick_params(labelsize=6)
            if c == 0:
                axis.set_ylabel(f"{title}\nrow (px)", fontsize=7)
            if r == len(rows) - 1:
                axis.set_xlabel("column (px)", fontsize=7)
        colour_bar = figure.colorbar(image, ax=axes[r, :].tolist(), fraction=0.03, pad=0.01)
        colour_bar.set_label(bar, fontsize=6)
        colour_bar.ax.tick_params(labelsize=6)
    figure.suptitle(
        f"Test canvases {args.size}x{args.size}, {args.clutter} fragments; {args.block} decoder blocks; "
        f"maps of seed {args.seeds[0]}",
        fontsize=9,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_scores(path, args, summary, cpu, chance):
    """MAE, max F and the pointing hit rate per model and reference: bars at the mean, a dot per seed."""
    plt = _pyplot()
    names = list(summary)
    positions = np.arange(len(names))
    figure, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for axis, (score, title) in zip(
        axes,
        (("mae", "MAE (lower is better)"), ("max_f", "max F, beta^2 = 0.3"), ("pointing_hit_rate", "pointing hits")),
    ):
        axis.bar(positions, [summary[n][f"{score}_mean"] for n in names], color="#8fb3d9")
        for i, n in enumerate(names):
            axis.plot([i] * len(summary[n][score]), summary[n][score], "ko", ms=3)
        if score == "pointing_hit_rate":
            axis.axhline(chance, color="grey", ls=":", lw=1, label="a random pixel")
            axis.legend(fontsize=7)
        axis.set_xticks(positions, [summary[n]["label"] for n in names], rotation=30, ha="right", fontsize=7)
        axis.set_ylabel(title)
    figure.suptitle(
        f"Salient-object detection, cluttered glyphs {args.size}x{args.size}, {args.block} decoder blocks; seeds "
        f"{', '.join(map(str, args.seeds))} (dots); {cpu['model'] or 'unknown CPU'}",
        fontsize=9,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
