"""The summary of the attention study's runs, per model, and its tables on stdout.

`summarise` gathers each model's runs (one per seed) into their figures and means and the ratios
to the baseline CNN ("none") when it ran; `print_report` prints the table per model, the STN's
placement, the SE and SK channel weights and, with `--curve-every`, the learning curves.
"""

import os

import numpy as np

from benchmarks.harness import machine, results


def summarise(runs, attentions):
    """Per model: each seed's figures, their means, and the ratios to the baseline ("none") if it ran."""
    models = {}
    for attention in attentions:
        mine = [run for run in runs if run["attention"] == attention]
        models[attention] = {
            "label": mine[0]["label"],
            "num_classes": mine[0]["num_classes"],
            "map_kind": mine[0]["map_kind"],
            "seeds": [run["seed"] for run in mine],
            "parameters": mine[0]["parameters"],
            "forward_flops": mine[0]["forward_flops"],
            "test_accuracy_percent": [run["test_accuracy_percent"] for run in mine],
            "test_accuracy_percent_mean": float(np.mean([run["test_accuracy_percent"] for run in mine])),
            "ms_per_step_median": float(np.median([run["ms_per_step_median"] for run in mine])),
            "pointing": {key: float(np.mean([run["pointing"][key] for run in mine])) for key in mine[0]["pointing"]},
        }
        if "curve" in mine[0]:
            models[attention]["curve"] = [
                {
                    "step": point["step"],
                    "validation_accuracy_percent": [run["curve"][i]["validation_accuracy_percent"] for run in mine],
                    "validation_accuracy_percent_mean": float(
                        np.mean([run["curve"][i]["validation_accuracy_percent"] for run in mine])
                    ),
                    "train_loss_mean": float(np.mean([run["curve"][i]["train_loss"] for run in mine])),
                }
                for i, point in enumerate(mine[0]["curve"])
            ]
        if "channel_weights" in mine[0]:
            models[attention]["channel_weights"] = {
                key: float(np.mean([run["channel_weights"][key] for run in mine]))
                for key in ("min", "max", "class_spread", "image_spread")
            }
        if attention == "stn":
            models[attention]["stn"] = {
                key: float(np.mean([run["stn"][key] for run in mine])) for key in mine[0]["stn"]
            }
    if "none" in models:
        base = models["none"]
        for summary in models.values():
            for key, value in (
                ("accuracy_over_baseline", "test_accuracy_percent_mean"),
                ("ms_per_step_over_baseline", "ms_per_step_median"),
                ("flops_over_baseline", "forward_flops"),
            ):
                summary[key] = summary[value] / base[value] if base[value] else None  # None: the baseline's is 0
    return models


def show_ratio(value, width=7):
    """A ratio to the baseline as the table prints it, or "n/a" when there is none."""
    return "n/a".rjust(width) if value is None else results.format_ratio(value, width)


def blocks_label(args):
    """The CNN's blocks in words: `"residual blocks"`, with `" + batch norm"` under `--batch-norm true`."""
    return f"{args.block} blocks" + (" + batch norm" if args.batch_norm else "")


def print_report(args, models, cpu):
    """The table per model, and the STN's placement figures."""
    print()
    print(
        f"{args.size}x{args.size} canvases, {args.glyphs}, clutter {args.clutter}; {blocks_label(args)}; "
        f"{args.steps} steps of "
        f"{args.batch_size}, Adam {args.learning_rate}, float32; {args.test_size} test canvases; "
        f"seeds {','.join(map(str, args.seeds))}; {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
    per_seed = max(18, 2 + 8 * len(args.seeds) - 3)  # the widest, "100.0 / 100.0 / 100.0", and two spaces
    header = (
        f"{'model':<22}{'params':>8}{'MFLOPs':>8}{'acc % per seed':>{per_seed}}{'mean':>7}{'/base':>7}"
        f"{'ms/step':>9}{'/base':>7}  {'map':<18}{'in box':>7}{'uniform':>8}{'lift':>7}{'hits':>6}"
    )
    print(header)
    print("-" * len(header))
    for summary in models.values():
        pointing = summary["pointing"]
        seeds = " / ".join(f"{a:.1f}" for a in summary["test_accuracy_percent"])
        print(
            f"{summary['label']:<22}{summary['parameters']:>8,}{summary['forward_flops'] / 1e6:>8.2f}"
            f"{seeds:>{per_seed}}{summary['test_accuracy_percent_mean']:>7.1f}"
            f"{show_ratio(summary.get('accuracy_over_baseline'))}{summary['ms_per_step_median']:>9.1f}"
            f"{show_ratio(summary.get('ms_per_step_over_baseline'))}  "
            f"{summary['map_kind']:<18}{pointing['mass_in_box']:>7.3f}{pointing['uniform_share']:>8.3f}"
            f"{pointing['lift']:>6.2f}x{pointing['pointing_hit_rate']:>6.2f}"
        )
    if "stn" in models:
        stn = models["stn"]["stn"]
        print(
            f"STN placement (mean of seeds): glimpse centre {stn['centre_error_px']:.1f} px from the glyph's centre "
            f"(the identity's: {stn['identity_centre_error_px']:.1f} px); glimpse side "
            f"{stn['side_over_glyph_height']:.2f}x the glyph's height (the identity's: "
            f"{stn['identity_side_over_glyph_height']:.2f}x); rotation: correlation with the glyph's "
            f"{stn['angle_correlation']:.2f}, mean error {stn['angle_error_degrees']:.1f} degrees (the identity's: "
            f"{stn['identity_angle_error_degrees']:.1f})"
        )
    for summary in models.values():
        if "channel_weights" in summary:
            weights = summary["channel_weights"]
            print(
                f"{summary['label']} channel weights of the last block (mean of seeds): from {weights['min']:.3f} to "
                f"{weights['max']:.3f}; spread across the class means {weights['class_spread']:.4f}, across single "
                f"canvases {weights['image_spread']:.4f}"
            )
    if args.curve_every:
        steps = [point["step"] for point in next(iter(models.values()))["curve"]]
        print(f"\nValidation accuracy % ({args.validation_size} canvases; mean of seeds) after each number of steps:")
        print(f"{'model':<22}" + "".join(f"{step:>7}" for step in steps))
        for summary in models.values():
            row = "".join(f"{point['validation_accuracy_percent_mean']:>7.1f}" for point in summary["curve"])
            print(f"{summary['label']:<22}{row}")
