"""Why self-attention, and which score: experiments of the attention family, one subcommand each.

    python benchmarks/attention_scores.py scaling                  # D 128, H 4, batch 8, n = 16 .. 1024
    python benchmarks/attention_scores.py scaling --lengths 16,32 --repeats 1 --warmup 0 --steps 1   # a quick check
    python benchmarks/attention_scores.py scaling --help           # every flag
    python benchmarks/attention_scores.py scores                   # 5 scores x 2 seeds, small preset, 800 steps each
    python benchmarks/attention_scores.py scores --preset tiny --epochs 1 --steps-per-epoch 5 --seeds 0 \
        --scores scaled_dot,additive --train-size 500 --beam-size 1   # a quick check
    python benchmarks/attention_scores.py scores --help            # every flag

Experiments (subcommands):

- `scaling`: the cost of one layer against the sequence length n, the measured side of the
  paper's section 4 ("Why Self-Attention") and its Table 1: the training step of one
  self-attention layer, one GRU and one convolution of the same width, timed over the lengths,
  with their FLOP formulas and log-log slopes. attention_scores_scaling.py (the layers, the
  timing, the arithmetic) and attention_scores_scaling_report.py (the table, the JSON, the PNG).
- `scores`: the built-in task (the dates corpus of `python train.py`) trained with each score
  function of `keras_transformer.layers.AttentionScore` at the same size and budget: exact
  match, BLEU, ms per training step and parameters per score. attention_scores_scores.py.

Each of those modules' docstrings says in full what its experiment runs, measures and writes.
This module is the command line: one subcommand per experiment, each with its own flags and
checks, and `main`, which runs the experiment it names.
"""

import argparse
import sys

import common
import keras
from attention_scores_scaling_report import run_scaling
from attention_scores_scores import run_scores

from keras_transformer.config import ATTENTION_SCORES, PRESETS

DEFAULT_LENGTHS = "16,32,64,128,256,512,1024"
# The `scores` experiment's defaults.
DEFAULT_SCORES_PRESET = "small"
DEFAULT_SCORES_EPOCHS = 4
DEFAULT_SCORES_STEPS_PER_EPOCH = 200
DEFAULT_SEEDS = "0,1"


def parse_lengths(text):
    """`--lengths`: comma-separated ints >= 1, at least two distinct, returned sorted and unique."""
    try:
        lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. {DEFAULT_LENGTHS}; got {text!r}")
    if len(lengths) < 2 or lengths[0] < 1:
        raise argparse.ArgumentTypeError(f"expected two or more distinct lengths >= 1; got {text!r}")
    return lengths


def add_shared_flags(parser, seed=True):
    """The flags every experiment has: `--out`, and `--seed` unless the experiment takes several (`seed=False`)."""
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results (and plots).")
    if seed:
        parser.add_argument("--seed", type=int, default=0, help="Seed of the layers' weights and the input batches.")


def add_scaling_parser(experiments):
    """The `scaling` subcommand's parser, on the `add_subparsers` object `experiments`."""
    parser = experiments.add_parser(
        "scaling",
        help="Training-step time of self-attention, a GRU and a convolution against sequence length.",
        description="Forward + backward time of one self-attention layer, one GRU and one Conv1D of the same width, "
        "over sequence lengths, with their FLOPs, log-log slopes and the paper's Table 1 (see the module docstring).",
        formatter_class=common.DefaultsHelpFormatter,
    )
    parser.add_argument("--width", type=int, default=128, help="Model width d of all three layers (inputs, outputs).")
    parser.add_argument("--heads", type=int, default=4, help="Attention heads H (must divide --width).")
    parser.add_argument("--kernel-size", type=int, default=3, help="The convolution's kernel size k.")
    parser.add_argument("--batch", type=int, default=8, help="Sequences per batch B.")
    parser.add_argument(
        "--lengths",
        type=parse_lengths,
        default=DEFAULT_LENGTHS,
        help="Comma-separated sequence lengths n (sorted, duplicates dropped).",
    )
    parser.add_argument("--repeats", type=int, default=15, help="Counted repeats; the report gives their median.")
    parser.add_argument("--warmup", type=int, default=1, help="Repeats run first and not counted (after tracing).")
    parser.add_argument(
        "--steps", type=int, default=5, help="Consecutive training steps timed per layer, length and repeat."
    )
    parser.add_argument(
        "--fit-from",
        type=int,
        default=None,
        help="Smallest length of the log-log slope fit (default: the lengths above --width; the two largest "
        "lengths when fewer than two are).",
    )
    parser.add_argument("--jit", action="store_true", help="Compile the training steps with XLA.")
    add_shared_flags(parser)
    parser.set_defaults(run=run_scaling, check=lambda args: check_scaling_args(parser, args))
    return parser


def check_scaling_args(parser, args):
    """`parser.error` on a bad `scaling` flag."""
    common.check_at_least(parser, args, ("width", "heads", "kernel_size", "batch", "repeats", "steps"), 1)
    common.check_at_least(parser, args, ("warmup",), 0)
    if args.width % args.heads:
        parser.error(f"--heads must divide --width. Received: --width {args.width} --heads {args.heads}")


def parse_seeds(text):
    """`--seeds`: comma-separated ints, duplicates dropped, in the order given."""
    try:
        seeds = list(dict.fromkeys(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. {DEFAULT_SEEDS}; got {text!r}")
    if not seeds:
        raise argparse.ArgumentTypeError(f"expected one or more seeds; got {text!r}")
    return seeds


def parse_scores(text):
    """`--scores`: comma-separated names of `ATTENTION_SCORES`, duplicates dropped, in the order given."""
    scores = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [score for score in scores if score not in ATTENTION_SCORES]
    if unknown or not scores:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated names of {', '.join(ATTENTION_SCORES)}; got {text!r}"
        )
    return scores


def add_scores_parser(experiments):
    """The `scores` subcommand's parser, on the `add_subparsers` object `experiments`."""
    parser = experiments.add_parser(
        "scores",
        help="The built-in task trained with each attention score function: exact match, BLEU, ms/step, parameters.",
        description="Trains the Transformer on the built-in dates corpus once per score function and seed, at the "
        "same size and number of steps, and reports test exact match, BLEU, ms per step and parameters (see the "
        "module docstring).",
        formatter_class=common.DefaultsHelpFormatter,
    )
    parser.add_argument(
        "--scores",
        type=parse_scores,
        default=",".join(ATTENTION_SCORES),
        help="Comma-separated score functions to train (the model config's attention_score).",
    )
    parser.add_argument(
        "--preset", default=DEFAULT_SCORES_PRESET, choices=sorted(PRESETS), help="Model size of every run."
    )
    parser.add_argument("--epochs", type=int, default=DEFAULT_SCORES_EPOCHS, help="Training epochs of every run.")
    parser.add_argument(
        "--steps-per-epoch",
        type=int,
        default=DEFAULT_SCORES_STEPS_PER_EPOCH,
        help="Optimizer steps per epoch: every run takes epochs x steps-per-epoch steps.",
    )
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=DEFAULT_SEEDS,
        help="Comma-separated seeds; each seed generates the corpus, shuffles it and initializes the weights.",
    )
    parser.add_argument(
        "--train-size",
        type=int,
        default=0,
        help="Training pairs generated per seed; 0: the built-in corpus's default (20,000).",
    )
    parser.add_argument(
        "--beam-size", type=int, default=4, help="Beam size of the test evaluation (train.py's default); 1 is greedy."
    )
    parser.add_argument(
        "--test-size", type=int, default=0, help="Test sentences scored per run; 0: the whole split (1,000)."
    )
    add_shared_flags(parser, seed=False)
    parser.set_defaults(run=run_scores, check=lambda args: check_scores_args(parser, args))
    return parser


def check_scores_args(parser, args):
    """`parser.error` on a bad `scores` flag."""
    common.check_at_least(parser, args, ("epochs", "steps_per_epoch", "beam_size"), 1)
    common.check_at_least(parser, args, ("train_size", "test_size"), 0)


def build_parser():
    """The command line: one subcommand per experiment, each with its own flags and checks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    experiments = parser.add_subparsers(
        dest="experiment",
        required=True,
        metavar="EXPERIMENT",
        help="The experiment to run; EXPERIMENT --help: its flags.",
    )
    add_scaling_parser(experiments)
    add_scores_parser(experiments)
    return parser


def parse_args(argv=None):
    """The experiment and its flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.check(args)
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


def main(argv=None):
    """Run the experiment the command line names."""
    args = parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
