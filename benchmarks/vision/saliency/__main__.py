"""The command line of the study: `python -m benchmarks.vision.saliency` (see `__init__`)."""

import sys

from benchmarks.harness import cluttered, flags, results
from benchmarks.vision.saliency import figures, report, train
from keras_transformer.vision.saliency import SALIENCY_ATTENTIONS, SALIENCY_BLOCKS

PAPERS_SIZE = 60  # from this canvas side on, the defaults are the papers' smaller glyphs and more clutter


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--models",
        type=flags.parse_list(str, SALIENCY_ATTENTIONS),
        default=",".join(SALIENCY_ATTENTIONS),
        help="Comma-separated saliency models: none (no attention), cbam, residual.",
    )
    cluttered.add_task_flags(
        parser,
        size_help=f"Canvas side in pixels ({PAPERS_SIZE}: the papers').",
        clutter=None,
        clutter_help=f"Fragments of other glyphs per canvas; default 6, or 10 from --size {PAPERS_SIZE} on.",
        object_scale=None,
        object_scale_help=f"low,high: the glyph's height as a fraction of the side; default 0.3,0.45, or 0.25,0.35 "
        f"from --size {PAPERS_SIZE} on.",
        train_size=4000,
        validation_size=500,
        validation_help="Validation canvases (choose the steps).",
        steps=1000,
        batch_size=32,
        learning_rate=1e-3,
    )
    parser.add_argument(
        "--eval-every", type=int, default=100, help="Score the validation canvases every this many steps."
    )
    parser.add_argument(
        "--filters",
        type=flags.parse_list(int, unique=False),
        default="16,32,64",
        help="Three comma-separated channel counts, the encoder's stages from the finest.",
    )
    parser.add_argument(
        "--block",
        default="plain",
        choices=SALIENCY_BLOCKS,
        help="The decoder's blocks: plain, attention(conv(f)), or residual, relu(f + attention(conv(f))).",
    )
    parser.add_argument(
        "--classifier-steps",
        type=int,
        default=800,
        help="Training steps (of 64) of the CNN classifier whose gradient saliency is the reference; 0: none.",
    )
    flags.add_output_flags(parser, __package__, "vision_saliency")
    return parser


def parse_args(argv=None):
    """The flags, checked, and the defaults that depend on `--size` resolved (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("size",), 16)  # before the defaults that depend on it
    papers = args.size >= PAPERS_SIZE
    if args.clutter is None:
        args.clutter = 10 if papers else 6
    if args.object_scale is None:
        args.object_scale = [0.25, 0.35] if papers else [0.3, 0.45]
    cluttered.check_task_flags(parser, args)
    flags.check_at_least(parser, args, ("eval_every",), 1)
    flags.check_at_least(parser, args, ("classifier_steps",), 0)
    if args.eval_every > args.steps:
        parser.error(f"--eval-every must be <= --steps ({args.steps}). Received: {args.eval_every}")
    if len(args.filters) != 3 or min(args.filters) < 1:
        parser.error(f"--filters must be three positive ints. Received: {args.filters}")
    flags.check_tensorflow(parser)
    return args


def result_extra(args):
    """What the flags add to `--name` in the run's file names: `_<size>`, `_residual_blocks`, `_filters_<f1>_<f2>_<f3>`.

    `_<size>` for a side other than 40, `_residual_blocks` with `--block residual`, the filters for
    widths other than the default 16, 32, 64.
    """
    extra = "" if args.size == 40 else f"_{args.size}"
    extra += "_residual_blocks" if args.block == "residual" else ""
    return extra + ("" if args.filters == [16, 32, 64] else "_filters_" + "_".join(map(str, args.filters)))


def result_stem(args):
    """The name of the run's files: `--name` (`vision_saliency`), then `result_extra`."""
    return args.name + result_extra(args)


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    data = cluttered.generate_task(args)
    test = data["test"]
    runs, shown = [], {}
    for seed in args.seeds:
        for name in args.models:
            result, maps = train.train_saliency(args, name, seed, data)
            runs.append(result)
            shown.setdefault(name, maps[:6])
            print(
                f"seed {seed} {name:<9} MAE {result['test']['mae']:.4f}  max F {result['test']['max_f']:.4f}  "
                f"pointing {result['test']['pointing_hit_rate']:.3f}  step {result['chosen_step']}  "
                f"{result['ms_per_step_median']:.0f} ms/step  {result['train_seconds']:.0f} s",
                flush=True,
            )
        if args.classifier_steps:
            result, maps = train.train_gradient_reference(args, seed, data)
            runs.append(result)
            shown.setdefault("gradient", maps[:6])
            print(
                f"seed {seed} gradient  MAE {result['test']['mae']:.4f}  max F {result['test']['max_f']:.4f}  "
                f"pointing {result['test']['pointing_hit_rate']:.3f}  classifier accuracy "
                f"{result['classifier_test_accuracy_percent']:.1f}%  {result['train_seconds']:.0f} s",
                flush=True,
            )
    references, reference_images = train.reference_maps(data)
    runs.extend(references.values())
    summary = report.summarise(runs)
    tolerance, chance = runs[0]["test"]["pointing_tolerance_px"], runs[0]["test"]["chance_hit_rate"]
    report.print_report(args, summary, start.cpu, test, tolerance, chance)
    extra = result_extra(args)
    record = {
        **results.record_header(
            __package__, args, start, dtype="float32", loss="binary cross-entropy", optimizer="Adam"
        ),
        "test_mask_share": float(test.masks.mean()),
        "pointing_tolerance_px": tolerance,
        "pointing_chance_hit_rate": chance,
        "summary": summary,
        "runs": runs,
    }
    print(f"wrote {results.write_json(flags.output_path(args, extra=extra), record)}")
    maps, scores = flags.output_path(args, "_maps.png", extra), flags.output_path(args, ".png", extra)
    figures.plot_maps(maps, args, test, shown, reference_images)
    figures.plot_scores(scores, args, summary, start.cpu, chance)
    print(f"wrote {maps} and {scores}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
