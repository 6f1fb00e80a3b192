"""Why self-attention, and which score: experiments of the attention family, one subcommand each.

    python benchmarks/attention_scores.py scaling                  # D 128, H 4, batch 8, n = 16 .. 1024
    python benchmarks/attention_scores.py scaling --lengths 16,32 --repeats 1 --warmup 0 --steps 1   # a quick check
    python benchmarks/attention_scores.py scaling --help           # every flag
    python benchmarks/attention_scores.py scores                   # 5 scores x 2 seeds, small preset, 800 steps each
    python benchmarks/attention_scores.py scores --preset tiny --epochs 1 --steps-per-epoch 5 --seeds 0 \
        --scores scaled_dot,additive --train-size 500 --beam-size 1   # a quick check
    python benchmarks/attention_scores.py scores --help            # every flag

Experiments (subcommands):

`scaling`: the cost of one layer against the sequence length n, the measured side of the paper's
section 4 ("Why Self-Attention") and its Table 1. Three layers of the same width d (`--width`),
each mapping `[B, n, d]` to `[B, n, d]` in float32:

    self-attention   `keras_transformer.layers.MultiheadAttention(num_heads=--heads)` as the
                     encoder uses it: Q, K, V and output projections, residual connection and
                     LayerNorm, a padding mask with no padding, no dropout
    GRU              `keras.layers.GRU(d, return_sequences=True)` (Keras's default reset_after);
                     on a CPU a `tf.while_loop` of n steps (cuDNN's kernel would serve a GPU)
    conv             `keras.layers.Conv1D(d, kernel_size=--kernel-size, padding="same")`, k = 3 by
                     default: contiguous, undilated

What runs, in one process (TensorFlow backend):

- Each layer is built once (seeded) and its training step is one `tf.function` (XLA with
  `--jit`): the forward pass on a seeded random normal batch `[--batch, n, d]`, the scalar loss
  mean(outputs^2), and its gradients with respect to the inputs and every trainable weight. One
  concrete function per layer and length.
- Each (layer, length) is first called once untimed (tracing), then every repeat times `--steps`
  consecutive steps of each layer at each length, the three layers interleaved at each length and
  their order rotated from repeat to repeat, so that drift of the machine falls on all alike. The
  first `--warmup` repeats are not counted; the report gives the median over `--repeats`
  repeats of the milliseconds per step.
- FLOPs are counted from formulas: the matmuls of the forward pass of one sequence (2 FLOPs per
  multiply-add; biases, softmax, LayerNorm, gates' nonlinearities and the loss not counted),
  times 3 for a training step (the backward pass is twice the forward), times the batch:
      self-attention   8 n d^2 + 4 n^2 d   (Q, K, V, output projections; scores and weighted sum)
      GRU              12 n d^2            (input and recurrent kernels, 3 gates each)
      conv             2 k n d^2
- The log-log slope of the measured time against n (least squares of log t on log n) over the
  upper lengths: those above d (`--fit-from` sets the smallest), where the n^2 d of attention
  overtakes its n d^2, or the two largest when fewer than two are. The same slope of the FLOP
  formula is printed next to it: attention's tends to 2 as n >> d (about 1.7 over n = 256 .. 1024
  at d = 128), the GRU's and the convolution's are 1.
- Next to the measurements, the paper's Table 1 (n length, d width, k kernel size):
      layer type       complexity per layer   sequential operations   maximum path length
      self-attention   O(n^2 d)               O(1)                    O(1)
      recurrent        O(n d^2)               O(n)                    O(n)
      convolutional    O(k n d^2)             O(1)                    O(log_k n)
  The paper's O(log_k n) path length is for dilated convolutions; a stack of contiguous ones like
  this layer needs O(n/k) layers to connect every pair of positions.

Output: a table (ms per step per layer and length, the ratios self-attention / GRU and
self-attention / conv, GFLOP per training step of each layer), the slopes and Table 1 on stdout;
the JSON (`attention_scores_scaling.json`: settings, versions, CPU model and flags, and per layer
its Table 1 row, FLOP formula, FLOPs, times of every repeat, medians, GFLOP/s, first-call seconds
and slopes; the ratios) and a log-log PNG of ms per step against n, with guides of slope 1 and 2
(`attention_scores_scaling.png`), in the `--out` folder. The defaults take about 2.5 minutes on 2
CPU cores; a step at n = 1024 takes most of it (attention's and the GRU's, about 0.4-0.6 s each).

`scores`: the built-in task (the dates corpus of `python train.py`) trained with each score
function s(x, q) of `keras_transformer.layers.AttentionScore` (`--scores`, default all five:
scaled_dot, dot, additive, bilinear, cosine) in every attention sublayer, the model config's
`attention_score` (`train.py --attention-score`), at the same size and budget:

- Every run is `keras_transformer.runs.train`, the job of `train.py`: train.py's `TrainConfig`
  defaults (batch 64, Noam schedule with 400 warm-up steps, label smoothing 0.1, no weight
  averaging) except the preset (`--preset`, small by default), the budget (`--epochs` x
  `--steps-per-epoch` optimizer steps, 4 x 200 by default), the seed, the beam of the test
  evaluation (`--beam-size`, train.py's 4 by default), the training pairs (`--train-size`) and
  float32 precision, always. It learns the vocabularies, trains with `model.fit`, evaluates the
  test split (no export), in a temporary run directory removed at the end.
- Each seed of `--seeds` (0 and 1 by default) generates the corpus and its splits, shuffles the
  batches and initializes the weights; all the scores of one seed train on the same data, batches
  and vocabularies (learned by its first run, then copied into the others' run directories, which
  read them instead of learning them again). Only the score, and the weights it adds, differ.
- The runs go seed by seed, one at a time in one process (`keras.backend.clear_session()` before
  each); the order of the scores is rotated by one place from one seed to the next, so that drift
  of the machine does not fall on one score: with two seeds and five scores, the first score
  runs first for seed 0 and last for seed 1.

Measured per run: exact match (%) and BLEU of the test split (1,000 sentences), as train.py scores
them (`keras_transformer.evaluation`: beam search, sacreBLEU); the median milliseconds per
training step, timed by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`
(fetching the batch, forward and backward pass and Adam's update; validation between epochs is
outside the steps) over every step but the run's first, which traces the training function; the
trainable parameters; the wall seconds of the whole run (vocabularies, training, evaluation).
Per score: each seed's values and their mean, the median over the timed steps of all its
runs and its ratio to scaled_dot's. Another process on the machine slows the runs that overlap
it: the JSON records the load average at the start and at the end.

Output: the runs one line each as they finish, then a table (one row per score: parameters, exact
match per seed and mean, BLEU per seed and mean, ms per step, ratio to scaled_dot) on stdout; the
JSON (`attention_scores_scores.json`: settings, the order of the runs, versions, CPU model and
flags, load average, and per score and per run the figures above, with each run's chrF, step-time
quartiles, first step, training seconds and final training metrics) in the `--out` folder. The
defaults (10 runs of 800 steps) took 25 minutes on 2 CPU cores shared with other jobs, 1.5 to 4
minutes a run; additive's steps are the slowest.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import common
import keras
import numpy as np
from keras import ops

from keras_transformer.config import ATTENTION_SCORES, PRESETS, TrainConfig
from keras_transformer.layers import MultiheadAttention

MODELS = ("self_attention", "gru", "conv")
LABELS = {"self_attention": "self-attention", "gru": "GRU", "conv": "conv"}
DEFAULT_LENGTHS = "16,32,64,128,256,512,1024"
# The paper's Table 1: "Maximum path lengths, per-layer complexity and minimum number of sequential
# operations for different layer types. n is the sequence length, d is the representation dimension,
# k is the kernel size of convolutions".
TABLE_1 = {
    "self_attention": {
        "layer_type": "Self-Attention",
        "complexity_per_layer": "O(n^2 d)",
        "sequential_operations": "O(1)",
        "maximum_path_length": "O(1)",
    },
    "gru": {
        "layer_type": "Recurrent",
        "complexity_per_layer": "O(n d^2)",
        "sequential_operations": "O(n)",
        "maximum_path_length": "O(n)",
    },
    "conv": {
        "layer_type": "Convolutional",
        "complexity_per_layer": "O(k n d^2)",
        "sequential_operations": "O(1)",
        "maximum_path_length": "O(log_k n)",
    },
}
FLOP_FORMULAS = {"self_attention": "8 n d^2 + 4 n^2 d", "gru": "12 n d^2", "conv": "2 k n d^2"}
# The `scores` experiment's defaults.
DEFAULT_SCORES_PRESET = "small"
DEFAULT_SCORES_EPOCHS = 4
DEFAULT_SCORES_STEPS_PER_EPOCH = 200
DEFAULT_SEEDS = "0,1"
VOCABULARY_FILES = ("source_vocab.txt", "target_vocab.txt")  # what a run directory caches of the vocabularies
CONV_PATH_NOTE = (
    "the paper's O(log_k n) is for dilated convolutions; stacked contiguous ones like this layer "
    "need O(n/k) layers to connect every pair of positions"
)


# ---------------------------------------------------------------- arithmetic (no TensorFlow)


def forward_flops(model, length, width, kernel_size=3):
    """Matmul FLOPs of one layer's forward pass on one sequence (2 per multiply-add).

    Args:
        model: one of `MODELS`.
        length: sequence length n.
        width: model width d (inputs, outputs and, for attention, the projections H * K).
        kernel_size: the convolution's k.

    Returns:
        `8 n d^2 + 4 n^2 d` (self-attention), `12 n d^2` (GRU) or `2 k n d^2` (conv), an int.
    """
    n, d = length, width
    if model == "self_attention":
        return 8 * n * d * d + 4 * n * n * d  # Q, K, V, W^O projections; Q K^T and weights V
    if model == "gru":
        return 12 * n * d * d  # x W ([d, 3d]) and h U ([d, 3d]) at every step
    if model == "conv":
        return 2 * kernel_size * n * d * d
    raise ValueError(f"`model` must be one of {MODELS}. Received: model={model!r}")


def train_step_flops(model, length, width, batch, kernel_size=3):
    """FLOPs of one training step: 3x the forward FLOPs (backward = 2x forward), times the batch."""
    return 3 * batch * forward_flops(model, length, width, kernel_size)


def fit_slope(lengths, values):
    """The log-log slope: the least-squares `p` of `log(values) = p log(lengths) + c`.

    Args:
        lengths: at least two distinct positive numbers.
        values: positive numbers, one per length.

    Returns:
        `p`, a float: 1 for `values` proportional to `lengths`, 2 for their squares.
    """
    if len(lengths) != len(values) or len(set(lengths)) < 2:
        raise ValueError(f"A slope needs two or more distinct lengths, one value each. Received: {lengths}, {values}")
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def fit_lengths(lengths, width, fit_from=None):
    """The lengths the slopes are fitted over: those >= `fit_from`, by default those > `width`.

    Args:
        lengths: the measured lengths, sorted.
        width: model width d.
        fit_from: the smallest length fitted, or None (the lengths n > d).

    Returns:
        The upper lengths, a list; the two largest lengths when fewer than two qualify.
    """
    upper = [n for n in lengths if (n >= fit_from if fit_from is not None else n > width)]
    return upper if len(upper) >= 2 else list(lengths[-2:])


def parse_lengths(text):
    """`--lengths`: comma-separated ints >= 1, at least two distinct, returned sorted and unique."""
    try:
        lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, e.g. {DEFAULT_LENGTHS}; got {text!r}")
    if len(lengths) < 2 or lengths[0] < 1:
        raise argparse.ArgumentTypeError(f"expected two or more distinct lengths >= 1; got {text!r}")
    return lengths


# ---------------------------------------------------------------- flags


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


# ---------------------------------------------------------------- scaling: measurement


def build_layers(args):
    """The three layers, seeded, and the function that runs each in training mode.

    Returns:
        `{name: (layer, forward)}` in the order of `MODELS`; `forward(x)` maps float32
        `[B, n, d]` to `[B, n, d]`.
    """
    keras.utils.set_random_seed(args.seed)
    attention = MultiheadAttention(num_heads=args.heads, dtype="float32", name="self_attention")
    gru = keras.layers.GRU(args.width, return_sequences=True, dtype="float32", name="gru")
    conv = keras.layers.Conv1D(args.width, kernel_size=args.kernel_size, padding="same", dtype="float32", name="conv")

    def attend(x):
        mask = ops.ones(ops.shape(x)[:2], dtype="bool")  # (B, n): no padding, as the encoder's mask says
        return attention(x, x, training=True, queries_mask=mask, keys_mask=mask)

    layers = {
        "self_attention": (attention, attend),
        "gru": (gru, lambda x: gru(x, training=True)),
        "conv": (conv, lambda x: conv(x, training=True)),
    }
    build_input = np.zeros((1, 2, args.width), "float32")
    for _, forward in layers.values():
        forward(build_input)  # builds the weights, eagerly
    return layers


def train_step(layer, forward, jit=False):
    """One layer's training step, a `tf.function`: the loss and its gradients w.r.t. inputs and weights.

    Args:
        layer: the built layer.
        forward: its forward function (`build_layers`).
        jit: compile with XLA.

    Returns:
        `step(x) -> (loss, [d loss / d x, d loss / d weight, ...])`, `loss = mean(forward(x)^2)`.
    """
    import tensorflow as tf

    @tf.function(jit_compile=jit, autograph=False)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_mean(tf.square(forward(x)))
        return loss, tape.gradient(loss, [x, *layer.trainable_variables])

    return step


def measure(args, steps, inputs):
    """Time every layer's training step at every length, interleaved, the order rotated per repeat.

    Args:
        args: the `scaling` flags.
        steps: `{name: train_step(...)}`.
        inputs: `{length: float32 tensor [B, n, d]}`.

    Returns:
        `(first_call, times)`: the seconds of each first call, tracing (and with `--jit`, compiling)
        included, `{name: {n: s}}`; the milliseconds per step of each counted repeat,
        `{name: {n: [ms, ...]}}`.
    """
    names = list(steps)
    first_call = {name: {} for name in names}
    times = {name: {n: [] for n in args.lengths} for name in names}
    concrete = {name: {} for name in names}  # one concrete function per layer and length, traced once
    for n in args.lengths:
        for name in names:
            start = time.perf_counter()
            concrete[name][n] = steps[name].get_concrete_function(inputs[n])
            float(concrete[name][n](inputs[n])[0])
            first_call[name][n] = time.perf_counter() - start
    print(f"traced {len(names)} layers x {len(args.lengths)} lengths", flush=True)
    for repeat in range(args.warmup + args.repeats):
        warmup = repeat < args.warmup
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        started = time.perf_counter()
        for n in args.lengths:
            for name in order:
                start = time.perf_counter()
                for _ in range(args.steps):
                    loss, _ = concrete[name][n](inputs[n])
                float(loss)  # the step's outputs are ready
                if not warmup:
                    times[name][n].append(1000 * (time.perf_counter() - start) / args.steps)
        which = "warm-up" if warmup else f"repeat {repeat - args.warmup + 1}/{args.repeats}"
        print(f"{which}: {time.perf_counter() - started:.1f} s", flush=True)
    return first_call, times


def summarise(args, parameters, first_call, times):
    """The results of each layer (medians, FLOPs, GFLOP/s, slopes, Table 1 row) and the ratios."""
    lengths = args.lengths
    fitted = fit_lengths(lengths, args.width, args.fit_from)
    models = {}
    for name in MODELS:
        medians = [float(np.median(times[name][n])) for n in lengths]
        flops = [train_step_flops(name, n, args.width, args.batch, args.kernel_size) for n in lengths]
        at_fit = [lengths.index(n) for n in fitted]
        models[name] = {
            "label": label(name, args),
            "parameters": parameters[name],
            "paper_table_1": TABLE_1[name],
            "forward_flops_per_sequence": FLOP_FORMULAS[name],
            "train_step_flops": flops,
            "ms_per_step_median": medians,
            "ms_per_step_repeats": [[round(ms, 4) for ms in times[name][n]] for n in lengths],
            "gflops_per_second": [f / ms / 1e6 for f, ms in zip(flops, medians)],
            "first_call_seconds": [round(first_call[name][n], 3) for n in lengths],
            "slope": {
                "lengths": fitted,
                "measured": fit_slope(fitted, [medians[i] for i in at_fit]),
                "flops": fit_slope(fitted, [flops[i] for i in at_fit]),
            },
        }
    models["conv"]["paper_table_1"] = {**TABLE_1["conv"], "note": CONV_PATH_NOTE}
    attention = models["self_attention"]["ms_per_step_median"]
    ratios = {
        f"self_attention_over_{other}": [a / b for a, b in zip(attention, models[other]["ms_per_step_median"])]
        for other in ("gru", "conv")
    }
    return {"lengths": lengths, "models": models, "ratios": ratios}


def label(name, args):
    """A layer's name in the report and the plot, e.g. "conv (k=3)"."""
    return f"conv (k={args.kernel_size})" if name == "conv" else LABELS[name]


# ---------------------------------------------------------------- scaling: report, plot, run


def print_report(args, results, cpu):
    """The table of times, ratios and FLOPs; the slopes; the paper's Table 1."""
    models, ratios = results["models"], results["ratios"]
    print()
    print(
        f"one layer, d {args.width}, H {args.heads}, batch {args.batch}, float32, forward + backward "
        f"(gradients w.r.t. inputs and weights), median of {args.repeats} repeats of {args.steps} steps, "
        f"jit {'on' if args.jit else 'off'}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    conv = label("conv", args)
    header = (
        f"{'n':>6}{'attn ms':>11}{'GRU ms':>11}{conv + ' ms':>16}{'attn/GRU':>10}{'attn/conv':>11}"
        f"{'attn GFLOP':>12}{'GRU GFLOP':>12}{'conv GFLOP':>12}"
    )
    print(header)
    print("-" * len(header))
    for i, n in enumerate(results["lengths"]):
        ms = [models[name]["ms_per_step_median"][i] for name in MODELS]
        gflop = [models[name]["train_step_flops"][i] / 1e9 for name in MODELS]
        print(
            f"{n:>6}{ms[0]:>11.2f}{ms[1]:>11.2f}{ms[2]:>16.2f}"
            f"{common.format_ratio(ratios['self_attention_over_gru'][i], 10)}"
            f"{common.format_ratio(ratios['self_attention_over_conv'][i], 11)}"
            f"{gflop[0]:>12.3g}{gflop[1]:>12.3g}{gflop[2]:>12.3g}"
        )
    fitted = models["self_attention"]["slope"]["lengths"]
    slopes = ", ".join(
        f"{models[name]['label']} {models[name]['slope']['measured']:.2f} (FLOPs {models[name]['slope']['flops']:.2f})"
        for name in MODELS
    )
    print(f"log-log slope of time over n = {fitted[0]}..{fitted[-1]} ({len(fitted)} lengths): {slopes}")
    print()
    print("the paper's Table 1 (n length, d width, k kernel size) and the FLOP formulas counted here:")
    row = "{:<22}{:<22}{:<24}{:<22}{}"
    print(row.format("layer", "complexity per layer", "sequential operations", "maximum path length", "FLOPs/sequence"))
    layer_names = {
        "self_attention": "self-attention",
        "gru": "recurrent: GRU",
        "conv": f"convolutional: k={args.kernel_size}",
    }
    for name in MODELS:
        table = TABLE_1[name]
        print(
            row.format(
                layer_names[name],
                table["complexity_per_layer"],
                table["sequential_operations"],
                table["maximum_path_length"],
                f"{FLOP_FORMULAS[name]} (x3 per step)",
            )
        )
    print(f"({CONV_PATH_NOTE})")


def plot_scaling(path, args, results, cpu):
    """Milliseconds per step against n on log-log axes, one line per layer, guides of slope 1 and 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths, models = results["lengths"], results["models"]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, marker in zip(MODELS, "osD"):
        model = models[name]
        axes.plot(
            lengths,
            model["ms_per_step_median"],
            marker=marker,
            label=f"{model['label']}: slope {model['slope']['measured']:.2f} (FLOPs {model['slope']['flops']:.2f})",
        )
    anchor = models["self_attention"]["ms_per_step_median"][-1]
    for power, style in ((1, ":"), (2, "--")):
        guide = [anchor * (n / lengths[-1]) ** power for n in lengths]
        axes.plot(
            lengths,
            guide,
            color="grey",
            linestyle=style,
            linewidth=0.8,
            label="$\\propto n$" if power == 1 else f"$\\propto n^{power}$",
        )
    fitted = models["self_attention"]["slope"]["lengths"]
    axes.axvspan(fitted[0], fitted[-1], color="grey", alpha=0.08, label="slope fit")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xticks(lengths, [str(n) for n in lengths])
    axes.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    axes.set_ylim(bottom=min(min(m["ms_per_step_median"]) for m in models.values()) / 2)
    axes.set_xlabel("sequence length n")
    axes.set_ylabel("ms per training step (forward + backward)")
    axes.set_title(
        f"One layer, d = {args.width}, H = {args.heads}, batch {args.batch}, float32\n"
        f"{cpu['model'] or 'unknown CPU'}, {os.cpu_count()} CPUs",
        fontsize=10,
    )
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def run_scaling(args):
    """The `scaling` experiment: build, trace, time, report, write the JSON and the PNG."""
    import tensorflow as tf

    cpu = common.cpu_info()
    layers = build_layers(args)
    parameters = {name: int(layer.count_params()) for name, (layer, _) in layers.items()}
    steps = {name: train_step(layer, forward, args.jit) for name, (layer, forward) in layers.items()}
    rng = np.random.default_rng(args.seed)
    inputs = {n: tf.constant(rng.standard_normal((args.batch, n, args.width), dtype="float32")) for n in args.lengths}
    first_call, times = measure(args, steps, inputs)
    results = summarise(args, parameters, first_call, times)
    print_report(args, results, cpu)

    out = Path(args.out)
    settings = {
        "experiment": "scaling",
        "width": args.width,
        "heads": args.heads,
        "kernel_size": args.kernel_size,
        "batch": args.batch,
        "dtype": "float32",
        "repeats": args.repeats,
        "warmup": args.warmup,
        "steps": args.steps,
        "fit_from": args.fit_from,
        "jit": args.jit,
        "seed": args.seed,
        "backend": keras.backend.backend(),
        "loss": "mean(outputs^2); gradients w.r.t. the inputs and every trainable weight",
        "flops": "matmuls only, 2 per multiply-add; a training step is 3x the forward pass, times the batch",
    }
    data = {
        "settings": settings,
        "command": common.command_line(args.argv),
        "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        **common.machine(cpu),
        "peak_rss_mib": common.peak_rss_mib(),
        **results,
    }
    print(f"wrote {common.write_json(out / 'attention_scores_scaling.json', data)}")
    plot = out / "attention_scores_scaling.png"
    plot_scaling(plot, args, results, cpu)
    print(f"wrote {plot}")
    return 0


# ---------------------------------------------------------------- scores: training runs


class StepTimer(keras.callbacks.Callback):
    """The milliseconds of every training step of a `model.fit`, and the model's trainable parameters.

    A step is timed from `on_train_batch_begin` to `on_train_batch_end`: fetching the batch,
    forward and backward pass and optimizer update (TensorFlow runs the step synchronously, so it
    has finished when `on_train_batch_end` is called). Validation and the epoch-end callbacks fall
    between steps and are not counted.
    """

    def __init__(self):
        super().__init__()
        self.milliseconds = []
        self.trainable_parameters = None
        self._start = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.milliseconds.append(1000 * (time.perf_counter() - self._start))

    def on_train_end(self, logs=None):
        self.trainable_parameters = int(sum(np.prod(weight.shape) for weight in self.model.trainable_weights))


def run_orders(scores, seeds):
    """The order of the runs: seed by seed, the scores rotated by one place from each seed to the next.

    Args:
        scores: the score functions, in the order of `--scores`.
        seeds: the seeds, in the order of `--seeds`.

    Returns:
        A list of `(seed, score)`: with two seeds and five scores, the first score runs first for
        the first seed and last for the second.
    """
    return [
        (seed, score) for i, seed in enumerate(seeds) for score in scores[i % len(scores) :] + scores[: i % len(scores)]
    ]


def train_config(args, seed, run_dir):
    """The `TrainConfig` of one run: train.py's defaults but preset, budget, seed, test size, beam, folders; float32."""
    return TrainConfig(
        preset=args.preset,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        train_size=args.train_size,
        test_size=args.test_size,
        beam_size=args.beam_size,
        seed=seed,
        precision="float32",
        run_dir=str(run_dir),
        export_dir=str(run_dir / "export"),
    )


def train_with_score(args, seed, score, run_dir, vocabularies=None):
    """One run of `keras_transformer.runs.train` (train.py's job) with the attention score `score`.

    Args:
        args: the `scores` flags.
        seed: the run's seed.
        score: one of `ATTENTION_SCORES`.
        run_dir: a new run directory.
        vocabularies: the `VOCABULARY_FILES` of an earlier run of the same seed, copied into
            `run_dir` first (the run then reads them instead of learning them again), or None.

    Returns:
        The run's results: parameters, test scores, step times, seconds.
    """
    from keras_transformer import runs

    run_dir.mkdir(parents=True)
    for path in vocabularies or ():
        shutil.copy(path, run_dir / Path(path).name)
    timer = StepTimer()
    keras.backend.clear_session()
    started = time.perf_counter()
    summary = runs.train(
        train_config(args, seed, run_dir),
        model_overrides={"attention_score": score},
        log=lambda line: None,
        extra_callbacks=[timer],
        verbose=0,
        export=False,
    )
    wall = time.perf_counter() - started
    timed = timer.milliseconds[1:]  # the first step traces the training function
    test = summary["test"]
    return {
        "score": score,
        "seed": seed,
        "parameters": timer.trainable_parameters,
        "exact_match_percent": 100 * test["exact_match"],
        "bleu": test["bleu"],
        "chrf": test["chrf"],
        "test_sentences": test["sentences"],
        "steps": len(timer.milliseconds),
        "ms_per_step_median": float(np.median(timed)) if timed else None,
        "ms_per_step_quartiles": [float(q) for q in np.percentile(timed, [25, 75])] if timed else None,
        "first_step_ms": round(timer.milliseconds[0], 1),
        "train_seconds": summary["train_seconds_this_session"],
        "wall_seconds": round(wall, 1),
        "vocab_sizes": [summary["model_config"]["source_vocab_size"], summary["model_config"]["target_vocab_size"]],
        "final_metrics": summary["final_metrics"],
        "bleu_signature": test["bleu_signature"],
        "_step_ms": timed,
    }


def summarise_scores(args, runs_done):
    """Per score: parameters, exact match and BLEU per seed and their means, ms per step, its ratio.

    Args:
        args: the `scores` flags.
        runs_done: the results of `train_with_score`, each with its step times (`_step_ms`).

    Returns:
        `{score: {...}}` in the order of `--scores`. `ms_per_step_median` is the median over the
        timed steps of all the score's runs, `ms_per_step_over_scaled_dot` its ratio to
        scaled_dot's (None without a scaled_dot run).
    """
    scores = {}
    for score in args.scores:
        mine = sorted(
            (run for run in runs_done if run["score"] == score), key=lambda run: args.seeds.index(run["seed"])
        )
        steps = [ms for run in mine for ms in run["_step_ms"]]
        scores[score] = {
            "seeds": [run["seed"] for run in mine],
            "parameters": [run["parameters"] for run in mine],
            "exact_match_percent": {
                "seeds": [run["exact_match_percent"] for run in mine],
                "mean": float(np.mean([run["exact_match_percent"] for run in mine])),
            },
            "bleu": {"seeds": [run["bleu"] for run in mine], "mean": float(np.mean([run["bleu"] for run in mine]))},
            "ms_per_step_median": float(np.median(steps)) if steps else None,
            "ms_per_step_median_seeds": [run["ms_per_step_median"] for run in mine],
            "wall_seconds": {
                "seeds": [run["wall_seconds"] for run in mine],
                "mean": float(np.mean([run["wall_seconds"] for run in mine])),
            },
        }
    reference = scores.get("scaled_dot", {}).get("ms_per_step_median")
    for summary in scores.values():
        ms = summary["ms_per_step_median"]
        summary["ms_per_step_over_scaled_dot"] = ms / reference if ms and reference else None
    return scores


# ---------------------------------------------------------------- scores: report, run


def format_parameters(counts):
    """A score's parameter count for the table: one number, or "low-high" when the seeds' differ."""
    low, high = min(counts), max(counts)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def print_scores_report(args, scores, cpu):
    """The table: one row per score, parameters, exact match and BLEU per seed and mean, ms per step."""
    steps = args.epochs * args.steps_per_epoch
    print()
    print(
        f"built-in dates corpus, preset {args.preset}, {steps} steps ({args.epochs} x {args.steps_per_epoch}), "
        f"float32, seeds {', '.join(map(str, args.seeds))}, test beam {args.beam_size}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    seeds = args.seeds
    width = max(11, *(len(format_parameters(summary["parameters"])) + 2 for summary in scores.values()))
    header = f"{'score':<12}{'params':>{width}}"
    header += "".join(f"{'EM s' + str(seed):>9}" for seed in seeds) + f"{'EM mean':>9}"
    header += "".join(f"{'BLEU s' + str(seed):>9}" for seed in seeds) + f"{'BLEU mean':>11}"
    header += f"{'ms/step':>9}{'/ scaled_dot':>14}"
    print(header)
    print("-" * len(header))
    for score, summary in scores.items():
        exact, bleu = summary["exact_match_percent"], summary["bleu"]
        ratio = summary["ms_per_step_over_scaled_dot"]
        ms = summary["ms_per_step_median"]
        print(
            f"{score:<12}{format_parameters(summary['parameters']):>{width}}"
            + "".join(f"{value:>9.1f}" for value in exact["seeds"])
            + f"{exact['mean']:>9.1f}"
            + "".join(f"{value:>9.2f}" for value in bleu["seeds"])
            + f"{bleu['mean']:>11.2f}"
            + (f"{ms:>9.2f}" if ms is not None else f"{'-':>9}")
            + (common.format_ratio(ratio, 14) if ratio is not None else f"{'-':>14}")
        )
    print(
        "EM: exact match (%) of the test split; BLEU: sacreBLEU of the same translations; ms/step: median over the "
        "timed steps of every seed (the first step of each run, which traces, not timed)"
    )


def run_scores(args):
    """The `scores` experiment: train every (seed, score), report, write the JSON."""
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    runs_done = []
    vocabularies = {}  # seed -> the vocabulary files of its first run
    order = run_orders(args.scores, args.seeds)
    with tempfile.TemporaryDirectory(prefix="attention_scores_") as folder:
        for i, (seed, score) in enumerate(order):
            run_dir = Path(folder) / f"seed_{seed}_{score}"
            result = train_with_score(args, seed, score, run_dir, vocabularies.get(seed))
            vocabularies.setdefault(seed, [run_dir / name for name in VOCABULARY_FILES])
            result["position"] = i
            runs_done.append(result)
            print(
                f"[{i + 1}/{len(order)}] seed {seed}, {score}: exact match {result['exact_match_percent']:.1f}%, "
                f"BLEU {result['bleu']:.2f}, {result['ms_per_step_median'] or float('nan'):.2f} ms/step, "
                f"{result['parameters']:,} parameters, {result['wall_seconds']:.0f} s",
                flush=True,
            )
    wall = time.perf_counter() - started
    scores = summarise_scores(args, runs_done)
    print_scores_report(args, scores, cpu)
    print(f"wall time {wall / 60:.1f} min")

    settings = {
        "experiment": "scores",
        "corpus": "builtin",
        "scores": args.scores,
        "preset": args.preset,
        "epochs": args.epochs,
        "steps_per_epoch": args.steps_per_epoch,
        "steps": args.epochs * args.steps_per_epoch,
        "seeds": args.seeds,
        "train_size": args.train_size,
        "beam_size": args.beam_size,
        "precision": "float32",
        "backend": keras.backend.backend(),
        "train_config": train_config(args, args.seeds[0], Path("RUN_DIR")).to_dict(),
        "order": [[seed, score] for seed, score in order],
        "ms_per_step": "from on_train_batch_begin to on_train_batch_end of model.fit, every step but each run's "
        "first (tracing)",
        "exact_match_and_bleu": "keras_transformer.evaluation on the test split, as train.py scores it",
        "bleu_signature": runs_done[0]["bleu_signature"],
    }
    data = {
        "settings": settings,
        "command": common.command_line(args.argv),
        "versions": common.package_versions(
            {"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy", "sacrebleu": "sacrebleu"}
        ),
        **common.machine(cpu),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": common.peak_rss_mib(),
        "scores": scores,
        "runs": [
            {key: value for key, value in run.items() if not key.startswith("_") and key != "bleu_signature"}
            for run in runs_done
        ],
    }
    print(f"wrote {common.write_json(Path(args.out) / 'attention_scores_scores.json', data)}")
    return 0


def main(argv=None):
    """Run the experiment the command line names."""
    args = parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
