"""The report of the scale study: a line per run, the summary per model, and the tables on stdout."""

import numpy as np

from benchmarks.harness import machine
from benchmarks.vision.scale.train import LABELS, TERCILES


def run_line(result):
    """The line printed as a run finishes."""
    by = result["tercile_accuracy_percent"]
    line = (
        f"seed {result['seed']} {result['model']:<9} accuracy {result['test_accuracy_percent']:5.1f}%  "
        f"(small/medium/large {'/'.join(f'{by.get(t, np.nan):.1f}' for t in TERCILES)})  "
        f"{result['forward_flops'] / 1e6:6.2f} MFLOPs  {result['ms_per_step_median']:6.1f} ms/step  "
        f"{result['train_seconds']:.0f} s"
    )
    if "scale_weights" in result:
        log2 = result["scale_weights"]["log2_factor_inside"]
        line += f"  log2 factor in box {'/'.join(f'{log2.get(t, np.nan):.2f}' for t in TERCILES)}"
    return line


def summarise(runs, models):
    """Per model: the seeds' accuracies (overall, by tercile), their mean and spread, FLOPs, parameters."""
    summary = {}
    for name in models:
        mine = [run for run in runs if run["model"] == name]
        accuracy = [run["test_accuracy_percent"] for run in mine]
        summary[name] = {
            "label": LABELS[name],
            "seeds": [run["seed"] for run in mine],
            "test_accuracy_percent": accuracy,
            "mean_accuracy_percent": float(np.mean(accuracy)),
            "accuracy_spread_percent": float(np.max(accuracy) - np.min(accuracy)),
            "tercile_accuracy_percent": {
                t: float(np.mean([run["tercile_accuracy_percent"][t] for run in mine]))
                for t in TERCILES
                if all(t in run["tercile_accuracy_percent"] for run in mine)
            },
            "forward_flops": mine[0]["forward_flops"],
            "parameters": mine[0]["parameters"],
            "ms_per_step_median": float(np.mean([run["ms_per_step_median"] for run in mine])),
        }
    return summary


def print_report(args, models, runs, edges, cpu):
    """The tables on stdout."""
    print()
    print(machine.cpu_line(cpu))
    low, high = (args.object_scale[0] * args.size, args.object_scale[1] * args.size)
    print(
        f"{args.size}x{args.size} canvases, glyphs {low:.0f}-{high:.0f} px, clutter {args.clutter}; factors "
        f"{','.join(map(str, args.factors))}; {args.steps} steps of {args.batch_size}, Adam {args.learning_rate:g}; "
        f"terciles of glyph height: < {edges[0]:.1f} px, {edges[0]:.1f}-{edges[1]:.1f}, >= {edges[1]:.1f}"
    )
    seeds = ", ".join(map(str, args.seeds))
    print(f"\nTest accuracy % (seeds {seeds}; mean; by tercile the mean of seeds):")
    print(f"{'model':<22}{'seeds':>16}{'mean':>7}{'spread':>8}{'small':>7}{'medium':>8}{'large':>7}{'MFLOPs':>8}")
    for name, model in models.items():
        per_seed = "/".join(f"{a:.1f}" for a in model["test_accuracy_percent"])
        by = model["tercile_accuracy_percent"]
        print(
            f"{model['label']:<22}{per_seed:>16}{model['mean_accuracy_percent']:>7.1f}"
            f"{model['accuracy_spread_percent']:>8.1f}{by.get('small', np.nan):>7.1f}{by.get('medium', np.nan):>8.1f}"
            f"{by.get('large', np.nan):>7.1f}{model['forward_flops'] / 1e6:>8.2f}"
        )
    fused = [run for run in runs if "scale_weights" in run and run["model"] != "average"]
    if not fused:
        return
    names = " ".join(f"x{f}" for f in args.factors)
    print(f"\nScale weights ({names}) inside the glyph's box | outside it, and the mean log2 factor inside:")
    for run in fused:
        weights = run["scale_weights"]
        r = weights["height_correlation"]
        r = "n/a" if r is None else f"{r:.2f}"
        print(f"{run['model']} seed {run['seed']} (r of the log2 factor in the box with the glyph's height: {r})")
        for t in TERCILES:
            if t in weights["inside"]:
                inside = " ".join(f"{w:.3f}" for w in weights["inside"][t])
                outside = " ".join(f"{w:.3f}" for w in weights["outside"][t])
                print(f"  {t:<7} {inside} | {outside}   log2 factor {weights['log2_factor_inside'][t]:.2f}")
