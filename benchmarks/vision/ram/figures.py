"""The figure of the recurrent attention study: accuracy against glimpses beside the CNN, and the glimpse paths."""

from pathlib import Path


def plot(path, args, runs, test, paths):
    """Accuracy against glimpses beside the CNN, and glimpse paths over test canvases."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    shown = min(len(test.images), 6)
    figure = plt.figure(figsize=(12, 4.2), layout="constrained")
    grid = figure.add_gridspec(2, 1 + (shown + 1) // 2, width_ratios=[2.2] + [1] * ((shown + 1) // 2))
    ax = figure.add_subplot(grid[:, 0])
    for seed in args.seeds:
        rams = sorted(
            (r["glimpses"], r["test_accuracy_percent"]) for r in runs if r["model"] == "ram" and r["seed"] == seed
        )
        ax.plot(*zip(*rams), marker="o", label=f"RAM, seed {seed}")
        colour = ax.lines[-1].get_color()
        for kind, style, label in (("cnn", "--", "CNN"), ("paper_cnn", ":", "paper's CNN")):
            cnn = [r["test_accuracy_percent"] for r in runs if r["model"] == kind and r["seed"] == seed]
            if cnn:
                ax.axhline(cnn[0], linestyle=style, color=colour, label=f"{label}, seed {seed}")
    ax.set_xlabel("glimpses T")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xticks(sorted(args.glimpses))
    ax.set_title("accuracy by number of glimpses")
    ax.legend(fontsize=8)
    half = (args.size - 1) / 2.0
    glimpses = max(args.glimpses)
    for i in range(shown):
        ax = figure.add_subplot(grid[i % 2, 1 + i // 2])
        ax.imshow(test.images[i, ..., 0], cmap="gray_r", vmin=0, vmax=1)
        points = (paths[i] + 1.0) * half  # (T, 2) as (row, column)
        ax.plot(points[:, 1], points[:, 0], "-", color="tab:orange", linewidth=1)
        side = args.patch_size
        for t, (row, column) in enumerate(points):
            colour = matplotlib.colormaps["viridis"](t / max(glimpses - 1, 1))
            ax.add_patch(Rectangle((column - side / 2, row - side / 2), side, side, fill=False, color=colour))
        ax.plot(points[0, 1], points[0, 0], "o", color="tab:orange", markersize=3)
        ax.set_xlim(-0.5, args.size - 0.5)
        ax.set_ylim(args.size - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"glyph '{test.characters[test.labels[i]]}'", fontsize=9)
    figure.suptitle(
        f"RAM, {glimpses} glimpses (seed {args.seeds[0]}): sharp patches from the first (dark) to the last (yellow)",
        fontsize=10,
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
