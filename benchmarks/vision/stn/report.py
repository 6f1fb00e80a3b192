"""The report of the ST-CNN study: a line per run, the summary per model, and the tables on stdout."""

import numpy as np

from benchmarks.harness import machine
from benchmarks.vision.stn.train import LABELS


def run_line(result):
    """One run's line on stdout."""
    line = f"seed {result['seed']} {result['label']}: {result['test_accuracy_percent']:.1f}%"
    if "placement" in result:
        p = result["placement"]
        line += (
            f", centre error {p['centre_error_px']:.1f} px (identity {p['identity_centre_error_px']:.1f}),"
            f" side {p['side_over_glyph_height']:.2f} x glyph height, rotation correlation {p['angle_correlation']:.2f}"
        )
    return line + f", {result['train_seconds']:.0f} s"


def summarise(runs, models):
    """Per model: the seeds' test accuracies, their mean and the lift over the CNN's mean, and the placements."""
    summary = {}
    for name in models:
        mine = [r for r in runs if r["model"] == name]
        accuracies = [r["test_accuracy_percent"] for r in mine]
        summary[name] = {
            "label": LABELS[name],
            "seeds": [r["seed"] for r in mine],
            "test_accuracy_percent": accuracies,
            "mean_test_accuracy_percent": float(np.mean(accuracies)),
            "parameters": mine[0]["parameters"],
            "forward_flops": mine[0]["forward_flops"],
            "ms_per_step_median": float(np.mean([r["ms_per_step_median"] for r in mine])),
        }
        if "placement" in mine[0]:
            for key in ("centre_error_px", "identity_centre_error_px", "side_over_glyph_height", "angle_correlation"):
                summary[name][key] = [r["placement"][key] for r in mine]
    if "none" in summary:
        for entry in summary.values():
            entry["lift_over_cnn_points"] = [
                a - b for a, b in zip(entry["test_accuracy_percent"], summary["none"]["test_accuracy_percent"])
            ]
    return summary


def print_report(args, summary, cpu):
    """The tables on stdout."""
    print(f"\n{machine.cpu_line(cpu)}")
    seeds = ", ".join(map(str, args.seeds))
    print(
        f"{args.size}x{args.size} canvases, glimpse {args.glimpse}x{args.glimpse}, {args.steps} steps of "
        f"{args.batch_size}, Adam {args.learning_rate:g}; test accuracy per seed ({seeds})"
    )
    print(f"{'model':<20} {'test accuracy %':<22} {'vs CNN (points)':<20} {'params':>9} {'MFLOPs':>8} {'ms/step':>8}")
    for entry in summary.values():
        accuracies = " / ".join(f"{a:.1f}" for a in entry["test_accuracy_percent"])
        lift = " / ".join(f"{d:+.1f}" for d in entry.get("lift_over_cnn_points", [])) or "-"
        print(
            f"{entry['label']:<20} {accuracies:<22} {lift:<20} {entry['parameters']:>9,} "
            f"{entry['forward_flops'] / 1e6:>8.2f} {entry['ms_per_step_median']:>8.1f}"
        )
    for entry in summary.values():
        if "centre_error_px" in entry:
            errors = " / ".join(f"{e:.1f}" for e in entry["centre_error_px"])
            identity = " / ".join(f"{e:.1f}" for e in entry["identity_centre_error_px"])
            sides = " / ".join(f"{e:.2f}" for e in entry["side_over_glyph_height"])
            angles = " / ".join(f"{e:.2f}" for e in entry["angle_correlation"])
            print(f"{entry['label']}: glimpse centre error {errors} px (identity {identity}); side over glyph height "
                  f"{sides}; rotation correlation {angles}")  # fmt: skip
