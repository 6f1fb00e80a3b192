"""The command line of the study: `python -m benchmarks.vision.stn` (see `__init__`)."""

import sys

import numpy as np

from benchmarks.harness import cluttered, flags, results, timing, vision_training
from benchmarks.vision.stn import figures, report, train
from keras_transformer.vision.st_cnn import TRANSFORMS

# ---------------------------------------------------------------- flags


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--models",
        type=flags.parse_list(str, TRANSFORMS),
        default=",".join(TRANSFORMS),
        help="Comma-separated models: learned (the ST-CNN), identity (its transform frozen), none (the CNN alone).",
    )
    cluttered.add_task_flags(
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
        "--filters",
        type=flags.parse_list(int, unique=False),
        default="32,32",
        help="Comma-separated channels of the CNN.",
    )
    parser.add_argument("--units", type=int, default=256, help="Width of the CNN's dense hidden layer.")
    parser.add_argument(
        "--localization-rate",
        type=float,
        default=0.1,
        help="How fast the transform moves relative to the rest (SpatialTransformer's localization_rate), in (0, 1].",
    )
    vision_training.add_curve_flag(parser, default=1000, help="Steps between the points of the validation curves.")
    flags.add_output_flags(parser, __package__, "vision_stn")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    cluttered.check_task_flags(parser, args)
    flags.check_at_least(parser, args, ("glimpse", "units", "curve_every"), 1)
    if min(args.filters) < 1:
        parser.error(f"--filters must be positive. Received: {args.filters}")
    if not 0 < args.localization_rate <= 1:
        parser.error(f"--localization-rate must be in (0, 1]. Received: {args.localization_rate}")
    if args.curve_every > args.steps:
        parser.error(f"--curve-every must be at most --steps ({args.steps}). Received: {args.curve_every}")
    flags.check_tensorflow(parser)
    return args


# ---------------------------------------------------------------- the run


def main(argv=None):
    """Run the comparison; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = cluttered.generate_task(args)
    num_classes = data["train"].num_classes
    runs, shown = [], None
    for seed, name in timing.run_orders(args.models, args.seeds):
        result, glimpses = train.train_one(args, name, seed, data, num_classes)
        runs.append(result)
        if name == "learned" and seed == args.seeds[0]:
            shown = glimpses
        print(report.run_line(result), flush=True)
    summary = report.summarise(runs, args.models)
    report.print_report(args, summary, start.cpu)
    order = [list(o) for o in timing.run_orders(args.models, args.seeds)]
    header = results.record_header(__package__, args, start, dtype="float32", order=order)
    record = {**header, "models": summary, "runs": runs}
    print(f"wrote {results.write_json(flags.output_path(args), record)}")
    setting = f"{args.size}x{args.size} canvases, {args.glimpse}x{args.glimpse} glimpse"
    if shown is not None:
        path = flags.output_path(args, ".png")
        figures.plot_glimpses(path, shown, data["validation"], f"ST-CNN, seed {args.seeds[0]}: {setting}")
        print(f"wrote {path}")
    if "learned" in args.models:
        identity_error = float(np.linalg.norm(data["validation"].centres - (args.size - 1) / 2.0, axis=1).mean())
        path = flags.output_path(args, "_curves.png")
        figures.plot_curves(path, runs, identity_error, f"Validation curves: {setting}, Adam {args.learning_rate:g}")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
