"""The command line of the study: `python -m benchmarks.vision.dcn` (see `__init__`)."""

import sys

from benchmarks.harness import cluttered, flags, results
from benchmarks.vision.dcn import figures, report, train
from keras_transformer.vision.dynamic_capacity import DOWNSAMPLINGS, MODES, NETWORKS, TOP_POOLINGS, grid_size


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--models",
        type=flags.parse_list(str, MODES),
        default="coarse,fine,dcn",
        help="Comma-separated models: coarse (coarse network only), fine (fine network on every patch), dcn.",
    )
    cluttered.add_task_flags(
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
        "--coarse-downsample",
        choices=DOWNSAMPLINGS,
        default="stride",
        help="stride (the paper's): the coarse network's first log2(--coarse-factor) convolutions read the "
        "full-resolution canvas with stride 2; pool (the first runs): average pooling by --coarse-factor first.",
    )
    parser.add_argument(
        "--coarse-filters",
        type=flags.parse_list(int, unique=False),
        default="16,32",
        help="Comma-separated channels of the coarse network's 3x3 convolutions (with --coarse-downsample stride, "
        "at least log2(--coarse-factor) of them).",
    )
    parser.add_argument(
        "--fine-filters",
        type=flags.parse_list(int, unique=False),
        default="32,32,64",
        help="Comma-separated channels of the fine network's 3x3 convolutions (a 2x2 max pool after each but "
        "the first).",
    )
    parser.add_argument("--features", type=int, default=32, help="Feature width D of both networks per position.")
    parser.add_argument("--top-units", type=int, default=32, help="Channels of the top network's 3x3 convolution.")
    parser.add_argument(
        "--top-pooling",
        choices=TOP_POOLINGS,
        default="max",
        help="The top network's global pooling over positions: max (the paper's) or average (the first runs).",
    )
    parser.add_argument(
        "--batch-norm",
        type=parse_networks,
        default="coarse",
        help="Comma-separated networks (coarse, fine) whose 3x3 convolutions get batch normalization before "
        "their relu, or none (the first runs); the paper normalizes both.",
    )
    parser.add_argument("--k", type=int, default=8, help="Fine patches per canvas while the DCN trains.")
    parser.add_argument(
        "--k-choices",
        type=flags.parse_list(int),
        default=None,
        help="Comma-separated numbers of fine patches to evaluate the trained DCN with, the one used chosen on the "
        "validation canvases; default: --k alone (the same k in training and test, as in the paper).",
    )
    parser.add_argument(
        "--k-tolerance",
        type=float,
        default=0.5,
        help="The chosen k: the smallest of --k-choices within this many points of the best validation accuracy.",
    )
    parser.add_argument(
        "--hint-weight",
        type=flags.parse_list(float),
        default="0,0.1,1",
        help="Comma-separated weights of the DCN's hint term: one DCN per weight and seed, the one with the best "
        "validation accuracy reported as the DCN (every one is in the JSON).",
    )
    parser.add_argument(
        "--coarse-weight", type=float, default=1.0, help="Weight of the DCN's coarse prediction's cross-entropy."
    )
    parser.add_argument("--figure-canvases", type=int, default=8, help="Test canvases in the figure.")
    flags.add_output_flags(parser, __package__, "vision_dcn")
    return parser


def parse_networks(text):
    """`--batch-norm`'s type: `"none"` -> [], otherwise comma-separated names of `NETWORKS`."""
    return [] if text.strip() == "none" else flags.parse_list(str, NETWORKS)(text)


def parse_args(argv=None):
    """The flags, checked, with the size's defaults filled in (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("size",), 16)  # before the defaults that depend on it
    papers = args.size >= 60
    if args.object_scale is None:
        args.object_scale = [0.25, 0.35] if papers else [0.3, 0.45]
    if args.clutter is None:
        args.clutter = 10 if papers else 6
    if args.patch_size is None:
        args.patch_size = 12 if papers else 8
    cluttered.check_task_flags(parser, args)
    flags.check_at_least(
        parser, args, ("patch_size", "coarse_factor", "features", "top_units", "k", "figure_canvases"), 1
    )
    flags.check_at_least(parser, args, ("coarse_weight", "k_tolerance"), 0)
    for weight in args.hint_weight:
        if weight < 0:
            parser.error(f"--hint-weight must be >= 0. Received: {weight}")
    if args.k_choices is None:
        args.k_choices = [args.k]
    if args.patch_size % args.coarse_factor:
        parser.error(
            f"--patch-size must be a multiple of --coarse-factor ({args.coarse_factor}). Received: {args.patch_size}"
        )
    if args.coarse_downsample == "stride":
        halvings = args.coarse_factor.bit_length() - 1
        if args.coarse_factor != 1 << halvings:
            parser.error(
                f"--coarse-factor must be a power of 2 with --coarse-downsample stride. Received: {args.coarse_factor}"
            )
        if len(args.coarse_filters) < halvings:
            parser.error(
                f"--coarse-downsample stride needs at least log2(--coarse-factor) = {halvings} --coarse-filters. "
                f"Received: {args.coarse_filters}"
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
    flags.check_tensorflow(parser)
    return args


def result_extra(args):
    """What the flags add to `--name` in the run's file names: `_<size>` for a `--size` other than 40 (`_60`)."""
    return "" if args.size == 40 else f"_{args.size}"


def result_stem(args):
    """The name of the run's files: `--name` (`vision_dcn`), then `result_extra` (`vision_dcn_60` at `--size 60`)."""
    return args.name + result_extra(args)


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = cluttered.generate_task(args)
    num_classes = data["train"].num_classes
    runs, shown = [], None
    for seed in args.seeds:
        for mode in args.models:
            trained = []
            for hint_weight in args.hint_weight if mode == "dcn" else [None]:
                result, details = train.train_one(args, mode, seed, data, num_classes, hint_weight)
                runs.append(result)
                trained.append((result, details))
                print(report.run_line(result), flush=True)
            if mode == "dcn":
                result, details = train.choose_hint_weight(trained)
                print(f"seed {seed} DCN: hint weight {result['hint_weight']:g} chosen on validation", flush=True)
                if shown is None:
                    shown = (seed, result["k_chosen"], details)
    report.print_report(args, runs, start.cpu)
    record = {
        **results.record_header(__package__, args, start, dtype="float32"),
        "models": report.summarise(runs, args.models),
        "runs": runs,
    }
    extra = result_extra(args)
    print(f"wrote {results.write_json(flags.output_path(args, extra=extra), record)}")
    if shown is not None:
        seed, k, details = shown
        path = flags.output_path(args, "_patches.png", extra)
        title = (
            f"DCN (seed {seed}, k = {k}) on {args.size}x{args.size} test canvases: chosen patches (red, by saliency "
            "rank) and the glyph's box (green)"
        )
        figures.plot_patches(path, data["test"], details, args.patch_size, data["test"].characters, title)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
