"""The command line of the study: `python -m benchmarks.vision.attention` (see `__init__`)."""

import sys

from benchmarks.harness import cluttered, flags, results, timing, vision_training
from benchmarks.vision.attention import figures, report, train
from keras_transformer.vision import models as vision_models

# The CNN and its attentions; the ViT, which has no CNN, only when asked for (`--attentions none,vit`).
DEFAULT_ATTENTIONS = ",".join(attention for attention in vision_models.ATTENTIONS if attention != "vit")


# ---------------------------------------------------------------- flags


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--attentions",
        type=flags.parse_list(str, vision_models.ATTENTIONS),
        default=DEFAULT_ATTENTIONS,
        help="Comma-separated models: none (the baseline), se, sk, cbam, residual, stn (the default: all six), and "
        "vit (a small Vision Transformer, no CNN; its map is the class token's attention rollout).",
    )
    cluttered.add_task_flags(parser, validation_help="Validation canvases of the curves (--curve-every only).")
    parser.add_argument("--glyphs", default="digits", choices=["digits", "fine"], help="Glyph set of the task.")
    parser.add_argument(
        "--filters",
        type=flags.parse_list(int, unique=False),
        default="16,32,32",
        help="Comma-separated channels of the CNN's blocks.",
    )
    parser.add_argument(
        "--block",
        default="residual",
        choices=vision_models.BLOCKS,
        help="The CNN's blocks: residual, relu(shortcut(x) + attention(branch(x))), or plain, attention(branch(x)).",
    )
    parser.add_argument(
        "--batch-norm",
        type=flags.boolean,
        default=False,
        metavar="BATCH_NORM",
        help="true: batch normalization in the CNN's blocks and inside SK, CBAM's spatial attention and residual "
        "attention, where their papers put it; false: none (the committed runs before it).",
    )
    parser.add_argument("--glimpse", type=int, default=20, help="Side of the STN's glimpse in pixels.")
    vision_training.add_curve_flag(parser)
    flags.add_output_flags(parser, __package__, "vision_attention")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`), with `argv` itself as `args.argv` (for the JSON)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    cluttered.check_task_flags(parser, args)
    flags.check_at_least(parser, args, ("glimpse",), 1)
    flags.check_tensorflow(parser)
    return args


def result_extra(args):
    """What the flags add to `--name` in the run's file names: `_fine`, `_plain`, `_curves` for the flags that ask."""
    extra = "_fine" if args.glyphs == "fine" else ""
    return extra + ("_plain" if args.block == "plain" else "") + ("_curves" if args.curve_every else "")


def result_stem(args):
    """The name of the run's files: `--name` (`vision_attention`), then `result_extra`."""
    return args.name + result_extra(args)


# ---------------------------------------------------------------- the run


def train_all(args, data, num_classes):
    """Every run, seed by seed in the order of `timing.run_orders`, each printed as it finishes.

    Returns:
        `(runs, shown)`: the results of every run, and the test maps of each model's run with the
        first seed (for the figure of maps).
    """
    runs, shown = [], {}
    for seed, attention in timing.run_orders(args.attentions, args.seeds):
        result, examples = train.train_one(args, attention, seed, data, num_classes)
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


def results_json(args, models, runs, start):
    """The results JSON (the load average at the end and the wall seconds since `start` are read now)."""
    order = [list(o) for o in timing.run_orders(args.attentions, args.seeds)]
    header = results.record_header(__package__, args, start, dtype="float32", order=order)
    return {**header, "models": models, "runs": runs}


def write_figures(args, models, test, shown, cpu):
    """The PNGs in `--out`: the summary and the maps, and with `--curve-every` the learning curves."""
    extra = result_extra(args)
    summary, maps = flags.output_path(args, ".png", extra), flags.output_path(args, "_maps.png", extra)
    figures.plot_summary(summary, args, models, cpu)
    figures.plot_maps(maps, test, shown)
    print(f"wrote {summary} and {maps}")
    if args.curve_every:
        validation = flags.output_path(args, "_validation.png", extra)
        figures.plot_curves(validation, args, models)
        print(f"wrote {validation}")


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = cluttered.generate_task(args)  # the validation canvases with --curve-every only
    runs, shown = train_all(args, data, data["train"].num_classes)
    models = report.summarise(runs, args.attentions)
    report.print_report(args, models, start.cpu)
    path = flags.output_path(args, extra=result_extra(args))
    print(f"wrote {results.write_json(path, results_json(args, models, runs, start))}")
    write_figures(args, models, data["test"], shown, start.cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
