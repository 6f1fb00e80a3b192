"""Fused against explicit attention: one MultiheadAttention's training step, by length, on this machine's backend.

    python benchmarks/fused_attention_speed.py                   # lengths 64, 256, 1024; TensorFlow
    KERAS_BACKEND=jax python benchmarks/fused_attention_speed.py # the same on JAX
    python benchmarks/fused_attention_speed.py --lengths 64 --tokens 512 --rounds 1 --steps 2   # a quick check
    python benchmarks/fused_attention_speed.py --help

What `MultiheadAttention(attention_implementation="auto")` decides on: for each length T (at equal
tokens per batch, `--tokens`), with and without causality, the same layer (D `--width`, H
`--heads`, key-padding mask: the last eighth of every sequence is padding) trained by
`model.train_on_batch` (mean squared error, SGD) through the explicit path (scores, masked
softmax, weighted sum) and through the fused `keras.ops.dot_product_attention`, from the same
weights. The two alternate, `--steps` timed steps each per round (after one untimed step that
compiles), for `--rounds` rounds; the median step time of each gives the ratio fused / explicit
speed (above 1: fused is faster). Float32.

Output: a table on stdout; the JSON (`fused_attention_speed_<backend>.json`: settings, command,
versions, CPU model and flags, every step time) in `--out`.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np

from keras_transformer.layers.attention import MultiheadAttention

IMPLEMENTATIONS = ("explicit", "fused")


def parse_list(text):
    """Comma-separated positive ints."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints; got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive ints; got {text!r}")
    return values


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--lengths", type=parse_list, default="64,256,1024", help="Comma-separated lengths T.")
    parser.add_argument("--tokens", type=int, default=4096, help="Tokens per batch (batch = tokens / T, at least 1).")
    parser.add_argument("--width", type=int, default=512, help="Model width D.")
    parser.add_argument("--heads", type=int, default=8, help="Heads H (D / H per head).")
    parser.add_argument("--steps", type=int, default=5, help="Timed steps of each implementation per round.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of alternating implementations.")
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results.")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    common.check_at_least(parser, args, ("tokens", "width", "heads", "steps", "rounds"), 1)
    if args.width % args.heads:
        parser.error(f"--width must be divisible by --heads. Received: {args.width}, {args.heads}")
    return args


def compiled(implementation, length, causality, width, heads, weights=None):
    """A model of one attention layer, `[B, T, D] -> [B, T, D]`, compiled for SGD on mean squared error."""
    inputs = keras.Input((length, width))
    layer = MultiheadAttention(num_heads=heads, causality=causality, attention_implementation=implementation)
    model = keras.Model(inputs, layer(inputs, inputs))
    if weights is not None:
        model.set_weights(weights)
    model.compile(keras.optimizers.SGD(1e-4), "mse")
    return model


def step_seconds(model, x, y, steps):
    """The seconds of each of `steps` training steps."""
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        model.train_on_batch(x, y)
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(args, length, causality):
    """Every timed step of both implementations at one length, and the speed ratio fused / explicit."""
    batch = max(1, args.tokens // length)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, args.width)).astype("float32")
    x[:, length - length // 8 :] = 0.0  # padding: an all-zero vector is padding for the sign masks
    y = rng.normal(size=x.shape).astype("float32")
    keras.utils.set_random_seed(0)
    models = {"explicit": compiled("explicit", length, causality, args.width, args.heads)}
    models["fused"] = compiled("fused", length, causality, args.width, args.heads, models["explicit"].get_weights())
    for model in models.values():
        model.train_on_batch(x, y)  # compiles
    seconds = {name: [] for name in IMPLEMENTATIONS}
    for round_ in range(args.rounds):
        for name in IMPLEMENTATIONS if round_ % 2 == 0 else IMPLEMENTATIONS[::-1]:
            seconds[name] += step_seconds(models[name], x, y, args.steps)
    medians = {name: float(np.median(values)) for name, values in seconds.items()}
    return {
        "length": length,
        "causality": causality,
        "batch": batch,
        "median_ms": {name: 1000 * value for name, value in medians.items()},
        "fused_over_explicit_speed": medians["explicit"] / medians["fused"],
        "step_ms": {name: [1000 * s for s in values] for name, values in seconds.items()},
    }


def main(argv=None):
    """Run the comparison; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    backend = keras.backend.backend()
    started, load_start = time.perf_counter(), os.getloadavg()
    runs = []
    for length in args.lengths:
        for causality in (False, True):
            runs.append(measure(args, length, causality))
            run = runs[-1]
            print(
                f"T {length:>5} causal {str(causality):<5} batch {run['batch']:>4}: explicit "
                f"{run['median_ms']['explicit']:8.1f} ms, fused {run['median_ms']['fused']:8.1f} ms, "
                f"fused / explicit speed {common.format_ratio(run['fused_over_explicit_speed'])}",
                flush=True,
            )
    print(f"\n{common.cpu_line(cpu)}; Keras on {backend}")
    results = {
        "settings": {key: value for key, value in vars(args).items() if key != "argv"},
        "backend": backend,
        "command": common.command_line(args.argv),
        "versions": common.package_versions({"keras": "keras", "numpy": "numpy", backend: backend}),
        **common.machine(cpu),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": time.perf_counter() - started,
        "runs": runs,
    }
    print(f"wrote {common.write_json(Path(args.out) / f'fused_attention_speed_{backend}.json', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
