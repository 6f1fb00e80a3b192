"""Attention in vision: a small CNN against the same CNN with each kind of attention, on cluttered glyphs.

    python benchmarks/vision_attention.py                  # 6 models x 2 seeds, 40x40 canvases, 800 steps each
    python benchmarks/vision_attention.py --steps 5 --train-size 256 --test-size 64 --seeds 0 \
        --attentions none,stn    # a quick check
    python benchmarks/vision_attention.py --attentions none,se,cbam --steps 1600 --curve-every 200
                                                           # learning curves on the validation split
    python benchmarks/vision_attention.py --help           # every flag

The task (`keras_transformer.vision.cluttered`): a digit of a 5x7 font drawn at a random position,
height (30-45% of the canvas by default) and rotation (+-30 degrees) on a `--size` canvas with
`--clutter` fragments of other glyphs kept off its box; 10 classes. One task for every run
(`--task-seed`): the same training, and the same test canvases (`--test-size`), for every model
and seed.

Each run: `model.fit` on the training canvases, `--steps` steps of `--batch-size` (shuffled with
the seed, reshuffled every pass), Adam with `--learning-rate`, float32, no augmentation; the
seed also sets the initial weights. Same data, budget and optimizer for every model. The runs go
seed by seed, one at a time in one process (`keras.backend.clear_session()` before each), the
order of the models rotated by one place from one seed to the next.

Output: one line per run as it finishes; a table per model (both seeds and their mean, the ratio
to the baseline for accuracy and ms/step) and the STN's figures on stdout; the JSON
(`vision_attention.json`: settings, the command, versions, CPU model and flags, load average at
the start and the end, every run) in `--out`; two PNGs in `--figures`: `vision_attention.png`
(accuracy and pointing scores per model) and `vision_attention_maps.png` (test canvases with
each model's map, and the STN's glimpses); with `--curve-every`, a table of the curves on stdout
and a third PNG, `*_validation.png`. With `--glyphs fine` the files are named
`vision_attention_fine*`, with `--block plain` `vision_attention*_plain*`, with `--curve-every`
`vision_attention*_curves*`, so that such runs keep the default run's record.

The modules: this one holds the command line and the whole run (`main`);
vision_attention_train.py builds, trains and measures one model; vision_attention_report.py
summarises the runs per model and prints the tables; vision_attention_figures.py draws the PNGs.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
from vision_attention_figures import plot_curves, plot_maps, plot_summary
from vision_attention_report import print_report, summarise
from vision_attention_train import train_one

from keras_transformer.vision import models as vision_models
from keras_transformer.vision.cluttered import generate_splits

DEFAULT_SEEDS = "0,1"
DEFAULT_ATTENTIONS = ",".join(vision_models.ATTENTIONS)


# ---------------------------------------------------------------- flags


def parse_list(kind, choices=None, unique=True):
    """An argparse type: comma-separated values of `kind`, in the order given, duplicates dropped if `unique`."""

    def parse(text):
        try:
            values = [kind(part.strip()) for part in text.split(",") if part.strip()]
            values = list(dict.fromkeys(values)) if unique else values
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s; got {text!r}")
        if not values or (choices and any(v not in choices for v in values)):
            raise argparse.ArgumentTypeError(f"expected comma-separated names of {', '.join(choices)}; got {text!r}")
        return values

    return parse


def add_task_flags(parser, size=40, size_help="Canvas side in pixels.", clutter=6, clutter_help=None,
                   object_scale=False, object_scale_help=None, fragment_size=False, train_size=6000, test_size=1000,
                   validation_size=1000, validation_help="Validation canvases.", steps=800, batch_size=64,
                   learning_rate=3e-3):  # fmt: skip
    """Add the flags every vision benchmark shares: the seeds, the generated task and the training budget.

    `--seeds`, `--task-seed`, `--size`, `--object-scale` (unless `object_scale` is False; its
    default otherwise, a `"low,high"` string or None), `--clutter`, `--fragment-size` (unless
    `fragment_size` is False; its default otherwise, an int or None), `--train-size`,
    `--validation-size`, `--test-size`, `--steps`, `--batch-size`, `--learning-rate`, with the
    given defaults and helps.
    """
    parser.add_argument(
        "--seeds", type=parse_list(int), default=DEFAULT_SEEDS, help="Comma-separated seeds (weights and batches)."
    )
    parser.add_argument("--task-seed", type=int, default=0, help="Seed of the generated task (the same for all runs).")
    parser.add_argument("--size", type=int, default=size, help=size_help)
    if object_scale is not False:
        parser.add_argument(
            "--object-scale",
            type=parse_list(float, unique=False),
            default=object_scale,
            help=object_scale_help or "Glyph height range as fractions of the canvas, 'low,high' (drawn uniformly).",
        )
    clutter_help = clutter_help or "Fragments of other glyphs per canvas."
    parser.add_argument("--clutter", type=int, default=clutter, help=clutter_help)
    if fragment_size is not False:
        parser.add_argument(
            "--fragment-size",
            type=int,
            default=fragment_size,
            help="Side of a clutter fragment in pixels (default: a quarter of --size).",
        )
    parser.add_argument("--train-size", type=int, default=train_size, help="Training canvases.")
    parser.add_argument("--validation-size", type=int, default=validation_size, help=validation_help)
    parser.add_argument("--test-size", type=int, default=test_size, help="Test canvases.")
    parser.add_argument("--steps", type=int, default=steps, help="Training steps of every run.")
    parser.add_argument("--batch-size", type=int, default=batch_size, help="Canvases per step.")
    parser.add_argument("--learning-rate", type=float, default=learning_rate, help="Adam's learning rate.")


def add_output_flags(parser):
    """Add `--out` (the JSON's folder) and `--figures` (the PNGs' folder)."""
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results.")
    parser.add_argument("--figures", default="benchmarks/figures", help="Folder of the PNG figures.")


def add_name_flag(parser, default):
    """Add `--name`, the stem of a run's JSON and PNG file names (checked by `check_name`)."""
    parser.add_argument(
        "--name", default=default, help="Stem of the JSON and PNG file names (letters, digits, _ and -)."
    )


def check_name(parser, args):
    """`parser.error` unless `--name` is letters, digits, _ and - (a file name in `--out`, never a path)."""
    if not args.name or not all(c.isalnum() or c in "_-" for c in args.name):
        parser.error(f"--name must be letters, digits, _ and -. Received: {args.name!r}")


def parsed(parser, argv):
    """`parser`'s flags of `argv` (`sys.argv[1:]` when None), with the list itself as `args.argv` (for the JSON)."""
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def check_task_flags(parser, args):
    """`parser.error` unless the flags of `add_task_flags` are in range (defaults that depend on `--size` filled in)."""
    common.check_at_least(parser, args, ("steps", "batch_size", "train_size", "validation_size", "test_size"), 1)
    common.check_at_least(parser, args, ("size",), 16)
    common.check_at_least(parser, args, ("clutter",), 0)
    if getattr(args, "fragment_size", None) is not None and not 1 <= args.fragment_size <= args.size:
        parser.error(f"--fragment-size must be in [1, --size]. Received: {args.fragment_size}")
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be > 0. Received: {args.learning_rate}")
    scale = getattr(args, "object_scale", None)
    if scale is not None and (len(scale) != 2 or not 0.1 <= scale[0] <= scale[1] <= 0.9):
        parser.error(f"--object-scale must be 'low,high' with 0.1 <= low <= high <= 0.9. Received: {scale}")


def generate_task(args, sizes=None):
    """The canvases of the flags of `add_task_flags`: `{split: ClutteredGlyphs}` of `sizes` (default: all three)."""
    sizes = sizes or {"train": args.train_size, "validation": args.validation_size, "test": args.test_size}
    options = {"glyphs": args.glyphs} if hasattr(args, "glyphs") else {"object_scale": tuple(args.object_scale)}
    if getattr(args, "fragment_size", None) is not None:
        options["fragment_size"] = args.fragment_size
    return generate_splits(sizes, seed=args.task_seed, size=args.size, clutter=args.clutter, **options)


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--attentions",
        type=parse_list(str, vision_models.ATTENTIONS),
        default=DEFAULT_ATTENTIONS,
        help="Comma-separated models: none (the baseline), se, sk, cbam, residual, stn.",
    )
    add_task_flags(parser, validation_help="Validation canvases of the curves (--curve-every only).")
    parser.add_argument("--glyphs", default="digits", choices=["digits", "fine"], help="Glyph set of the task.")
    parser.add_argument(
        "--filters",
        type=parse_list(int, unique=False),
        default="16,32,32",
        help="Comma-separated channels of the CNN's blocks.",
    )
    parser.add_argument(
        "--block",
        default="residual",
        choices=vision_models.BLOCKS,
        help="The CNN's blocks: residual, relu(shortcut(x) + attention(branch(x))), or plain, attention(branch(x)).",
    )
    parser.add_argument("--glimpse", type=int, default=20, help="Side of the STN's glimpse in pixels.")
    parser.add_argument(
        "--curve-every",
        type=int,
        default=0,
        help="Every this many steps, each run's accuracy on the validation canvases and its mean training loss "
        "since the last point (a learning curve); 0: no curves and no validation canvases.",
    )
    add_output_flags(parser)
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parsed(parser, argv)
    check_task_flags(parser, args)
    common.check_at_least(parser, args, ("glimpse",), 1)
    common.check_at_least(parser, args, ("curve_every",), 0)
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


def result_stem(args):
    """The name of the run's files: `vision_attention`, then `_fine`, `_plain`, `_curves` for the flags that ask."""
    stem = "vision_attention" + ("_fine" if args.glyphs == "fine" else "")
    return stem + ("_plain" if args.block == "plain" else "") + ("_curves" if args.curve_every else "")


def run_orders(attentions, seeds):
    """The order of the runs: seed by seed, the models rotated by one place from each seed to the next."""
    return [
        (seed, attentions[(i + k) % len(attentions)]) for i, seed in enumerate(seeds) for k in range(len(attentions))
    ]


# ---------------------------------------------------------------- the run


def train_all(args, data, num_classes):
    """Every run, seed by seed in the order of `run_orders`, each printed as it finishes.

    Returns:
        `(runs, shown)`: the results of every run, and the test maps of each model's run with the
        first seed (for the figure of maps).
    """
    runs, shown = [], {}
    for seed, attention in run_orders(args.attentions, args.seeds):
        result, examples = train_one(args, attention, seed, data, num_classes)
        runs.append(result)
        if seed == args.seeds[0]:
            shown[attention] = examples
        print(
            f"seed {seed} {attention:<9} accuracy {result['test_accuracy_percent']:5.1f}%  "
            f"{result['ms_per_step_median']:6.1f} ms/step  mass in box {result['pointing']['mass_in_box']:.3f} "
            f"(uniform {result['pointing']['uniform_share']:.3f})  {result['train_seconds']:.0f} s",
            flush=True,
        )
    return runs, shown


def record_header(args, cpu, load_start, started, **settings):
    """The head of every vision benchmark's results JSON; the run's own entries follow it.

    `settings`: the flags (but `argv`), float32 and the extra `settings`; then the command, the
    versions, the machine (`common.machine(cpu)`), the load average at `load_start` and now, the
    wall seconds since `started` and the peak memory.
    """
    flags = {key: value for key, value in vars(args).items() if key != "argv"}
    return {
        "settings": {**flags, "dtype": "float32", **settings},
        "command": common.command_line(args.argv),
        "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        **common.machine(cpu),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": time.perf_counter() - started,
        "peak_rss_mib": common.peak_rss_mib(),
    }


def results_json(args, models, runs, cpu, load_start, started):
    """The results JSON (the load average at the end and the wall seconds since `started` are read now)."""
    order = [list(o) for o in run_orders(args.attentions, args.seeds)]
    return {**record_header(args, cpu, load_start, started, order=order), "models": models, "runs": runs}


def write_figures(args, stem, models, test, shown, cpu):
    """The PNGs in `--figures`: the summary and the maps, and with `--curve-every` the learning curves."""
    figures = Path(args.figures)
    plot_summary(figures / f"{stem}.png", args, models, cpu)
    plot_maps(figures / f"{stem}_maps.png", test, shown)
    print(f"wrote {figures / f'{stem}.png'} and {figures / f'{stem}_maps.png'}")
    if args.curve_every:
        plot_curves(figures / f"{stem}_validation.png", args, models)
        print(f"wrote {figures / f'{stem}_validation.png'}")


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    sizes = {"train": args.train_size, "test": args.test_size}
    if args.curve_every:
        sizes["validation"] = args.validation_size  # its own random stream: train and test stay the same
    data = generate_task(args, sizes)
    num_classes = data["train"].num_classes
    print(
        f"generated {args.train_size} + {args.test_size} canvases in {time.perf_counter() - started:.1f} s", flush=True
    )
    runs, shown = train_all(args, data, num_classes)
    models = summarise(runs, args.attentions)
    print_report(args, models, cpu)
    data_json = results_json(args, models, runs, cpu, load_start, started)
    stem = result_stem(args)
    print(f"wrote {common.write_json(Path(args.out) / f'{stem}.json', data_json)}")
    write_figures(args, stem, models, data["test"], shown, cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
