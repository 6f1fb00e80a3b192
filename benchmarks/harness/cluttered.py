"""The cluttered-glyph task of the vision studies: its flags, their checks, and its canvases.

The task (`keras_transformer.vision.cluttered`): a glyph drawn at a random position, height and
rotation on a `--size` canvas with `--clutter` fragments of other glyphs kept off its box. One
task for every run of a study (`--task-seed`): the same training, validation and test canvases
for every model and seed. `add_task_flags` offers the task's flags and the training budget
(`--seeds`, `--steps`, `--batch-size`, `--adam-learning-rate`, `--warmup-steps`, `--decay`),
`check_task_flags` checks them, and
`generate_task` draws the canvases they describe.
"""

import time

from benchmarks.harness import flags
from keras_transformer.vision.cluttered import generate_splits

SCHEDULE_DECAYS = ("none", "cosine")


def add_task_flags(parser, size=40, size_help="Canvas side in pixels.", clutter=6, clutter_help=None,
                   object_scale=False, object_scale_help=None, fragment_size=False, train_size=6000, test_size=1000,
                   validation_size=1000, validation_help="Validation canvases.", steps=800, batch_size=64,
                   learning_rate=3e-3):  # fmt: skip
    """Add the flags every vision study of the task shares: the seeds, the generated task and the training budget.

    `--seeds`, `--task-seed`, `--size`, `--object-scale` (unless `object_scale` is False),
    `--max-rotation`, `--clutter`, `--fragment-size` (unless `fragment_size` is False), `--train-size`,
    `--validation-size`, `--test-size`, `--steps`, `--batch-size`, `--adam-learning-rate` (read as
    `args.learning_rate`, the key the results JSON has always recorded), and its schedule:
    `--warmup-steps` (a linear rise from 0) and `--decay` (`none`: constant after the warm-up;
    `cosine`: a cosine fall to 0 at `--steps`).

    Args:
        parser: the study's parser.
        size: the canvas side's default.
        size_help: the help of `--size`.
        clutter: the default number of clutter fragments (None: the study fills it in after parsing).
        clutter_help: the help of `--clutter`, or None for the usual one.
        object_scale: False for no `--object-scale` flag; otherwise its default, a `"low,high"`
            string or None (the study fills it in after parsing).
        object_scale_help: the help of `--object-scale`, or None for the usual one.
        fragment_size: False for no `--fragment-size` flag; otherwise its default, an int or None
            (a quarter of `--size`).
        train_size: the default number of training canvases.
        test_size: the default number of test canvases.
        validation_size: the default number of validation canvases.
        validation_help: the help of `--validation-size`.
        steps: the default number of training steps of every run.
        batch_size: the default number of canvases per step.
        learning_rate: Adam's default learning rate.
    """
    flags.add_seed_flags(parser, default=[0, 1], several=True, help="Each run's initial weights and batches.")
    parser.add_argument("--task-seed", type=int, default=0, help="Seed of the generated task (the same for all runs).")
    parser.add_argument("--size", type=int, default=size, help=size_help)
    if object_scale is not False:
        parser.add_argument(
            "--object-scale",
            type=flags.parse_list(float, unique=False),
            default=object_scale,
            help=object_scale_help or "Glyph height range as fractions of the canvas, 'low,high' (drawn uniformly).",
        )
    add_rotation_flag(parser)
    clutter_help = clutter_help or "Fragments of other glyphs per canvas."
    parser.add_argument("--clutter", type=int, default=clutter, help=clutter_help)
    if fragment_size is not False:
        parser.add_argument(
            "--fragment-size",
            type=int,
            default=fragment_size,
            help="Side of a clutter fragment in pixels (None: a quarter of --size).",
        )
    parser.add_argument("--train-size", type=int, default=train_size, help="Training canvases.")
    parser.add_argument("--validation-size", type=int, default=validation_size, help=validation_help)
    parser.add_argument("--test-size", type=int, default=test_size, help="Test canvases.")
    parser.add_argument("--steps", type=int, default=steps, help="Training steps of every run.")
    parser.add_argument("--batch-size", type=int, default=batch_size, help="Canvases per step.")
    parser.add_argument(
        "--adam-learning-rate",
        dest="learning_rate",
        metavar="ADAM_LEARNING_RATE",
        type=float,
        default=learning_rate,
        help="Adam's learning rate (its peak, with --warmup-steps or --decay cosine).",
    )
    add_schedule_flags(parser)


def add_rotation_flag(parser):
    """`--max-rotation`: the glyphs' largest rotation in degrees (30, the generator's default)."""
    parser.add_argument(
        "--max-rotation",
        type=float,
        default=30.0,
        help="The glyphs' (and fragments') largest rotation in degrees, either way: angles uniform in +-this.",
    )


def check_rotation_flag(parser, args):
    """`parser.error` unless `--max-rotation` is in [0, 180]."""
    if not 0 <= args.max_rotation <= 180:
        parser.error(f"--max-rotation must be in [0, 180] degrees. Received: {args.max_rotation}")


def add_schedule_flags(parser):
    """`--warmup-steps` and `--decay`: the schedule of `--adam-learning-rate` (`vision_training.schedule_of`)."""
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=0,
        help="Steps over which the learning rate rises linearly from 0 to --adam-learning-rate (0: none).",
    )
    parser.add_argument(
        "--decay",
        default="none",
        choices=SCHEDULE_DECAYS,
        help="After the warm-up: none (the rate stays constant) or cosine (it falls to 0 at the last step).",
    )


def check_schedule_flags(parser, args):
    """`parser.error` unless `--warmup-steps` is in [0, --steps)."""
    if not 0 <= args.warmup_steps < args.steps:
        parser.error(f"--warmup-steps must be >= 0 and < --steps ({args.steps}). Received: {args.warmup_steps}")


def check_task_flags(parser, args):
    """`parser.error` unless the flags of `add_task_flags` are in range (the defaults that depend on `--size` set).

    `--curve-every` (`vision_training.add_curve_flag`), where the study has it, must be >= 0.

    Args:
        parser: the parser of `args`.
        args: the parsed flags, `--object-scale` and `--clutter` filled in where the study leaves them None.
    """
    flags.check_at_least(parser, args, ("steps", "batch_size", "train_size", "validation_size", "test_size"), 1)
    flags.check_at_least(parser, args, ("size",), 16)
    flags.check_at_least(parser, args, ("clutter",), 0)
    if hasattr(args, "curve_every"):
        flags.check_at_least(parser, args, ("curve_every",), 0)
    if getattr(args, "fragment_size", None) is not None and not 1 <= args.fragment_size <= args.size:
        parser.error(f"--fragment-size must be in [1, --size]. Received: {args.fragment_size}")
    if not args.learning_rate > 0:
        parser.error(f"--adam-learning-rate must be > 0. Received: {args.learning_rate}")
    check_schedule_flags(parser, args)
    check_rotation_flag(parser, args)
    scale = getattr(args, "object_scale", None)
    if scale is not None and (len(scale) != 2 or not 0.1 <= scale[0] <= scale[1] <= 0.9):
        parser.error(f"--object-scale must be 'low,high' with 0.1 <= low <= high <= 0.9. Received: {scale}")


def generate_task(args):
    """The canvases of the flags of `add_task_flags`, and a line saying how many and how long they took.

    The training, validation and test splits of the flags; no validation split where the study's
    `--curve-every` is 0 (its validation canvases serve the learning curve alone).

    Args:
        args: the parsed flags; `--glyphs` (a glyph set) where the study has it, `--object-scale`
            otherwise.

    Returns:
        `{split: ClutteredGlyphs}`; each split has its own random stream, so that leaving out a
        split leaves the others the same.
    """
    started = time.perf_counter()
    sizes = {"train": args.train_size, "validation": args.validation_size, "test": args.test_size}
    if getattr(args, "curve_every", None) == 0:
        del sizes["validation"]
    options = {"glyphs": args.glyphs} if hasattr(args, "glyphs") else {"object_scale": tuple(args.object_scale)}
    if getattr(args, "fragment_size", None) is not None:
        options["fragment_size"] = args.fragment_size
    options["max_rotation"] = args.max_rotation
    data = generate_splits(sizes, seed=args.task_seed, size=args.size, clutter=args.clutter, **options)
    print(f"generated {sum(sizes.values())} canvases in {time.perf_counter() - started:.1f} s", flush=True)
    return data
