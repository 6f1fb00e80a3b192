"""The command line of the study: `python -m benchmarks.vision.ram` (see `__init__`)."""

import sys
from pathlib import Path

from benchmarks.harness import cluttered, flags, machine, results
from benchmarks.vision.ram import figures, report, train
from keras_transformer.layers.reinforce import BASELINES, Reinforce
from keras_transformer.vision.cluttered import generate_splits
from keras_transformer.vision.recurrent import CORES, REWARDS


def build_parser():
    """The flags, each with its help and default."""
    parser = flags.study_parser(__package__)
    task = parser.add_argument_group("task")
    task.add_argument("--size", type=int, default=60, help="canvas side in pixels")
    task.add_argument(
        "--object-scale",
        type=flags.parse_list(float, unique=False),
        default=[0.25, 0.35],
        help="low,high: the glyph's height over the canvas side",
    )
    cluttered.add_rotation_flag(task)
    task.add_argument("--clutter", type=int, default=4, help="clutter fragments per canvas (the paper's 4)")
    task.add_argument("--fragment-size", type=int, default=8, help="side of a clutter fragment in pixels")
    task.add_argument("--train-size", type=int, default=20000, help="training canvases")
    task.add_argument(
        "--fresh-canvases",
        type=flags.boolean,
        default=True,
        metavar="FRESH_CANVASES",
        help="true: train on newly generated canvases, --train-size at a time, none seen twice (the same for every "
        "model and seed, in each seed's order; each generated once and kept for the next models when --steps x "
        "--batch-size x --size^2 x 4 bytes fit in half the free memory); false: on the fixed --train-size split",
    )
    task.add_argument("--validation-size", type=int, default=1000, help="validation canvases (--curve-every)")
    task.add_argument("--test-size", type=int, default=2000, help="test canvases")
    runs = parser.add_argument_group("runs")
    runs.add_argument(
        "--glimpses",
        type=flags.parse_list(int),
        default=[1, 2, 4, 6, 8],
        help="comma-separated glimpse counts T, one RAM per count",
    )
    flags.add_seed_flags(runs, default=[0, 1], several=True, help="Each trains every model.")
    runs.add_argument("--steps", type=int, default=6000, help="training steps of every model")
    runs.add_argument("--batch-size", type=int, default=64, help="canvases per step")
    runs.add_argument(
        "--adam-learning-rate",
        dest="learning_rate",
        metavar="ADAM_LEARNING_RATE",
        type=float,
        default=1e-3,
        help="Adam's learning rate (its peak, with --warmup-steps or --decay cosine)",
    )
    cluttered.add_schedule_flags(runs)
    runs.set_defaults(decay="cosine")  # every model's rate falls to 0 by the last step: its curve levels off
    runs.add_argument(
        "--jit-compile",
        type=flags.boolean,
        default=True,
        metavar="JIT_COMPILE",
        help="compile each RAM's training step with XLA (true or false; false: the study's first runs, "
        "about 3x slower per step on a 2-core Zen 4)",
    )
    runs.add_argument("--no-cnn", action="store_true", help="leave out the CNN baseline (3 residual blocks)")
    runs.add_argument(
        "--paper-cnn",
        type=flags.boolean,
        default=True,
        metavar="PAPER_CNN",
        help="also train the paper's baseline (one 10x10 convolution of stride 5, 8 filters, 256 hidden units; "
        "true or false)",
    )
    runs.add_argument(
        "--filters", type=flags.parse_list(int, unique=False), default=[16, 32, 32], help="the CNN's channels per block"
    )
    runs.add_argument("--curve-every", type=int, default=1000, help="validation accuracy every N steps (0: none)")
    ram = parser.add_argument_group("recurrent attention model")
    ram.add_argument("--patch-size", type=int, default=12, help="the sensor's patch side g")
    ram.add_argument("--scales", type=int, default=3, help="the sensor's patches per glimpse k")
    ram.add_argument("--core", choices=CORES, default="gru", help="the recurrent core")
    ram.add_argument("--location-std", type=float, default=0.1, help="the location policy's standard deviation")
    ram.add_argument("--reward", choices=REWARDS, default="log_likelihood", help="the policy's reward")
    ram.add_argument("--baseline", choices=BASELINES, default="leave_one_out", help="REINFORCE's baseline")
    ram.add_argument("--samples", type=int, default=4, help="episodes per canvas in training")
    ram.add_argument("--no-normalize", action="store_true", help="do not normalise the advantages")
    ram.add_argument(
        "--policy-stop-gradient", action="store_true", help="REINFORCE trains the location head alone, not the core"
    )
    flags.add_output_flags(parser.add_argument_group("output"), __package__, "vision_ram")
    return parser  # fmt: skip


def parse_args(argv=None):
    """The flags of `argv` (the command line's when None), checked: a bad value exits with a message naming it."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("steps", "batch_size", "patch_size", "scales", "samples"), 1)
    flags.check_at_least(parser, args, ("train_size", "test_size", "validation_size"), 1)
    flags.check_at_least(parser, args, ("clutter", "curve_every"), 0)
    flags.check_at_least(parser, args, ("size",), 16)
    for flag, name in (("--adam-learning-rate", "learning_rate"), ("--location-std", "location_std")):
        if not getattr(args, name) > 0:
            parser.error(f"{flag} must be > 0. Received: {getattr(args, name)}")
    if len(args.object_scale) != 2 or not 0.1 <= args.object_scale[0] <= args.object_scale[1] <= 0.9:
        parser.error(f"--object-scale must be low,high with 0.1 <= low <= high <= 0.9. Received: {args.object_scale}")
    if not 1 <= args.fragment_size <= args.size:
        parser.error(f"--fragment-size must be in [1, --size]. Received: {args.fragment_size}")
    cluttered.check_schedule_flags(parser, args)
    cluttered.check_rotation_flag(parser, args)
    if min(args.glimpses) < 1:
        parser.error(f"--glimpses must be >= 1. Received: {args.glimpses}")
    try:
        args.reinforce = Reinforce(args.baseline, args.samples, normalize=not args.no_normalize)
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv=None):
    """Run the comparison of the flags `argv`: print the report, write the JSON and the figure; the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = generate_splits(
        {"train": args.train_size, "validation": args.validation_size, "test": args.test_size},
        seed=0,
        **train.task_options(args),
    )
    num_classes = data["test"].num_classes
    chunks = train.canvas_chunks(args)
    baselines = [kind for kind, wanted in (("cnn", not args.no_cnn), ("paper_cnn", args.paper_cnn)) if wanted]
    runs, paths = [], None
    for seed in args.seeds:
        for kind in baselines:
            runs.append(train.train_cnn(args, seed, data, num_classes, chunks, kind))
            print(f"seed {seed} {kind}: {runs[-1]['test_accuracy_percent']:.1f}%", flush=True)
        for glimpses in args.glimpses:
            result, locations = train.train_ram(args, glimpses, seed, data, num_classes, chunks)
            runs.append(result)
            if seed == args.seeds[0] and glimpses == max(args.glimpses):
                paths = locations
            print(f"seed {seed} ram T={glimpses}: {result['test_accuracy_percent']:.1f}%", flush=True)
    summary = report.summarise(runs)
    report.print_report(args, summary, start.cpu)
    left_out = ("reinforce", "argv")  # the reinforce's config follows; the flags given are the command
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in left_out}
    settings["reinforce"] = args.reinforce.get_config()
    written = results.write_json(
        flags.output_path(args),
        {
            "benchmark": "vision_ram",
            "command": results.command_line(__package__, args.argv),
            "flags": {k: v for k, v in settings.items() if k != "out"},
            **machine.machine(start.cpu),
            "packages": machine.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
            "seconds": start.seconds(),
            "summary": summary,
            "runs": runs,
        },
    )
    print(f"wrote {written}")
    figure = flags.output_path(args, ".png")
    figures.plot(figure, args, runs, data["test"], paths)
    print(f"wrote {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
