"""Dynamic Capacity Networks on cluttered glyphs: the DCN against coarse-only and fine-everywhere.

    python benchmarks/vision_dcn.py                    # 3 models x 2 seeds, 40x40 canvases, 1500 steps each
    python benchmarks/vision_dcn.py --size 60          # the papers' style: 60x60, smaller glyphs, more clutter
    python benchmarks/vision_dcn.py --steps 5 --train-size 128 --validation-size 64 --test-size 64 --seeds 0
                                                       # a quick check
    python benchmarks/vision_dcn.py --help             # every flag

Almahairi et al. 2016, "Dynamic Capacity Networks" (https://arxiv.org/abs/1511.07838): a cheap
coarse network reads the whole canvas, an expensive fine network only the k patches where the
gradient of the coarse prediction's entropy is largest, and the same top network classifies
(`keras_transformer.vision.dynamic_capacity`). The question: does the DCN get the accuracy of
the fine network run everywhere at a fraction of its FLOPs, and do its patches fall on the glyph?

The task (`keras_transformer.vision.cluttered`): a digit at a random position, height and
rotation (+-30 degrees) on a `--size` canvas with `--clutter` fragments of other glyphs off its
box; 10 classes. At `--size 40` the glyphs are 30-45% of the canvas and 6 fragments; at 60 or
more (the papers' cluttered MNIST style) 25-35% and 10 fragments, with 12-pixel patches instead
of 8 (`--object-scale`, `--clutter` and `--patch-size` override these). One task for every run
(`--task-seed`): the same training, validation and test canvases for every model and seed.

The three models share the top network and the budget (vision_dcn_train.py says what each run
trains and measures). The runs go seed by seed in one process, models in `--models` order.

Output: a line per run as it finishes, a table per seed and model (test accuracy, FLOPs per canvas
and their ratio to each bound, the DCN's k and its patches on the glyph against chance), the JSON
(`vision_dcn.json`, `vision_dcn_60.json` for `--size 60`: settings, command, versions, CPU model
and flags, every run) in `--out`, and a PNG in `--figures` (`vision_dcn_patches.png`, `_60`): test
canvases with the DCN's chosen patches and its saliency maps, first seed.

Modules: this one holds the command line, the report and the run (`main`); vision_dcn_train.py
builds, trains and measures one model; vision_dcn_figures.py draws the PNG.
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
    add_output_flags,
    add_task_flags,
    check_task_flags,
    generate_task,
    parse_list,
    parsed,
    record_header,
)
from vision_dcn_figures import plot_patches
from vision_dcn_train import train_one

from keras_transformer.vision.dynamic_capacity import MODES, grid_size

LABELS = {"coarse": "coarse only", "fine": "fine everywhere", "dcn": "DCN"}


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--models",
        type=parse_list(str, MODES),
        default="coarse,fine,dcn",
        help="Comma-separated models: coarse (coarse network only), fine (fine network on every patch), dcn.",
    )
    add_task_flags(
        parser,
        object_scale=None,
        object_scale_help="Glyph height range as fractions of the canvas, 'low,high'; default 0.3,0.45 below "
        "--size 60, 0.25,0.35 from 60.",
        clutter=None,
        clutter_help="Fragments of other glyphs per canvas; default 6 below --size 60, 10 from 60.",
        validation_help="Validation canvases (to choose the DCN's k).",
        steps=1500,
    )
    parser.add_argument(
        "--patch-size",
        type=int,
        default=None,
        help="Side of the image block of each grid position (a fine patch); default 8 below --size 60, 12 from 60.",
    )
    parser.add_argument("--coarse-factor", type=int, default=4, help="The coarse network's downsampling of the canvas.")
    parser.add_argument(
        "--coarse-filters",
        type=parse_list(int, unique=False),
        default="16",
        help="Comma-separated channels of the coarse network's 3x3 convolutions.",
    )
    parser.add_argument(
        "--fine-filters",
        type=parse_list(int, unique=False),
        default="32,32,64",
        help="Comma-separated channels of the fine network's 3x3 convolutions (a 2x2 max pool after each but "
        "the first).",
    )
    parser.add_argument("--features", type=int, default=32, help="Feature width D of both networks per position.")
    parser.add_argument("--top-units", type=int, default=32, help="Channels of the top network's 3x3 convolution.")
    parser.add_argument("--k", type=int, default=4, help="Fine patches per canvas while the DCN trains.")
    parser.add_argument(
        "--k-choices",
        type=parse_list(int),
        default="2,3,4,5,6",
        help="Comma-separated numbers of fine patches to evaluate the trained DCN with; the one used is chosen "
        "on the validation canvases.",
    )
    parser.add_argument(
        "--k-tolerance",
        type=float,
        default=0.5,
        help="The chosen k: the smallest of --k-choices within this many points of the best validation accuracy.",
    )
    parser.add_argument("--hint-weight", type=float, default=1.0, help="Weight of the DCN's hint term.")
    parser.add_argument(
        "--coarse-weight", type=float, default=1.0, help="Weight of the DCN's coarse prediction's cross-entropy."
    )
    parser.add_argument("--figure-canvases", type=int, default=8, help="Test canvases in the figure.")
    add_output_flags(parser)
    return parser


def parse_args(argv=None):
    """The flags, checked, with the size's defaults filled in (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parsed(parser, argv)
    common.check_at_least(parser, args, ("size",), 16)  # before the defaults that depend on it
    papers = args.size >= 60
    if args.object_scale is None:
        args.object_scale = [0.25, 0.35] if papers else [0.3, 0.45]
    if args.clutter is None:
        args.clutter = 10 if papers else 6
    if args.patch_size is None:
        args.patch_size = 12 if papers else 8
    check_task_flags(parser, args)
    common.check_at_least(
        parser, args, ("patch_size", "coarse_factor", "features", "top_units", "k", "figure_canvases"), 1
    )
    for name in ("hint_weight", "coarse_weight", "k_tolerance"):
        if not getattr(args, name) >= 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0. Received: {getattr(args, name)}")
    if args.patch_size % args.coarse_factor:
        parser.error(
            f"--patch-size must be a multiple of --coarse-factor ({args.coarse_factor}). Received: {args.patch_size}"
        )
    h, w = grid_size(args.size, args.size, args.patch_size)
    for k in [args.k, *args.k_choices]:
        if not 1 <= k <= h * w:
            parser.error(
                f"--k and --k-choices must be in [1, {h * w}], the {h} x {w} grid of {args.size}-pixel canvases in "
                f"{args.patch_size}-pixel patches. Received: {k}"
            )
    if any(v < 1 for v in [*args.coarse_filters, *args.fine_filters]):
        parser.error(
            f"--coarse-filters and --fine-filters must be positive. Received: {args.coarse_filters}, "
            f"{args.fine_filters}"
        )
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


def result_stem(args):
    """The name of the run's files: `vision_dcn`, `vision_dcn_60` at `--size 60` (`_<size>` for any size but 40)."""
    return "vision_dcn" if args.size == 40 else f"vision_dcn_{args.size}"


def run_line(result):
    """The line printed as a run finishes."""
    line = (
        f"seed {result['seed']} {result['mode']:<6} accuracy {result['test_accuracy_percent']:5.1f}%  "
        f"{result['flops'] / 1e6:7.2f} MFLOPs  {result['ms_per_step_median']:6.1f} ms/step  "
        f"{result['train_seconds']:.0f} s"
    )
    if result["mode"] == "dcn":
        glyph = result["on_glyph"]
        line += (
            f"  k {result['k_chosen']}  on glyph {glyph['share']:.2f} (chance {glyph['chance']:.2f})  "
            f"coarse head {result['coarse_head_test_accuracy_percent']:.1f}%  "
            f"random patches {result['random_patches_test_accuracy_percent']:.1f}%"
        )
    return line


def summarise(runs, models):
    """Per model: each seed's accuracy and FLOPs, their means, and for the DCN its k and patch scores."""
    summary = {}
    for mode in models:
        mine = [run for run in runs if run["mode"] == mode]
        entry = {
            "label": LABELS[mode],
            "seeds": [run["seed"] for run in mine],
            "test_accuracy_percent": [run["test_accuracy_percent"] for run in mine],
            "mean_test_accuracy_percent": float(np.mean([run["test_accuracy_percent"] for run in mine])),
            "flops": [run["flops"] for run in mine],
            "profiler_flops": [run["profiler_flops"] for run in mine],
        }
        if mode == "dcn":
            entry["k_chosen"] = [run["k_chosen"] for run in mine]
            entry["on_glyph_share"] = [run["on_glyph"]["share"] for run in mine]
            entry["on_glyph_chance"] = [run["on_glyph"]["chance"] for run in mine]
            entry["coarse_head_test_accuracy_percent"] = [run["coarse_head_test_accuracy_percent"] for run in mine]
            entry["random_patches_test_accuracy_percent"] = [
                run["random_patches_test_accuracy_percent"] for run in mine
            ]
        summary[mode] = entry
    return summary


def print_report(args, runs, cpu):
    """The table of every run: accuracy, FLOPs and their ratio to each bound of the same seed."""
    print()
    print(common.cpu_line(cpu))
    print(
        f"{args.size}x{args.size} canvases, glyphs {args.object_scale[0]:.2f}-{args.object_scale[1]:.2f} of the side, "
        f"{args.clutter} fragments; {args.patch_size}-pixel patches; {args.steps} steps of {args.batch_size}, "
        f"Adam {args.learning_rate:g}; DCN trained with k = {args.k}"
    )
    print(
        f"{'model':<16} {'seed':>4} {'test acc %':>10} {'MFLOPs':>9} {'/ coarse':>9} {'/ fine':>7} "
        f"{'k':>3} {'on glyph':>9} {'chance':>7}"
    )
    for seed in args.seeds:
        bounds = {run["mode"]: run["flops"] for run in runs if run["seed"] == seed}
        for run in (run for run in runs if run["seed"] == seed):
            over_coarse = f"{run['flops'] / bounds['coarse']:.2f}x" if "coarse" in bounds else "n/a"
            over_fine = f"{run['flops'] / bounds['fine']:.3f}x" if "fine" in bounds else "n/a"
            k, glyph, chance = "", "", ""
            if run["mode"] == "dcn":
                k = str(run["k_chosen"])
                glyph, chance = f"{run['on_glyph']['share']:.2f}", f"{run['on_glyph']['chance']:.2f}"
            print(
                f"{LABELS[run['mode']]:<16} {seed:>4} {run['test_accuracy_percent']:>10.1f} {run['flops'] / 1e6:>9.2f} "
                f"{over_coarse:>9} {over_fine:>7} {k:>3} {glyph:>9} {chance:>7}"
            )
    for run in runs:
        if run["mode"] == "dcn":
            by_k = "  ".join(
                f"k={k}: {run['validation_accuracy_by_k'][k]:.1f}/{run['test_accuracy_by_k'][k]:.1f}"
                for k in run["validation_accuracy_by_k"]
            )
            print(f"DCN seed {run['seed']} validation/test accuracy % by k: {by_k}")


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    data = generate_task(args)
    num_classes = data["train"].num_classes
    print(f"generated the canvases in {time.perf_counter() - started:.1f} s", flush=True)
    runs, shown = [], None
    for seed in args.seeds:
        for mode in args.models:
            result, details = train_one(args, mode, seed, data, num_classes)
            runs.append(result)
            if mode == "dcn" and shown is None:
                shown = (seed, result["k_chosen"], details)
            print(run_line(result), flush=True)
    print_report(args, runs, cpu)
    record = {
        **record_header(args, cpu, load_start, started),
        "models": summarise(runs, args.models),
        "runs": runs,
    }
    stem = result_stem(args)
    print(f"wrote {common.write_json(Path(args.out) / f'{stem}.json', record)}")
    if shown is not None:
        seed, k, details = shown
        path = Path(args.figures) / f"{stem}_patches.png"
        title = (
            f"DCN (seed {seed}, k = {k}) on {args.size}x{args.size} test canvases: chosen patches (red, by saliency "
            "rank) and the glyph's box (green)"
        )
        plot_patches(path, data["test"], details, args.patch_size, data["test"].characters, title)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
