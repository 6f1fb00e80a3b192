"""The report of the saliency study: the summary per model and reference, and its table on stdout."""

import numpy as np

from benchmarks.harness import machine

SCORES = ("mae", "max_f", "pointing_hit_rate")


def summarise(runs):
    """Per model (and reference): each seed's test scores, their mean and their spread (max - min)."""
    models = {}
    for run in runs:
        models.setdefault(run["model"], []).append(run)
    summary = {}
    for name, mine in models.items():
        entry = {"label": mine[0]["label"], "seeds": [run.get("seed") for run in mine]}
        for score in SCORES:
            values = [run["test"][score] for run in mine]
            entry[score] = values
            entry[f"{score}_mean"] = float(np.mean(values))
            entry[f"{score}_spread"] = float(np.max(values) - np.min(values))
        if "chosen_step" in mine[0]:
            entry["chosen_steps"] = [run["chosen_step"] for run in mine]
            entry["parameters"] = mine[0]["parameters"]
            entry["ms_per_step_median"] = float(np.median([run["ms_per_step_median"] for run in mine]))
        if "classifier_test_accuracy_percent" in mine[0]:
            entry["classifier_test_accuracy_percent"] = [run["classifier_test_accuracy_percent"] for run in mine]
        summary[name] = entry
    return summary


def print_report(args, summary, cpu, test, tolerance, chance):
    """The table per model: each seed's scores, their mean and spread; the pointing game's tolerance and chance."""
    print()
    print(machine.cpu_line(cpu))
    print(
        f"Salient-object detection, {args.size}x{args.size} canvases, {args.clutter} fragments, glyph height "
        f"{args.object_scale[0]}-{args.object_scale[1]} of the side; {len(test)} test canvases, mask share "
        f"{test.masks.mean():.3f}; pointing tolerance {tolerance:.2f} px (15/224 x {args.size})"
    )
    print(f"{'model':<38} {'MAE':>17} {'max F (b2=0.3)':>17} {'pointing hits':>17}  seeds; steps chosen")
    for entry in summary.values():
        cells = [
            f"{entry[f'{s}_mean']:.4f} +-{entry[f'{s}_spread'] / 2:.4f}" if len(entry[s]) > 1 else f"{entry[s][0]:.4f}"
            for s in SCORES
        ]
        extra = f"  {entry['seeds']}" if entry["seeds"][0] is not None else "  (no seed)"
        if "chosen_steps" in entry:
            extra += f"; {entry['chosen_steps']}"
        if "classifier_test_accuracy_percent" in entry:
            accuracy = ", ".join(f"{a:.1f}" for a in entry["classifier_test_accuracy_percent"])
            extra += f"; classifier accuracy {accuracy}%"
        print(f"{entry['label']:<38} {cells[0]:>17} {cells[1]:>17} {cells[2]:>17}{extra}")
        if len(entry["mae"]) > 1:
            per_seed = "  ".join(f"{s}: " + ", ".join(f"{v:.4f}" for v in entry[s]) for s in SCORES)
            print(f"{'':<38} each seed  {per_seed}")
    print("(+- half the spread between the seeds' values: mean +- (max - min) / 2)")
    print(f"a random pixel's chance of a pointing hit: {chance:.3f}")
