"""The figures of the ST-CNN study: the glimpses as training goes, and the validation curves."""

import numpy as np

from benchmarks.vision.stn.train import SHOWN


def _outline(axis, theta, size, **style):
    """Draw the glimpse of `theta` `[2, 3]` on a `size` x `size` canvas shown in pixel coordinates."""
    corners = np.array([[-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1], [-1, -1, 1]], np.float64)  # (u, v, 1)
    points = (corners @ np.asarray(theta, np.float64).T + 1.0) * (size - 1) / 2.0  # (5, 2) as (x, y)
    axis.plot(points[:, 0], points[:, 1], **style)


def plot_glimpses(path, shown, validation, title):
    """Six validation canvases with the final glimpse outlined, and the glimpses as training goes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snapshots = shown["glimpses"]
    rows = 1 + len(snapshots)
    figure, axes = plt.subplots(rows, SHOWN, figsize=(1.5 * SHOWN + 1.2, 1.45 * rows + 0.6), squeeze=False)
    size = validation.images.shape[1]
    for column in range(SHOWN):
        axis = axes[0, column]
        axis.imshow(validation.images[column, ..., 0], cmap="gray_r", vmin=0, vmax=1)
        _outline(axis, shown["theta"][column], size, color="tab:red", linewidth=1.2)
        axis.set_xlim(-0.5, size - 0.5)
        axis.set_ylim(size - 0.5, -0.5)
    axes[0, 0].set_ylabel("canvas,\nlast glimpse", fontsize=7)
    for row, (step, glimpses) in enumerate(snapshots, start=1):
        for column in range(SHOWN):
            axes[row, column].imshow(glimpses[column], cmap="gray_r", vmin=0, vmax=1)
        axes[row, 0].set_ylabel(f"glimpse,\nstep {step:,}", fontsize=7)
    for axis in axes.flat:
        axis.set_xticks([])
        axis.set_yticks([])
    figure.suptitle(title, fontsize=8)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.25 / figure.get_figheight()))  # room for the title
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_curves(path, runs, identity_error, title):
    """Validation accuracy of every run, and the ST-CNN's glimpse centre error, against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (accuracy_axis, error_axis) = plt.subplots(1, 2, figsize=(10, 3.6))
    colours = {"learned": "tab:red", "identity": "tab:gray", "none": "tab:blue"}
    for run in runs:
        steps = [p["step"] for p in run["curve"]]
        style = {"color": colours[run["model"]], "linestyle": "-" if run["seed"] == runs[0]["seed"] else "--"}
        label = f"{run['label']}, seed {run['seed']}"
        accuracy_axis.plot(steps, [p["validation_accuracy_percent"] for p in run["curve"]], label=label, **style)
        if run["model"] == "learned":
            error_axis.plot(steps, [p["centre_error_px"] for p in run["curve"]], label=label, **style)
    error_axis.axhline(identity_error, color="tab:gray", linewidth=1, label="identity (canvas centre)")
    error_axis.axhline(identity_error / 3, color="tab:gray", linewidth=1, linestyle=":", label="a third of it")
    accuracy_axis.set_ylabel("validation accuracy (%)")
    error_axis.set_ylabel("glimpse centre to glyph centre (px)")
    for axis in (accuracy_axis, error_axis):
        axis.set_xlabel("training step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    error_axis.set_ylim(bottom=0)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
