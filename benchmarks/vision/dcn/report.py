"""The report of the DCN study: a line per run, the table of every run, and the summary per model for the JSON.

With several `--hint-weight`s a seed trains one DCN per weight; the one validation chose (its
result's `"chosen"`) is the DCN of the summary, the others are listed beside it.
"""

import numpy as np

from benchmarks.harness import machine

LABELS = {"coarse": "coarse only", "fine": "fine everywhere", "dcn": "DCN"}


def run_line(result):
    """The line printed as a run finishes."""
    line = (
        f"seed {result['seed']} {result['mode']:<6} accuracy {result['test_accuracy_percent']:5.1f}% "
        f"(validation {result['validation_accuracy_percent']:5.1f}%)  "
        f"{result['flops'] / 1e6:7.2f} MFLOPs  {result['ms_per_step_median']:6.1f} ms/step  "
        f"{result['train_seconds']:.0f} s"
    )
    if result["mode"] == "dcn":
        glyph = result["on_glyph"]
        line += (
            f"  hint {result['hint_weight']:g}  k {result['k_chosen']}  "
            f"on glyph {glyph['share']:.2f} (chance {glyph['chance']:.2f})  "
            f"coarse head {result['coarse_head_test_accuracy_percent']:.1f}%  "
            f"random patches {result['random_patches_test_accuracy_percent']:.1f}%"
        )
    return line


def chosen(runs, mode):
    """The runs of `mode`: for the DCN, the one of each seed that validation chose."""
    return [run for run in runs if run["mode"] == mode and run.get("chosen", True)]


def summarise(runs, models):
    """Per model: each seed's accuracy and FLOPs, their means, and for the DCN its hint weight, k and patch scores.

    The DCN's entry holds the run validation chose in each seed, and `"by_hint_weight"` the test
    and validation accuracy of every weight tried, seed by seed.
    """
    summary = {}
    for mode in models:
        mine = chosen(runs, mode)
        entry = {
            "label": LABELS[mode],
            "seeds": [run["seed"] for run in mine],
            "test_accuracy_percent": [run["test_accuracy_percent"] for run in mine],
            "mean_test_accuracy_percent": float(np.mean([run["test_accuracy_percent"] for run in mine])),
            "validation_accuracy_percent": [run["validation_accuracy_percent"] for run in mine],
            "flops": [run["flops"] for run in mine],
            "profiler_flops": [run["profiler_flops"] for run in mine],
        }
        if mode == "dcn":
            entry["hint_weight"] = [run["hint_weight"] for run in mine]
            entry["by_hint_weight"] = {
                f"{weight:g}": {
                    key: [run[key] for run in runs if run["mode"] == mode and run["hint_weight"] == weight]
                    for key in ("test_accuracy_percent", "validation_accuracy_percent")
                }
                for weight in dict.fromkeys(run["hint_weight"] for run in runs if run["mode"] == mode)
            }
            entry["k_chosen"] = [run["k_chosen"] for run in mine]
            entry["on_glyph_share"] = [run["on_glyph"]["share"] for run in mine]
            entry["on_glyph_chance"] = [run["on_glyph"]["chance"] for run in mine]
            entry["coarse_head_test_accuracy_percent"] = [run["coarse_head_test_accuracy_percent"] for run in mine]
            entry["random_patches_test_accuracy_percent"] = [
                run["random_patches_test_accuracy_percent"] for run in mine
            ]
        summary[mode] = entry
    return summary


def print_report(args, runs, cpu):
    """The table of every run: accuracy, FLOPs and their ratio to each bound of the same seed."""
    print()
    print(machine.cpu_line(cpu))
    print(
        f"{args.size}x{args.size} canvases, glyphs {args.object_scale[0]:.2f}-{args.object_scale[1]:.2f} of the side, "
        f"{args.clutter} fragments; {args.patch_size}-pixel patches; {args.steps} steps of {args.batch_size}, "
        f"Adam {args.learning_rate:g}; DCN trained with k = {args.k}"
    )
    print(
        f"coarse network: {args.coarse_downsample}, filters {','.join(map(str, args.coarse_filters))}; top pooling "
        f"{args.top_pooling}; batch norm in {' and '.join(args.batch_norm) or 'neither network'}; * the hint weight "
        "validation chose"
    )
    print(
        f"{'model':<18} {'seed':>4} {'val %':>6} {'test acc %':>10} {'MFLOPs':>9} {'/ coarse':>9} {'/ fine':>7} "
        f"{'k':>3} {'on glyph':>9} {'chance':>7}"
    )
    for seed in args.seeds:
        bounds = {run["mode"]: run["flops"] for run in runs if run["seed"] == seed}
        for run in (run for run in runs if run["seed"] == seed):
            label = LABELS[run["mode"]]
            if run["mode"] == "dcn":
                label += f" hint {run['hint_weight']:g}{'*' if run.get('chosen') else ''}"
            over_coarse = f"{run['flops'] / bounds['coarse']:.2f}x" if "coarse" in bounds else "n/a"
            over_fine = f"{run['flops'] / bounds['fine']:.3f}x" if "fine" in bounds else "n/a"
            k, glyph, chance = "", "", ""
            if run["mode"] == "dcn":
                k = str(run["k_chosen"])
                glyph, chance = f"{run['on_glyph']['share']:.2f}", f"{run['on_glyph']['chance']:.2f}"
            print(
                f"{label:<18} {seed:>4} {run['validation_accuracy_percent']:>6.1f} "
                f"{run['test_accuracy_percent']:>10.1f} {run['flops'] / 1e6:>9.2f} "
                f"{over_coarse:>9} {over_fine:>7} {k:>3} {glyph:>9} {chance:>7}"
            )
    for run in runs:
        if run["mode"] == "dcn":
            by_k = "  ".join(
                f"k={k}: {run['validation_accuracy_by_k'][k]:.1f}/{run['test_accuracy_by_k'][k]:.1f}"
                for k in run["validation_accuracy_by_k"]
            )
            print(f"DCN seed {run['seed']} hint {run['hint_weight']:g} validation/test accuracy % by k: {by_k}")
