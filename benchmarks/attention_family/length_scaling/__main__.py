"""The command line of the study: `python -m benchmarks.attention_family.length_scaling` (see `__init__`)."""

import argparse
import sys

import numpy as np

from benchmarks.attention_family.length_scaling.measure import build_layers, measure, summarise, train_step
from benchmarks.attention_family.length_scaling.report import plot_scaling, print_report, results_json
from benchmarks.harness import flags, machine, results
from keras_transformer.config import ModelConfig, TrainConfig

DESCRIPTION = (
    "Forward + backward time of one self-attention layer, one GRU and one Conv1D of the same width, over "
    "sequence lengths, with their FLOPs, log-log slopes and the paper's Table 1 (see the package docstring)."
)
DEFAULT_LENGTHS = "16,32,64,128,256,512,1024"


def parse_lengths(text):
    """`--lengths`: comma-separated ints >= 1, at least two distinct, returned sorted and unique."""
    try:
        lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. {DEFAULT_LENGTHS}; got {text!r}")
    if len(lengths) < 2 or lengths[0] < 1:
        raise argparse.ArgumentTypeError(f"expected two or more distinct lengths >= 1; got {text!r}")
    return lengths


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__, DESCRIPTION)
    flags.add_config_flags(
        parser,
        ModelConfig,
        "the layers (ModelConfig fields)",
        fields=("d_model", "num_heads"),
        defaults={"d_model": 128, "num_heads": 4},
    )
    flags.add_config_flags(
        parser,
        TrainConfig,
        "the training step (TrainConfig fields)",
        fields=("batch_size", "jit_compile"),
        defaults={"batch_size": 8, "jit_compile": False},
    )
    study = parser.add_argument_group("the study")
    study.add_argument("--kernel-size", type=int, default=3, help="The convolution's kernel size k.")
    study.add_argument(
        "--lengths",
        type=parse_lengths,
        default=DEFAULT_LENGTHS,
        help="Comma-separated sequence lengths n (sorted, duplicates dropped).",
    )
    study.add_argument("--repeats", type=int, default=15, help="Counted repeats; the report gives their median.")
    study.add_argument(
        "--warmup-repeats", type=int, default=1, help="Repeats run first and not counted (after tracing)."
    )
    study.add_argument(
        "--steps", type=int, default=5, help="Consecutive training steps timed per layer, length and repeat."
    )
    study.add_argument(
        "--fit-from",
        type=int,
        default=None,
        help="Smallest length of the log-log slope fit (default: the lengths above --d-model; the two largest "
        "lengths when fewer than two are).",
    )
    flags.add_seed_flags(study, help="Seed of the layers' weights and the input batches.")
    flags.add_output_flags(study, __package__, "scaling")
    return parser


def parse_args(argv=None):
    """The study's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("kernel_size", "repeats", "steps"), 1)
    flags.check_at_least(parser, args, ("warmup_repeats",), 0)
    flags.config_from_flags(parser, args, ModelConfig)  # --d-model, --num-heads: sizes, and heads divide the width
    flags.config_from_flags(parser, args, TrainConfig)  # --batch-size
    flags.check_tensorflow(parser)
    return args


def main(argv=None):
    """Build the layers, trace and time their steps, report, write the JSON and the PNG."""
    import tensorflow as tf

    args = parse_args(argv)
    cpu = machine.cpu_info()
    layers = build_layers(args)
    parameters = {name: int(layer.count_params()) for name, (layer, _) in layers.items()}
    steps = {name: train_step(layer, forward, args.jit_compile) for name, (layer, forward) in layers.items()}
    rng = np.random.default_rng(args.seed)
    inputs = {  # (B, n, d) per length
        n: tf.constant(rng.standard_normal((args.batch_size, n, args.d_model), dtype="float32")) for n in args.lengths
    }
    first_call, times = measure(args, steps, inputs)
    summary = summarise(args, parameters, first_call, times)
    print_report(args, summary, cpu)
    print(f"wrote {results.write_json(flags.output_path(args), results_json(args, summary, cpu))}")
    figure = flags.output_path(args, ".png")
    plot_scaling(figure, args, summary, cpu)
    print(f"wrote {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
