"""The Spatial Transformer paper's ST-CNN on 60x60 cluttered glyphs: does its transform learn where to look?

    python benchmarks/vision_stn.py          # 3 models x 2 seeds, 60x60 canvases, 10,000 steps each
    python benchmarks/vision_stn.py --steps 4 --curve-every 2 --train-size 128 --validation-size 32 \
        --test-size 32 --seeds 0            # a quick check
    python benchmarks/vision_stn.py --help   # every flag

Jaderberg, Simonyan, Zisserman and Kavukcuoglu 2015, "Spatial Transformer Networks"
(https://arxiv.org/abs/1506.02025), section 4.1: on 60x60 cluttered MNIST a spatial transformer
in front of a CNN learns, from the class label alone, to zoom in on the digit and centre it, and
the ST-CNN is more accurate than the CNN. The models (`keras_transformer.vision.st_cnn`), the same
CNN (`--filters` 3x3 convolutions, each with a relu and 2x2 max pooling, then a dense layer of
`--units` and the logits) behind three front ends:

    learned    ST-CNN: a SpatialTransformer with the paper's convolutional localisation net
               (`--localization-rate`), cutting a `--glimpse` x `--glimpse` glimpse
    identity   the same transformer frozen at the identity: the whole canvas resampled to the
               glimpse's size, what the STN starts from
    none       the CNN alone on the full canvas (the paper's CNN baseline)

The task (`keras_transformer.vision.cluttered`, the canvases of vision_ram.py): a digit 25-35% of a
60x60 canvas tall (15 to 21 px), at a random position and rotation (+-30 degrees), among 8
fragments of other glyphs, 8x8 px each; 10 classes. One task for every run (`--task-seed`).
At a 12x12 glimpse the identity reads the canvas at a fifth of its resolution, where the glyph is 3
to 4 px tall: to read it, the transform has to zoom in, and to zoom in on it, to move to it.

Each run: `model.fit` for `--steps` steps of `--batch-size` (shuffled with the seed), Adam with
`--learning-rate`, float32, no augmentation (vision_attention_train.fit); the seed also sets the
initial weights. Runs go seed by seed in one process, the models rotated by one place from one
seed to the next (vision_attention.run_orders). The budget was chosen on the validation split's
curves (every `--curve-every` steps), never on the test split.

Measured per run: test accuracy; trainable parameters; FLOPs of one forward pass
(vision_attention_train.forward_flops; the sampler's gathers are not counted); ms per training
step; for the transformers, where the glimpse lands on the test canvases
(vision_attention_train.stn_placement): its centre's distance to the glyph's centre against the
identity's (the canvas centre), its side over the glyph's height, and its rotation's correlation
with the glyph's; at every curve point, the validation accuracy, the glimpse's centre error, and
the glimpses of six validation canvases (for the figure).

Output: a line per run; tables on stdout; the JSON (`vision_stn.json`, or `--name`: settings,
command, versions, CPU model and flags, every run) in `--out`; two PNGs in `--figures`:
`vision_stn.png` (six validation canvases with the ST-CNN's final glimpse outlined, and its
glimpses of them as training goes, first seed) and `vision_stn_curves.png` (validation accuracy
and the glimpse's centre error against the step, every run).
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np
from vision_attention import (
    add_name_flag,
    add_output_flags,
    add_task_flags,
    check_name,
    check_task_flags,
    generate_task,
    parse_list,
    parsed,
    record_header,
    run_orders,
)
from vision_attention_train import ValidationCurve, fit, forward_flops, stn_placement

from keras_transformer.vision.st_cnn import TRANSFORMS, build_st_cnn

LABELS = {"learned": "ST-CNN", "identity": "identity glimpse", "none": "CNN, full canvas"}
SHOWN = 6  # validation canvases in the glimpse figure


# ---------------------------------------------------------------- flags


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--models",
        type=parse_list(str, TRANSFORMS),
        default=",".join(TRANSFORMS),
        help="Comma-separated models: learned (the ST-CNN), identity (its transform frozen), none (the CNN alone).",
    )
    add_task_flags(
        parser,
        size=60,
        clutter=8,
        object_scale="0.25,0.35",
        fragment_size=8,
        train_size=20000,
        test_size=2000,
        validation_help="Validation canvases of the curves.",
        steps=10000,
        learning_rate=1e-3,
    )
    parser.add_argument("--glimpse", type=int, default=12, help="Side of the glimpse in pixels.")
    parser.add_argument(
        "--filters", type=parse_list(int, unique=False), default="32,32", help="Comma-separated channels of the CNN."
    )
    parser.add_argument("--units", type=int, default=256, help="Width of the CNN's dense hidden layer.")
    parser.add_argument(
        "--localization-rate",
        type=float,
        default=0.1,
        help="How fast the transform moves relative to the rest (SpatialTransformer's localization_rate), in (0, 1].",
    )
    parser.add_argument(
        "--curve-every", type=int, default=1000, help="Steps between the points of the validation curves."
    )
    add_name_flag(parser, "vision_stn")
    add_output_flags(parser)
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parsed(parser, argv)
    check_task_flags(parser, args)
    check_name(parser, args)
    common.check_at_least(parser, args, ("glimpse", "units", "curve_every"), 1)
    if min(args.filters) < 1:
        parser.error(f"--filters must be positive. Received: {args.filters}")
    if not 0 < args.localization_rate <= 1:
        parser.error(f"--localization-rate must be in (0, 1]. Received: {args.localization_rate}")
    if args.curve_every > args.steps:
        parser.error(f"--curve-every must be at most --steps ({args.steps}). Received: {args.curve_every}")
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


# ---------------------------------------------------------------- one run


class GlimpseCurve(ValidationCurve):
    """The validation curve, and at step 0 and each point the transformer's glimpses and centre error."""

    def on_train_begin(self, logs=None):
        self.glimpses = []  # (step, [SHOWN, g, g]) pairs
        self._glimpse_point(0, {})

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if (batch + 1) % self.every == 0:
            self._glimpse_point(batch + 1, self.points[-1])

    def _glimpse_point(self, step, point):
        try:
            transformer = self.model.get_layer("spatial_transformer")
        except ValueError:
            return
        glimpse_model = keras.Model(self.model.inputs, transformer.output)
        glimpses, theta = glimpse_model.predict(self.validation.images, batch_size=250, verbose=0)
        point["centre_error_px"] = stn_placement(theta, self.validation)["centre_error_px"]
        self.glimpses.append((step, glimpses[:SHOWN, ..., 0]))


def train_one(args, transform, seed, data, num_classes):
    """Build, train and measure one model; returns its results and, with a transformer, its glimpses."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    classifier = build_st_cnn(
        transform,
        image_size=(args.size, args.size),
        glimpse_size=(args.glimpse, args.glimpse),
        num_classes=num_classes,
        filters=tuple(args.filters),
        units=args.units,
        localization_rate=args.localization_rate,
    )
    model = classifier.model
    model.compile(
        keras.optimizers.Adam(args.learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.optimizer.build(model.trainable_variables)
    history, (timer, curve), seconds = fit(args, model, seed, data, curve=GlimpseCurve)
    test = data["test"]
    result = {
        "model": transform,
        "label": LABELS[transform],
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(model.predict(test.images, 250, 0).argmax(-1) == test.labels)),
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "curve": curve.points,
    }
    final_theta = None
    if transform != "none":
        glimpse_model = keras.Model(model.inputs, model.get_layer("spatial_transformer").output)
        _, theta = glimpse_model.predict(test.images, batch_size=250, verbose=0)
        result["placement"] = stn_placement(theta, test)
        _, final_theta = glimpse_model.predict(data["validation"].images[:SHOWN], verbose=0)
    return result, {"glimpses": curve.glimpses, "theta": final_theta}


def run_line(result):
    """One run's line on stdout."""
    line = f"seed {result['seed']} {result['label']}: {result['test_accuracy_percent']:.1f}%"
    if "placement" in result:
        p = result["placement"]
        line += (
            f", centre error {p['centre_error_px']:.1f} px (identity {p['identity_centre_error_px']:.1f}),"
            f" side {p['side_over_glyph_height']:.2f} x glyph height, rotation correlation {p['angle_correlation']:.2f}"
        )
    return line + f", {result['train_seconds']:.0f} s"


# ---------------------------------------------------------------- report


def summarise(runs, models):
    """Per model: the seeds' test accuracies, their mean and the lift over the CNN's mean, and the placements."""
    summary = {}
    for name in models:
        mine = [r for r in runs if r["model"] == name]
        accuracies = [r["test_accuracy_percent"] for r in mine]
        summary[name] = {
            "label": LABELS[name],
            "seeds": [r["seed"] for r in mine],
            "test_accuracy_percent": accuracies,
            "mean_test_accuracy_percent": float(np.mean(accuracies)),
            "parameters": mine[0]["parameters"],
            "forward_flops": mine[0]["forward_flops"],
            "ms_per_step_median": float(np.mean([r["ms_per_step_median"] for r in mine])),
        }
        if "placement" in mine[0]:
            for key in ("centre_error_px", "identity_centre_error_px", "side_over_glyph_height", "angle_correlation"):
                summary[name][key] = [r["placement"][key] for r in mine]
    if "none" in summary:
        for entry in summary.values():
            entry["lift_over_cnn_points"] = [
                a - b for a, b in zip(entry["test_accuracy_percent"], summary["none"]["test_accuracy_percent"])
            ]
    return summary


def print_report(args, summary, cpu):
    """The tables on stdout."""
    print(f"\n{common.cpu_line(cpu)}")
    seeds = ", ".join(map(str, args.seeds))
    print(
        f"{args.size}x{args.size} canvases, glimpse {args.glimpse}x{args.glimpse}, {args.steps} steps of "
        f"{args.batch_size}, Adam {args.learning_rate:g}; test accuracy per seed ({seeds})"
    )
    print(f"{'model':<20} {'test accuracy %':<22} {'vs CNN (points)':<20} {'params':>9} {'MFLOPs':>8} {'ms/step':>8}")
    for entry in summary.values():
        accuracies = " / ".join(f"{a:.1f}" for a in entry["test_accuracy_percent"])
        lift = " / ".join(f"{d:+.1f}" for d in entry.get("lift_over_cnn_points", [])) or "-"
        print(
            f"{entry['label']:<20} {accuracies:<22} {lift:<20} {entry['parameters']:>9,} "
            f"{entry['forward_flops'] / 1e6:>8.2f} {entry['ms_per_step_median']:>8.1f}"
        )
    for entry in summary.values():
        if "centre_error_px" in entry:
            errors = " / ".join(f"{e:.1f}" for e in entry["centre_error_px"])
            identity = " / ".join(f"{e:.1f}" for e in entry["identity_centre_error_px"])
            sides = " / ".join(f"{e:.2f}" for e in entry["side_over_glyph_height"])
            angles = " / ".join(f"{e:.2f}" for e in entry["angle_correlation"])
            print(f"{entry['label']}: glimpse centre error {errors} px (identity {identity}); side over glyph height "
                  f"{sides}; rotation correlation {angles}")  # fmt: skip


# ---------------------------------------------------------------- figures


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


# ---------------------------------------------------------------- the run


def main(argv=None):
    """Run the comparison; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    data = generate_task(args)
    num_classes = data["train"].num_classes
    print(f"generated the canvases in {time.perf_counter() - started:.1f} s", flush=True)
    runs, shown = [], None
    for seed, name in run_orders(args.models, args.seeds):
        result, glimpses = train_one(args, name, seed, data, num_classes)
        runs.append(result)
        if name == "learned" and seed == args.seeds[0]:
            shown = glimpses
        print(run_line(result), flush=True)
    summary = summarise(runs, args.models)
    print_report(args, summary, cpu)
    order = [list(o) for o in run_orders(args.models, args.seeds)]
    results = {**record_header(args, cpu, load_start, started, order=order), "models": summary, "runs": runs}
    print(f"wrote {common.write_json(Path(args.out) / f'{args.name}.json', results)}")
    setting = f"{args.size}x{args.size} canvases, {args.glimpse}x{args.glimpse} glimpse"
    if shown is not None:
        path = Path(args.figures) / f"{args.name}.png"
        plot_glimpses(path, shown, data["validation"], f"ST-CNN, seed {args.seeds[0]}: {setting}")
        print(f"wrote {path}")
    if "learned" in args.models:
        identity_error = float(np.linalg.norm(data["validation"].centres - (args.size - 1) / 2.0, axis=1).mean())
        path = Path(args.figures) / f"{args.name}_curves.png"
        plot_curves(path, runs, identity_error, f"Validation curves: {setting}, Adam {args.learning_rate:g}")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
