"""The `scaling` experiment's output, and its run from the layers to the files.

Output: a table (ms per step per layer and length, the ratios self-attention / GRU and
self-attention / conv, GFLOP per training step of each layer), the slopes and Table 1 on stdout;
the JSON (`attention_scores_scaling.json`: settings, versions, CPU model and flags, and per layer
its Table 1 row, FLOP formula, FLOPs, times of every repeat, medians, GFLOP/s, first-call seconds
and slopes; the ratios) and a log-log PNG of ms per step against n, with guides of slope 1 and 2
(`attention_scores_scaling.png`), in the `--out` folder.
"""

import os
from pathlib import Path

import common
import keras
import numpy as np
from attention_scores_scaling import (
    CONV_PATH_NOTE,
    FLOP_FORMULAS,
    MODELS,
    TABLE_1,
    build_layers,
    label,
    measure,
    summarise,
    train_step,
)


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
