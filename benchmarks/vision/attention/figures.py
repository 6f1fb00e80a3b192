"""The PNG figures of the attention study, in the `--out` folder.

`<stem>.png`: test accuracy per model (each seed a dot) and each spatial map's mass inside the
glyph's box against a uniform map's; `<stem>_maps.png`: six test canvases with the glyph's box,
each model's map over them, and the STN's glimpses; with `--curve-every`,
`<stem>_validation.png`: validation accuracy against the steps, per model. The stem is
`__main__.result_stem`.
"""

import numpy as np

from benchmarks.vision.attention import report


def plot_curves(path, args, models):
    """Validation accuracy after each number of steps, per model (the mean of the seeds, each seed a thin line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for i, summary in enumerate(models.values()):
        steps = [point["step"] for point in summary["curve"]]
        per_seed = np.array([point["validation_accuracy_percent"] for point in summary["curve"]])  # (points, seeds)
        axis.plot(steps, per_seed, color=f"C{i}", lw=0.7, alpha=0.5)
        axis.plot(steps, per_seed.mean(1), color=f"C{i}", lw=2, marker="o", ms=3, label=summary["label"])
    axis.axhline(100.0 / next(iter(models.values()))["num_classes"], color="grey", ls=":", lw=1, label="chance")
    axis.set_xlabel("training steps")
    axis.set_ylabel("validation accuracy (%)")
    axis.set_title(
        f"{args.glyphs}, {report.blocks_label(args)}, batch {args.batch_size}, Adam {args.learning_rate}; "
        f"seeds {', '.join(map(str, args.seeds))} (thin)",
        fontsize=10,
    )
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_summary(path, args, models, cpu):
    """Accuracy per model (each seed a dot), and each map's mass in the box against a uniform map's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(models)
    labels = [models[n]["label"] for n in names]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    positions = np.arange(len(names))
    left.bar(positions, [models[n]["test_accuracy_percent_mean"] for n in names], color="#8fb3d9")
    for i, n in enumerate(names):
        left.plot([i] * len(models[n]["test_accuracy_percent"]), models[n]["test_accuracy_percent"], "ko", ms=4)
    left.set_xticks(positions, labels, rotation=25, ha="right")
    left.set_ylabel("test accuracy (%)")
    left.set_title(
        f"{report.blocks_label(args)}; {args.steps} steps of {args.batch_size}; seeds {', '.join(map(str, args.seeds))}"
    )
    left.axhline(100.0 / models[names[0]]["num_classes"], color="grey", ls=":", lw=1, label="chance")
    left.legend(fontsize=8)
    mass = [models[n]["pointing"]["mass_in_box"] for n in names]
    uniform = [models[n]["pointing"]["uniform_share"] for n in names]
    colours = ["#e4a35c" if models[n]["map_kind"] == "activation" else "#6aa84f" for n in names]
    right.bar(positions, mass, color=colours)
    right.plot(positions, uniform, "k_", ms=25, mew=2, label="uniform map")
    right.set_xticks(
        positions,
        [f"{lab}\n({models[n]['map_kind']})" for lab, n in zip(labels, names)],
        fontsize=8,
        rotation=25,
        ha="right",
    )
    right.set_ylabel("share of the map's mass inside the glyph's box")
    right.set_title("Does the spatial map fall on the glyph?\n(orange: activations, not attention)", fontsize=10)
    right.legend(fontsize=8)
    figure.suptitle(
        f"Cluttered glyphs ({args.glyphs}), {args.size}x{args.size}; {cpu['model'] or 'unknown CPU'}", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_maps(path, test, shown):
    """Six test canvases with the glyph's box, each model's map over them, and the STN's glimpses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ["canvas", *shown] + (["stn glimpse"] if "stn" in shown else [])
    figure, axes = plt.subplots(len(rows), 6, figsize=(9, 1.55 * len(rows)))
    for column in range(6):
        top, left, bottom, right = test.boxes[column]
        for row, name in enumerate(rows):
            axis = axes[row, column]
            axis.set_xticks([])
            axis.set_yticks([])
            if name == "canvas":
                axis.imshow(test.images[column, ..., 0], cmap="gray")
            elif name == "stn glimpse":
                axis.imshow(shown["stn"]["glimpses"][column], cmap="gray")
            else:
                axis.imshow(test.images[column, ..., 0], cmap="gray")
                axis.imshow(shown[name]["maps"][column], cmap="magma", alpha=0.6)
            if name != "stn glimpse":
                axis.add_patch(
                    plt.Rectangle((left - 0.5, top - 0.5), right - left, bottom - top, fill=False, ec="cyan", lw=1)
                )
            if column == 0:
                axis.set_ylabel(name, fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
