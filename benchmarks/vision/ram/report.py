"""The report of the recurrent attention study: the summary per model, and the table on stdout."""

import numpy as np

from benchmarks.harness import machine

# The baselines' names in the runs, and in the report.
BASELINES = {"cnn": "the CNN", "paper_cnn": "the paper's CNN"}


def summarise(runs):
    """Mean and per-seed accuracy of each model: `{name: {"accuracy": [...], "mean": ..., ...}}`."""
    summary = {}
    for run in runs:
        name = f"ram_{run['glimpses']}" if run["model"] == "ram" else run["model"]
        entry = summary.setdefault(name, {"accuracy_by_seed": [], "values_read": run["values_read"]})
        entry["accuracy_by_seed"].append(run["test_accuracy_percent"])
        if "where" in run:
            entry.setdefault("last_glimpse_distance_px", []).append(run["where"]["distance_px"][-1])
            entry["canvas_centre_distance_px"] = run["where"]["canvas_centre_distance_px"]
    for entry in summary.values():
        entry["mean_accuracy_percent"] = float(np.mean(entry["accuracy_by_seed"]))
    return summary


def print_report(args, summary, cpu):
    """Print the accuracy of each model by seed, the values it reads and where RAM's last glimpse lands."""
    print(f"\nRecurrent attention on {args.size}x{args.size} cluttered glyphs; {machine.cpu_line(cpu)}")
    print(f"{args.steps} steps of {args.batch_size}, seeds {args.seeds}; test canvases: {args.test_size}")
    print(f"{'model':<12} {'accuracy % by seed':<24} {'mean':>6} {'values read':>12} {'last glimpse to glyph px':>26}")
    for name, entry in summary.items():
        seeds = " / ".join(f"{a:.1f}" for a in entry["accuracy_by_seed"])
        where = ""
        if "last_glimpse_distance_px" in entry:
            where = " / ".join(f"{d:.1f}" for d in entry["last_glimpse_distance_px"])
            where += f" (centre {entry['canvas_centre_distance_px']:.1f})"
        print(f"{name:<12} {seeds:<24} {entry['mean_accuracy_percent']:>6.1f} {entry['values_read']:>12} {where:>26}")
    for baseline, label in BASELINES.items():
        if baseline not in summary:
            continue
        reference = summary[baseline]["mean_accuracy_percent"]
        for name, entry in summary.items():
            if name.startswith("ram_"):
                lift = entry["mean_accuracy_percent"] - reference
                share = entry["values_read"] / summary[baseline]["values_read"]
                print(f"{name}: {lift:+.1f} points over {label}, reading {share:.0%} of its values")
