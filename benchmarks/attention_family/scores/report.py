"""What the study reports: the summary per score, the table on stdout and the results JSON."""

import os
from pathlib import Path

import keras
import numpy as np

from benchmarks.attention_family.scores.train import train_config
from benchmarks.harness import machine
from benchmarks.harness.results import command_line, format_ratio, load_average


def summarise_scores(args, runs_done):
    """Per score: parameters, exact match and BLEU per seed and their means, ms per step, its ratio.

    Args:
        args: the study's flags.
        runs_done: the results of `train_with_score`, each with its step times (`_step_ms`).

    Returns:
        `{score: {...}}` in the order of `--scores`. `ms_per_step_median` is the median over the
        timed steps of all the score's runs, `ms_per_step_over_scaled_dot` its ratio to
        scaled_dot's (None without a scaled_dot run).
    """
    scores = {}
    for score in args.scores:
        mine = sorted(
            (run for run in runs_done if run["score"] == score), key=lambda run: args.seeds.index(run["seed"])
        )
        steps = [ms for run in mine for ms in run["_step_ms"]]
        scores[score] = {
            "seeds": [run["seed"] for run in mine],
            "parameters": [run["parameters"] for run in mine],
            "exact_match_percent": {
                "seeds": [run["exact_match_percent"] for run in mine],
                "mean": float(np.mean([run["exact_match_percent"] for run in mine])),
            },
            "bleu": {"seeds": [run["bleu"] for run in mine], "mean": float(np.mean([run["bleu"] for run in mine]))},
            "ms_per_step_median": float(np.median(steps)) if steps else None,
            "ms_per_step_median_seeds": [run["ms_per_step_median"] for run in mine],
            "wall_seconds": {
                "seeds": [run["wall_seconds"] for run in mine],
                "mean": float(np.mean([run["wall_seconds"] for run in mine])),
            },
        }
    reference = scores.get("scaled_dot", {}).get("ms_per_step_median")
    for summary in scores.values():
        ms = summary["ms_per_step_median"]
        summary["ms_per_step_over_scaled_dot"] = ms / reference if ms and reference else None
    return scores


def format_parameters(counts):
    """A score's parameter count for the table: one number, or "low-high" when the seeds' differ."""
    low, high = min(counts), max(counts)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def print_scores_report(args, scores, cpu):
    """The table: one row per score, parameters, exact match and BLEU per seed and mean, ms per step."""
    steps = args.epochs * args.steps_per_epoch
    print()
    print(
        f"built-in dates corpus, preset {args.preset}, {steps} steps ({args.epochs} x {args.steps_per_epoch}), "
        f"float32, seeds {', '.join(map(str, args.seeds))}, test beam {args.beam_size}, {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
    seeds = args.seeds
    width = max(11, *(len(format_parameters(summary["parameters"])) + 2 for summary in scores.values()))
    header = f"{'score':<12}{'params':>{width}}"
    header += "".join(f"{'EM s' + str(seed):>9}" for seed in seeds) + f"{'EM mean':>9}"
    header += "".join(f"{'BLEU s' + str(seed):>9}" for seed in seeds) + f"{'BLEU mean':>11}"
    header += f"{'ms/step':>9}{'/ scaled_dot':>14}"
    print(header)
    print("-" * len(header))
    for score, summary in scores.items():
        exact, bleu = summary["exact_match_percent"], summary["bleu"]
        ratio = summary["ms_per_step_over_scaled_dot"]
        ms = summary["ms_per_step_median"]
        print(
            f"{score:<12}{format_parameters(summary['parameters']):>{width}}"
            + "".join(f"{value:>9.1f}" for value in exact["seeds"])
            + f"{exact['mean']:>9.1f}"
            + "".join(f"{value:>9.2f}" for value in bleu["seeds"])
            + f"{bleu['mean']:>11.2f}"
            + (f"{ms:>9.2f}" if ms is not None else f"{'-':>9}")
            + (format_ratio(ratio, 14) if ratio is not None else f"{'-':>14}")
        )
    print(
        "EM: exact match (%) of the test split; BLEU: sacreBLEU of the same translations; ms/step: median over the "
        "timed steps of every seed (the first step of each run, which traces, not timed)"
    )


def scores_json(args, order, runs_done, scores, start, wall):
    """The results JSON of the study, `start` its `results.start()` (the load average at the end is read now)."""
    settings = {
        "experiment": "scores",
        "corpus": "builtin",
        "scores": args.scores,
        "preset": args.preset,
        "epochs": args.epochs,
        "steps_per_epoch": args.steps_per_epoch,
        "steps": args.epochs * args.steps_per_epoch,
        "seeds": args.seeds,
        "train_size": args.train_size,
        "beam_size": args.beam_size,
        "precision": "float32",
        "backend": keras.backend.backend(),
        "train_config": train_config(args, args.seeds[0], Path("RUN_DIR")).to_dict(),
        "order": [[seed, score] for seed, score in order],
        "ms_per_step": "from on_train_batch_begin to on_train_batch_end of model.fit, every step but each run's "
        "first (tracing)",
        "exact_match_and_bleu": "keras_transformer.evaluation on the test split, as train.py scores it",
        "bleu_signature": runs_done[0]["bleu_signature"],
    }
    return {
        "settings": settings,
        "command": command_line(__package__, args.argv),
        "versions": machine.package_versions(
            {"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy", "sacrebleu": "sacrebleu"}
        ),
        **machine.machine(start.cpu),
        "load_average": load_average(start),
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": machine.peak_rss_mib(),
        "scores": scores,
        "runs": [
            {key: value for key, value in run.items() if not key.startswith("_") and key != "bleu_signature"}
            for run in runs_done
        ],
    }
