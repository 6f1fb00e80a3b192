"""What the study reports: the table and Table 1 on stdout, the results JSON and the log-log PNG."""

import os

import keras

from benchmarks.attention_family.length_scaling.measure import CONV_PATH_NOTE, FLOP_FORMULAS, MODELS, TABLE_1, label
from benchmarks.harness import machine
from benchmarks.harness.results import command_line, format_ratio


def print_report(args, results, cpu):
    """The table of times, ratios and FLOPs; the slopes; the paper's Table 1."""
    models, ratios = results["models"], results["ratios"]
    print()
    print(
        f"one layer, d {args.d_model}, H {args.num_heads}, batch {args.batch_size}, float32, forward + backward "
        f"(gradients w.r.t. inputs and weights), median of {args.repeats} repeats of {args.steps} steps, "
        f"jit {'on' if args.jit_compile else 'off'}, {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
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
            f"{format_ratio(ratios['self_attention_over_gru'][i], 10)}"
            f"{format_ratio(ratios['self_attention_over_conv'][i], 11)}"
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
        f"One layer, d = {args.d_model}, H = {args.num_heads}, batch {args.batch_size}, float32\n"
        f"{cpu['model'] or 'unknown CPU'}, {os.cpu_count()} CPUs",
        fontsize=10,
    )
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def results_json(args, results, cpu):
    """The results JSON: the settings (under the names of the first runs' JSON), the machine and every figure."""
    settings = {
        "experiment": "scaling",
        "width": args.d_model,
        "heads": args.num_heads,
        "kernel_size": args.kernel_size,
        "batch": args.batch_size,
        "dtype": "float32",
        "repeats": args.repeats,
        "warmup": args.warmup_repeats,
        "steps": args.steps,
        "fit_from": args.fit_from,
        "jit": args.jit_compile,
        "seed": args.seed,
        "backend": keras.backend.backend(),
        "loss": "mean(outputs^2); gradients w.r.t. the inputs and every trainable weight",
        "flops": "matmuls only, 2 per multiply-add; a training step is 3x the forward pass, times the batch",
    }
    return {
        "settings": settings,
        "command": command_line(__package__, args.argv),
        "versions": machine.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        **machine.machine(cpu),
        "peak_rss_mib": machine.peak_rss_mib(),
        **results,
    }
