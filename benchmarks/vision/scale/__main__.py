"""The command line of the study: `python -m benchmarks.vision.scale` (see `__init__`)."""

import sys

import numpy as np

from benchmarks.harness import cluttered, flags, results, timing, vision_training
from benchmarks.vision.scale import figures, report, train
from benchmarks.vision.scale.train import MODELS, TARGETS, TERCILES

# ---------------------------------------------------------------- flags


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--models",
        type=flags.parse_list(str, MODELS),
        default=",".join(MODELS),
        help="Comma-separated models: one (the trunk at one scale, the control), average, max, attention "
        "(fusions over --factors).",
    )
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="pixel",
        help="pixel (the paper's): a class at every position of the trunk's grid, from the glyph's mask, the canvas's "
        "class read from the fused map; canvas (the first runs): one label per canvas, the fused features pooled.",
    )
    parser.add_argument(
        "--factors",
        type=flags.parse_list(float),
        default=None,
        help="Comma-separated downsampling factors of the scales of the fusion models, 1 first, at least two; "
        "default 1,1.5,2 with --target pixel, 1,2,4 with canvas (whose factors must be ints).",
    )
    cluttered.add_task_flags(
        parser,
        object_scale="0.15,0.45",
        validation_help="Validation canvases of the curves (--curve-every only).",
    )
    parser.add_argument(
        "--filters",
        type=flags.parse_list(int, unique=False),
        default="16,32,32",
        help="Comma-separated channels of the trunk's residual blocks (a 2x2 max pool after each but the last).",
    )
    parser.add_argument(
        "--extra-supervision",
        type=float,
        default=None,
        help="Weight of the paper's extra supervision for the fusion models: the cross-entropy of each scale's own "
        "prediction (its score map with --target pixel; with canvas the shared pooling and dense layer on that "
        "scale's features), summed over the scales, added to the fused prediction's; 0: the fused prediction's "
        "cross-entropy alone. Default 1 with --target pixel (the paper's), 0 with canvas.",
    )
    vision_training.add_curve_flag(parser)
    parser.add_argument(
        "--head-norm",
        type=flags.boolean,
        default=True,
        metavar="HEAD_NORM",
        help="With --target pixel, true: layer normalization of the attention head's input at every position "
        "(against the softmax's collapse onto one scale); false: the paper's head as it is.",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=10.0,
        help="With --target pixel, the temperature of the attention head's softmax over the scales (1: the paper's "
        "softmax as it is; above 1 the weights sharpen more slowly).",
    )
    parser.add_argument(
        "--head-warmup",
        type=int,
        default=0,
        help="Steps at the start of the attention model's training with its fusion layer frozen at its initial, "
        "near-uniform weights (then trained with the rest, for --steps in all); 0: trained from the start.",
    )
    flags.add_output_flags(parser, __package__, "vision_scale")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    cluttered.check_task_flags(parser, args)
    if not 0 <= args.head_warmup < args.steps:
        parser.error(f"--head-warmup must be >= 0 and < --steps ({args.steps}). Received: {args.head_warmup}")
    if args.head_warmup and (args.warmup_steps or args.decay != "none"):
        # The head's warm-up recompiles the model with a new optimizer, which would restart a schedule.
        parser.error("--head-warmup takes a constant rate: no --warmup-steps and no --decay cosine with it.")
    pixel = args.target == "pixel"
    if args.factors is None:
        args.factors = [1, 1.5, 2] if pixel else [1, 2, 4]
    args.factors = [int(f) if float(f).is_integer() else f for f in args.factors]  # 2, not 2.0, in names and JSON
    if args.extra_supervision is None:
        args.extra_supervision = 1.0 if pixel else 0.0
    flags.check_at_least(parser, args, ("extra_supervision",), 0)
    if len(args.factors) < 2 or args.factors[0] != 1 or min(args.factors) < 1 or len(set(args.factors)) < 2:
        parser.error(f"--factors must be two or more distinct numbers >= 1, 1 first. Received: {args.factors}")
    if not pixel and not all(isinstance(f, int) for f in args.factors):
        parser.error(f"--factors must be ints with --target canvas (average pooling). Received: {args.factors}")
    if max(args.factors) > args.size // 4:
        parser.error(f"--factors must be at most --size / 4 ({args.size // 4}). Received: {args.factors}")
    if not args.temperature > 0:
        parser.error(f"--temperature must be > 0. Received: {args.temperature}")
    if pixel and (args.head_warmup or args.curve_every):
        parser.error("--head-warmup and --curve-every are for --target canvas.")
    if min(args.filters) < 1:
        parser.error(f"--filters must be positive. Received: {args.filters}")
    flags.check_tensorflow(parser)
    return args


# ---------------------------------------------------------------- the run


def results_json(args, models, runs, edges, start):
    """The results JSON (the load average at the end and the wall seconds since `start` are read now)."""
    order = [list(o) for o in timing.run_orders(args.models, args.seeds)]
    return {
        **results.record_header(__package__, args, start, dtype="float32", order=order),
        "tercile_edges_px": [float(e) for e in edges],
        "terciles": list(TERCILES),
        "models": models,
        "runs": runs,
    }


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = cluttered.generate_task(args)  # the validation canvases with --curve-every only
    num_classes = data["train"].num_classes
    edges = np.quantile(data["test"].heights, [1 / 3, 2 / 3])
    runs, shown = [], None
    for seed, name in timing.run_orders(args.models, args.seeds):
        result, weights = train.train_one(args, name, seed, data, num_classes, edges)
        runs.append(result)
        if name == "attention" and seed == args.seeds[0]:
            shown = (result, weights)
        print(report.run_line(result), flush=True)
    models = report.summarise(runs, args.models)
    report.print_report(args, models, runs, edges, start.cpu)
    path = results.write_json(flags.output_path(args), results_json(args, models, runs, edges, start))
    print(f"wrote {path}")
    if shown is not None:
        figure = flags.output_path(args, ".png")
        title = (
            f"Attention to scale, seed {args.seeds[0]}: {args.size}x{args.size} canvases, factors "
            f"{','.join(map(str, args.factors))}, {args.steps} steps; "
            f"test accuracy {shown[0]['test_accuracy_percent']:.1f}%"
        )
        figures.plot_scales(figure, data["test"], shown[1], edges, shown[0], args.factors, title)
        print(f"wrote {figure}")
    else:
        print("no figure: --models has no attention")
    return 0


if __name__ == "__main__":
    sys.exit(main())
