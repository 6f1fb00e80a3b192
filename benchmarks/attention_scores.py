"""Why self-attention: experiments on one attention layer, one subcommand each.

    python benchmarks/attention_scores.py scaling                  # D 128, H 4, batch 8, n = 16 .. 1024
    python benchmarks/attention_scores.py scaling --lengths 16,32 --repeats 1 --warmup 0 --steps 1   # a quick check
    python benchmarks/attention_scores.py scaling --help           # every flag

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
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np
from keras import ops

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


def add_shared_flags(parser):
    """The flags every experiment has: `--out` and `--seed`."""
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results and the PNG plot.")
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

    @tf.function(jit_compile=jit)
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


def main(argv=None):
    """Run the experiment the command line names."""
    args = parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
