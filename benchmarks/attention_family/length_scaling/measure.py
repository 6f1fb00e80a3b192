"""The layers, their FLOP formulas and slopes, their timed training steps, and the summary of the timings."""

import time

import keras
import numpy as np
from keras import ops

from keras_transformer.layers import MultiheadAttention

MODELS = ("self_attention", "gru", "conv")
LABELS = {"self_attention": "self-attention", "gru": "GRU", "conv": "conv"}
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


# ---------------------------------------------------------------- measurement


def build_layers(args):
    """The three layers, seeded, and the function that runs each in training mode.

    Returns:
        `{name: (layer, forward)}` in the order of `MODELS`; `forward(x)` maps float32
        `[B, n, d]` to `[B, n, d]`.
    """
    keras.utils.set_random_seed(args.seed)
    attention = MultiheadAttention(num_heads=args.num_heads, dtype="float32", name="self_attention")
    gru = keras.layers.GRU(args.d_model, return_sequences=True, dtype="float32", name="gru")
    conv = keras.layers.Conv1D(args.d_model, kernel_size=args.kernel_size, padding="same", dtype="float32", name="conv")

    def attend(x):
        mask = ops.ones(ops.shape(x)[:2], dtype="bool")  # (B, n): no padding, as the encoder's mask says
        return attention(x, x, training=True, queries_mask=mask, keys_mask=mask)

    layers = {
        "self_attention": (attention, attend),
        "gru": (gru, lambda x: gru(x, training=True)),
        "conv": (conv, lambda x: conv(x, training=True)),
    }
    build_input = np.zeros((1, 2, args.d_model), "float32")
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
    for repeat in range(args.warmup_repeats + args.repeats):
        warmup = repeat < args.warmup_repeats
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
        which = "warm-up" if warmup else f"repeat {repeat - args.warmup_repeats + 1}/{args.repeats}"
        print(f"{which}: {time.perf_counter() - started:.1f} s", flush=True)
    return first_call, times


def summarise(args, parameters, first_call, times):
    """The results of each layer (medians, FLOPs, GFLOP/s, slopes, Table 1 row) and the ratios."""
    lengths = args.lengths
    fitted = fit_lengths(lengths, args.d_model, args.fit_from)
    models = {}
    for name in MODELS:
        medians = [float(np.median(times[name][n])) for n in lengths]
        flops = [train_step_flops(name, n, args.d_model, args.batch_size, args.kernel_size) for n in lengths]
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
