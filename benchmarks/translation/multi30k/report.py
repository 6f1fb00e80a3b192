"""The report of the Multi30k study: the side-by-side table, the JSON's comparison and the plot.

`print_report` prints the models side by side: parameters, training clock, steps, epochs, target
tokens/s, peak memory, the curve's last score and the test scores (each model's beam search of
`--beam-size`, then both greedy: the same decodings side by side), under a header that names the
run's settings, the CPU model and its matmul flags, and the precision chosen (and why). With both
models, each row ends with the ratio ours / keras-hub or the difference in BLEU, followed by the
minutes at which our curve reached keras-hub's last curve score (`minutes_to_reach`, linear
between curve points) and whether both models trained on the same batches. `comparison` is that
summary for the JSON. `plot_curves` draws BLEU against training minutes, one line per model (and
a dashed one for our weights as trained, when averaged), each model's test score as a star.
"""

import os

from benchmarks.harness import machine, results
from benchmarks.translation.multi30k.data import FINGERPRINT_BATCHES, SOURCE_LANGUAGE, SPLIT_FILES, TARGET_LANGUAGE
from benchmarks.translation.multi30k.scoring import decoding_name


def report_header(args, first):
    """The report's first line: the corpus, budget, model, batching and schedule of the run."""
    dropout = "the preset's" if args.dropout_rate is None else f"{args.dropout_rate:g}"
    averaging = f"weight averaging {args.ema_momentum:g} (ramp {args.ema_ramp:g})" if args.ema_momentum else None
    return (
        f"Multi30k {SOURCE_LANGUAGE}->{TARGET_LANGUAGE}, {args.minutes:g} training minutes per model, preset "
        f"{args.preset}, vocab {first['vocab_sizes'][0]}/{first['vocab_sizes'][1]}, {first['train_pairs']:,} "
        f"training pairs ({first['dropped_pairs']} dropped, > {args.max_source_len}/{args.max_target_len} tokens), "
        "batch "
        f"{f'{args.batch_tokens} tokens' if args.batch_tokens else f'{args.batch_size} sentences'}, warm-up "
        f"{args.warmup_steps}, lr scale {args.learning_rate_scale:g}, {args.policy}, "
        f"jit {'on' if args.jit_compile else 'off'}, "
        f"{os.cpu_count()} CPUs; ours: {args.attention_initialization} attention initialization, "
        f"{averaging or 'no weight averaging'}, "
        f"{f'learning-rate cooldown over the last {args.lr_cooldown:.0%}' if args.lr_cooldown else 'no cooldown'}, "
        f"embedding sharing {args.embedding_sharing}, dropout {dropout}"
        f"{f' raised to {args.late_dropout:g} after {args.late_dropout_epochs:g} epochs' if args.late_dropout else ''}"
        f"; joint vocabulary {'on' if args.joint_vocab else 'off'}"
    )


def report_row(model_results, label, path, style, compare=None):
    """One line of the report's table.

    Args:
        model_results: `{model name: worker result}`, one or both models.
        label: the row's label.
        path: the keys of the value in a worker result (`results.value_at`).
        style: formats a value, e.g. `"{:.2f}".format`.
        compare: with both models, `"ratio"` (ours / keras-hub), `"difference"` (ours -
            keras-hub, in BLEU) or `None`.

    Returns:
        The line, without a newline.
    """
    values = [results.value_at(result, path) for result in model_results.values()]
    line = f"{label:<34}" + "".join(f"{style(value):>18}" for value in values)
    if len(values) == 2 and compare == "ratio":
        line += results.format_ratio(values[0] / values[1], width=18)
    elif len(values) == 2 and compare == "difference":
        line += f"{values[0] - values[1]:>+13.2f} BLEU"
    return line


def print_report(args, model_results, cpu):
    """Both models side by side: training, memory, curve and test scores."""
    names = list(model_results)
    both = len(names) == 2
    first = model_results[names[0]]
    print()
    print(report_header(args, first))
    print(machine.cpu_line(cpu))
    print(f"precision: {args.precision_choice.describe()}")
    header = f"{'':<34}" + "".join(f"{name:>18}" for name in names) + (f"{'ours / keras-hub':>18}" if both else "")
    print(header)
    print("-" * len(header))
    rows = [
        ("parameters", ["parameters"], "{:,}".format, "ratio"),
        ("training minutes (clock)", ["train", "minutes"], "{:.2f}".format),
        ("steps", ["train", "steps"], "{:,}".format, "ratio"),
        ("epochs", ["train", "epochs"], "{:.2f}".format, "ratio"),
        ("target tokens/s (median chunk)", ["train", "target_tokens_per_second_median"], "{:,}".format, "ratio"),
        ("peak memory MiB", ["peak_rss_mib"], "{:,.0f}".format, "ratio"),
        (
            f"curve BLEU, end ({args.curve_split} {args.curve_sentences})",
            ["curve", -1, "bleu"],
            "{:.2f}".format,
            "difference",
        ),
        (f"test_2016 BLEU ({first['test']['sentences']} sent.)", ["test", "bleu"], "{:.2f}".format, "difference"),
        ("  decoding", ["decoding"], str),
        ("test_2016 chrF", ["test", "chrf"], "{:.2f}".format),
        ("test_2016 BLEU, greedy", ["test_greedy", "bleu"], "{:.2f}".format, "difference"),
        ("test_2016 chrF, greedy", ["test_greedy", "chrf"], "{:.2f}".format),
        ("scoring pauses s (curve + test)", ["wall_seconds", "scoring"], "{:.0f}".format),
    ]
    for row in rows:
        print(report_row(model_results, *row))
    print(f"sacreBLEU: {first['test']['bleu_signature']}")
    for score in model_results.get("ours", {}).get("validation_decodings", []):
        decoding = decoding_name(score["beam_size"], score["length_penalty"])
        scores = f"BLEU {score['bleu']:.2f}, chrF {score['chrf']:.2f}"
        print(f"ours on validation ({score['sentences']} sent.), {decoding}: {scores}")
    if both:
        peer_final = model_results["keras-hub"]["curve"][-1]
        reached = minutes_to_reach(model_results["ours"]["curve"], peer_final["bleu"])
        print(
            f"ours reached keras-hub's curve BLEU at {peer_final['minutes']:.1f} min ({peer_final['bleu']:.2f}) "
            + (
                f"at {reached:.1f} min ({reached / peer_final['minutes']:.0%} of the time; linear between curve points)"
                if reached is not None
                else "never"
            )
        )
        same = model_results["ours"]["batch_fingerprint"] == model_results["keras-hub"]["batch_fingerprint"]
        print(f"same batches (first {FINGERPRINT_BATCHES} fingerprinted): {'yes' if same else 'NO'}")


def plot_curves(args, model_results, path):
    """BLEU against training minutes, one line per model (and its test score as a star), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, result in model_results.items():
        plot_model_curve(axes, args, name, result)
    axes.set_xlabel("training minutes (clock paused while scoring)")
    axes.set_ylabel("sacreBLEU")
    axes.set_title(f"Multi30k de->en, preset {args.preset}, {args.policy}, {os.cpu_count()} CPUs")
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_model_curve(axes, args, name, result):
    """One model's curve on `axes`: the scored weights, the trained ones if averaged, the test star."""
    points = result["curve"]
    averaged = "bleu_trained_weights" in points[0]
    minutes = [p["minutes"] for p in points]
    line = axes.plot(
        minutes,
        [p["bleu"] for p in points],
        marker="o",
        label=f"{name}: greedy, first {args.curve_sentences} {SPLIT_FILES[args.curve_split]} sentences"
        + (", averaged weights" if averaged else ""),
    )[0]
    if averaged:
        axes.plot(
            minutes,
            [p["bleu_trained_weights"] for p in points],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{name}: the same, weights as trained (no averaging)",
        )
    axes.plot(
        [points[-1]["minutes"]],
        [result["test"]["bleu"]],
        marker="*",
        markersize=14,
        linestyle="none",
        color=line.get_color(),
        label=f"{name}: all {result['test']['sentences']} {SPLIT_FILES['test']} sentences, {result['decoding']}",
    )


def minutes_to_reach(curve, bleu):
    """The training minutes at which a curve first reaches `bleu`, linear between its points.

    Args:
        curve: the curve points of one model's results, `{"minutes", "bleu"}` each, in order.
        bleu: the score to reach.

    Returns:
        float minutes, or None when the curve never reaches `bleu`.
    """
    before_minutes, before_bleu = 0.0, None
    for point in curve:
        if point["bleu"] >= bleu:
            if before_bleu is None or point["bleu"] == before_bleu:
                return point["minutes"]
            share = (bleu - before_bleu) / (point["bleu"] - before_bleu)
            return before_minutes + share * (point["minutes"] - before_minutes)
        before_minutes, before_bleu = point["minutes"], point["bleu"]
    return None


def comparison(model_results):
    """The JSON's ours-against-keras-hub summary of two models' results.

    The test scores compare like with like: `test_*` each model's beam search of `--beam-size`
    (`test_decodings` names them), `test_greedy_*` both greedy.
    """
    ours, peer = model_results["ours"], model_results["keras-hub"]
    peer_final = peer["curve"][-1]
    reached = minutes_to_reach(ours["curve"], peer_final["bleu"])
    return {
        "ours_minutes_to_keras_hub_final_curve_bleu": reached,
        "keras_hub_curve_minutes": peer_final["minutes"],
        "test_decodings": {"ours": ours["decoding"], "keras-hub": peer["decoding"]},
        **{
            f"{split}_{metric}_ours_minus_keras_hub": round(ours[split][metric] - peer[split][metric], 2)
            for split in ("test", "test_greedy")
            for metric in ("bleu", "chrf")
        },
        "target_tokens_per_second_ours_over_keras_hub": round(
            results.ours_over_keras_hub(model_results, "train", "target_tokens_per_second_median"), 3
        ),
        "steps_ours_over_keras_hub": round(results.ours_over_keras_hub(model_results, "train", "steps"), 3),
        "peak_rss_ours_over_keras_hub": round(results.ours_over_keras_hub(model_results, "peak_rss_mib"), 3),
        "same_batches": model_results["ours"]["batch_fingerprint"] == model_results["keras-hub"]["batch_fingerprint"],
    }
