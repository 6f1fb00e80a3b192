"""The recurrent attention model against a CNN on cluttered glyphs: accuracy by number of glimpses, pixels read.

Mnih et al. 2014 ("Recurrent Models of Visual Attention", https://arxiv.org/abs/1406.6247)
classify 60x60 cluttered translated MNIST with a model that reads a few small glimpses and
chooses where each goes, and report it ahead of a convolutional network that reads every pixel.
This benchmark trains `keras_transformer.vision.recurrent.RecurrentAttentionModel` with T
glimpses for each T of `--glimpses`, and the plain CNN of `vision_attention.py` (3 residual blocks,
`keras_transformer.vision.models.build_classifier("none")`), on the same canvases, for the same
steps and batch, with each seed of `--seeds`.

The task (`keras_transformer.vision.cluttered.generate`): a `--size` canvas (60, as the paper's),
one glyph of height `--object-scale` x the side at a random place and rotation, and `--clutter`
fragments of `--fragment-size` pixels cut from other glyphs (the paper: 8x8 pieces of other
digits).

Measured per model and seed:
- test accuracy (%) on `--test-size` test canvases;
- values read per canvas: the CNN reads all `size^2` pixels; RAM reads `T k g^2` (k patches of
  g x g per glimpse, the coarse ones averaged from larger areas);
- where RAM looks: for each glimpse, the mean distance (pixels) from its centre to the glyph's
  centre, against the canvas centre's distance (where the first glimpse always is), and the share
  of glimpses whose sharp patch (g x g pixels) holds the glyph's centre;
- with `--curve-every N`, the accuracy on `--validation-size` validation canvases every N steps
  (to choose the budget without the test split).

Writes `--output` (JSON: flags, machine, results) and, unless `--figure ''`, a figure: accuracy
against glimpses beside the CNN, and the glimpse paths of the model with the most glimpses over
test canvases.

    python benchmarks/vision_ram.py                          # T = 1, 2, 4, 8 and the CNN, seeds 0 and 1
    python benchmarks/vision_ram.py --glimpses 4 --seeds 0 --steps 500 --curve-every 100
"""

import argparse
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np
from vision_attention import parse_list
from vision_attention_train import compiled_classifier, fit

from keras_transformer.layers.reinforce import BASELINES, Reinforce
from keras_transformer.vision.cluttered import generate_splits
from keras_transformer.vision.recurrent import CORES, REWARDS, RecurrentAttentionModel

ROOT = Path(__file__).resolve().parents[1]


def build_parser():
    """The flags, each with its help and default."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    task = parser.add_argument_group("task")
    task.add_argument("--size", type=int, default=60, help="canvas side in pixels")
    task.add_argument(
        "--object-scale",
        type=parse_list(float, unique=False),
        default=[0.25, 0.35],
        help="low,high: the glyph's height over the canvas side",
    )
    task.add_argument("--clutter", type=int, default=8, help="clutter fragments per canvas")
    task.add_argument("--fragment-size", type=int, default=8, help="side of a clutter fragment in pixels")
    task.add_argument("--train-size", type=int, default=20000, help="training canvases")
    task.add_argument("--validation-size", type=int, default=1000, help="validation canvases (--curve-every)")
    task.add_argument("--test-size", type=int, default=2000, help="test canvases")
    runs = parser.add_argument_group("runs")
    runs.add_argument(
        "--glimpses",
        type=parse_list(int),
        default=[1, 2, 4, 8],
        help="comma-separated glimpse counts T, one RAM per count",
    )
    runs.add_argument("--seeds", type=parse_list(int), default=[0, 1], help="comma-separated seeds")
    runs.add_argument("--steps", type=int, default=2000, help="training steps of every model")
    runs.add_argument("--batch-size", type=int, default=64, help="canvases per step")
    runs.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's learning rate")
    runs.add_argument("--no-cnn", action="store_true", help="leave out the CNN baseline")
    runs.add_argument(
        "--filters", type=parse_list(int, unique=False), default=[16, 32, 32], help="the CNN's channels per block"
    )
    runs.add_argument("--curve-every", type=int, default=0, help="validation accuracy every N steps (0: none)")
    ram = parser.add_argument_group("recurrent attention model")
    ram.add_argument("--patch-size", type=int, default=12, help="the sensor's patch side g")
    ram.add_argument("--scales", type=int, default=3, help="the sensor's patches per glimpse k")
    ram.add_argument("--core", choices=CORES, default="gru", help="the recurrent core")
    ram.add_argument("--location-std", type=float, default=0.2, help="the location policy's standard deviation")
    ram.add_argument("--reward", choices=REWARDS, default="log_likelihood", help="the policy's reward")
    ram.add_argument("--baseline", choices=BASELINES, default="leave_one_out", help="REINFORCE's baseline")
    ram.add_argument("--samples", type=int, default=4, help="episodes per canvas in training")
    ram.add_argument("--no-normalize", action="store_true", help="do not normalise the advantages")
    ram.add_argument(
        "--policy-stop-gradient", action="store_true", help="REINFORCE trains the location head alone, not the core"
    )
    out = parser.add_argument_group("output")
    out.add_argument("--output", type=Path, default=ROOT / "benchmarks/results/vision_ram.json", help="results JSON")
    out.add_argument(
        "--figure", default=str(ROOT / "benchmarks/figures/vision_ram.png"), help="figure path ('' for none)"
    )
    return parser  # fmt: skip


def parse_args(argv=None):
    """The flags of `argv` (the command line's when None), checked: a bad value exits with a message naming it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    common.check_at_least(parser, args, ("steps", "batch_size", "patch_size", "scales", "samples"), 1)
    common.check_at_least(parser, args, ("train_size", "test_size", "validation_size"), 1)
    common.check_at_least(parser, args, ("clutter", "curve_every"), 0)
    common.check_at_least(parser, args, ("size",), 16)
    for name in ("learning_rate", "location_std"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0. Received: {getattr(args, name)}")
    if len(args.object_scale) != 2 or not 0.1 <= args.object_scale[0] <= args.object_scale[1] <= 0.9:
        parser.error(f"--object-scale must be low,high with 0.1 <= low <= high <= 0.9. Received: {args.object_scale}")
    if not 1 <= args.fragment_size <= args.size:
        parser.error(f"--fragment-size must be in [1, --size]. Received: {args.fragment_size}")
    if min(args.glimpses) < 1:
        parser.error(f"--glimpses must be >= 1. Received: {args.glimpses}")
    try:
        args.reinforce = Reinforce(args.baseline, args.samples, normalize=not args.no_normalize)
    except ValueError as error:
        parser.error(str(error))
    return args


def compiled_ram(args, glimpses, seed, num_classes):
    """A new session seeded with `seed`, and a `RecurrentAttentionModel` of `glimpses` glimpses in it, compiled."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = RecurrentAttentionModel(
        num_classes=num_classes,
        glimpses=glimpses,
        patch_size=args.patch_size,
        scales=args.scales,
        core=args.core,
        location_std=args.location_std,
        reward=args.reward,
        policy_trains_core=not args.policy_stop_gradient,
        reinforce=args.reinforce,
        seed=seed,
    )
    model.compile(keras.optimizers.Adam(args.learning_rate), metrics=["accuracy"])
    return model


def where_it_looks(locations, test, patch_size):
    """Distances (pixels) of each glimpse's centre to the glyph's centre, and the share whose sharp patch holds it.

    Args:
        locations: `[N, T, 2]`, normalized `(row, column)` of each glimpse.
        test: the test `ClutteredGlyphs`.
        patch_size: int g, the side of the sharp patch in pixels.

    Returns:
        dict of per-glimpse lists and the canvas centre's distance (the first glimpse's).
    """
    half = (test.images.shape[1] - 1) / 2.0
    pixels = (np.asarray(locations, np.float64) + 1.0) * half  # (N, T, 2)
    offsets = pixels - test.centres[:, None, :]
    inside = np.all(np.abs(offsets) <= patch_size / 2.0, axis=-1)  # the glyph centre in the sharp patch
    return {
        "distance_px": np.linalg.norm(offsets, axis=-1).mean(0).tolist(),
        "sharp_patch_holds_centre": inside.mean(0).tolist(),
        "canvas_centre_distance_px": float(np.linalg.norm(half - test.centres, axis=-1).mean()),
    }


def train_ram(args, glimpses, seed, data, num_classes):
    """Train and measure one RAM; returns its results and the first test canvases' glimpse locations."""
    model = compiled_ram(args, glimpses, seed, num_classes)
    history, callbacks, seconds = fit(args, model, seed, data)
    outputs = model.predict(data["test"].images, batch_size=250, verbose=0)
    result = {
        "model": "ram",
        "glimpses": glimpses,
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(outputs["logits"].argmax(-1) == data["test"].labels)),
        "values_read": model.values_read,
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "ms_per_step_median": float(np.median(callbacks[0].milliseconds[1:] or callbacks[0].milliseconds)),
        "train_seconds": seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "where": where_it_looks(outputs["locations"], data["test"], args.patch_size),
    }
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    return result, outputs["locations"][:8]


def train_cnn(args, seed, data, num_classes):
    """Train and measure the plain CNN of vision_attention.py on the same canvases and budget."""
    args.block, args.glimpse = "residual", 24  # what compiled_classifier reads (no STN here)
    classifier = compiled_classifier(args, "none", seed, num_classes)
    history, callbacks, seconds = fit(args, classifier.model, seed, data)
    logits = classifier.model.predict(data["test"].images, batch_size=250, verbose=0)
    result = {
        "model": "cnn",
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(logits.argmax(-1) == data["test"].labels)),
        "values_read": args.size**2,
        "parameters": int(sum(np.prod(w.shape) for w in classifier.model.trainable_weights)),
        "ms_per_step_median": float(np.median(callbacks[0].milliseconds[1:] or callbacks[0].milliseconds)),
        "train_seconds": seconds,
        "final_train_loss": float(history.history["loss"][-1]),
    }
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    return result


def summarise(runs):
    """Mean and per-seed accuracy of each model: `{name: {"accuracy": [...], "mean": ..., ...}}`."""
    summary = {}
    for run in runs:
        name = "cnn" if run["model"] == "cnn" else f"ram_{run['glimpses']}"
        entry = summary.setdefault(name, {"accuracy_by_seed": [], "values_read": run["values_read"]})
        entry["accuracy_by_seed"].append(run["test_accuracy_percent"])
        if "where" in run:
            entry.setdefault("last_glimpse_distance_px", []).append(run["where"]["distance_px"][-1])
            entry["canvas_centre_distance_px"] = run["where"]["canvas_centre_distance_px"]
    for entry in summary.values():
        entry["mean_accuracy_percent"] = float(np.mean(entry["accuracy_by_seed"]))
    return summary


def print_report(args, summary, cpu):
    """Print the accuracy of each model by seed, the values it reads and where RAM's last glimpse lands."""
    print(f"\nRecurrent attention on {args.size}x{args.size} cluttered glyphs; {common.cpu_line(cpu)}")
    print(f"{args.steps} steps of {args.batch_size}, seeds {args.seeds}; test canvases: {args.test_size}")
    print(f"{'model':<12} {'accuracy % by seed':<24} {'mean':>6} {'values read':>12} {'last glimpse to glyph px':>26}")
    for name, entry in summary.items():
        seeds = " / ".join(f"{a:.1f}" for a in entry["accuracy_by_seed"])
        where = ""
        if "last_glimpse_distance_px" in entry:
            where = " / ".join(f"{d:.1f}" for d in entry["last_glimpse_distance_px"])
            where += f" (centre {entry['canvas_centre_distance_px']:.1f})"
        print(f"{name:<12} {seeds:<24} {entry['mean_accuracy_percent']:>6.1f} {entry['values_read']:>12} {where:>26}")
    if "cnn" in summary:
        cnn = summary["cnn"]["mean_accuracy_percent"]
        for name, entry in summary.items():
            if name != "cnn":
                lift = entry["mean_accuracy_percent"] - cnn
                share = entry["values_read"] / summary["cnn"]["values_read"]
                print(f"{name}: {lift:+.1f} points over the CNN, reading {share:.0%} of its values")


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
        cnn = [r["test_accuracy_percent"] for r in runs if r["model"] == "cnn" and r["seed"] == seed]
        if cnn:
            ax.axhline(cnn[0], linestyle="--", color=ax.lines[-1].get_color(), label=f"CNN, seed {seed}")
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


def main(argv=None):
    """Run the comparison of the flags `argv`: print the report, write the JSON and the figure."""
    args = parse_args(argv)
    started = time.time()
    cpu = common.cpu_info()
    data = generate_splits(
        {"train": args.train_size, "validation": args.validation_size, "test": args.test_size},
        seed=0,
        size=args.size,
        object_scale=tuple(args.object_scale),
        clutter=args.clutter,
        fragment_size=args.fragment_size,
    )
    num_classes = data["test"].num_classes
    runs, paths = [], None
    for seed in args.seeds:
        if not args.no_cnn:
            runs.append(train_cnn(args, seed, data, num_classes))
            print(f"seed {seed} cnn: {runs[-1]['test_accuracy_percent']:.1f}%", flush=True)
        for glimpses in args.glimpses:
            result, locations = train_ram(args, glimpses, seed, data, num_classes)
            runs.append(result)
            if seed == args.seeds[0] and glimpses == max(args.glimpses):
                paths = locations
            print(f"seed {seed} ram T={glimpses}: {result['test_accuracy_percent']:.1f}%", flush=True)
    summary = summarise(runs)
    print_report(args, summary, cpu)
    flags = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "reinforce"}
    flags["reinforce"] = args.reinforce.get_config()
    written = common.write_json(
        args.output,
        {
            "benchmark": "vision_ram",
            "command": common.command_line(sys.argv[1:] if argv is None else argv),
            "flags": {k: v for k, v in flags.items() if k not in ("output", "figure")},
            **common.machine(cpu),
            "packages": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
            "seconds": time.time() - started,
            "summary": summary,
            "runs": runs,
        },
    )
    print(f"wrote {written}")
    if args.figure:
        plot(args.figure, args, runs, data["test"], paths)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
