"""The parent side of the study: the workers' alternating rounds and their summary.

`compare` runs one precision at one length: it starts a `--worker` process of the study per
model of `--models` (`start_worker`), has them train a round each in turn, the order alternating every
round (ABBA: `alternate_rounds`), and summarises each one's counted rounds (`summarise_rounds`:
median target tokens/s, step time, model TFLOP/s, MFU, peak memory: the process's resident set and,
on a GPU, the device's), the ratio ours / keras-hub
and, with the shared part's worker, the split of a step (`step_split`). The matmul peak that the MFU
divides by is measured before, by the parent, alone (`benchmarks.harness.matmul_peak`).
"""

import numpy as np

from benchmarks.harness import results, workers
from benchmarks.harness.training_workload import MODELS, SHARED, model_config, step_flops, target_tokens_per_step


def start_worker(args, name, precision):
    """A `--worker` subprocess of the study for one model, precision and length (`args.length`), built and ready.

    Returns:
        `(worker, ready)`: the `workers.JsonLinesWorker` (one round per `request("round")`) and
        its ready line: the model's `parameters` and the `towers` of its step.
    """
    command = workers.worker_command(
        __package__, args.argv, "--worker", name, "--worker-precision", precision, "--worker-length", str(args.length)
    )
    worker = workers.JsonLinesWorker(command, name)
    return worker, worker.answer()


def alternate_rounds(args, precision):
    """Train the workers of one precision a round at a time, in ABBA order.

    Returns:
        `(ready, rounds)`: `{name: ready line}` (`start_worker`) and `{name: [round report, ...]}`,
        the counted rounds only (the warm-up rounds are printed, not kept).
    """
    started, ready = [], {}
    try:
        for name in args.models:
            worker, ready[name] = start_worker(args, name, precision)
            started.append(worker)
        rounds = {worker.name: [] for worker in started}
        for index in range(args.warmup_rounds + args.rounds):
            warmup = index < args.warmup_rounds
            for worker in started if index % 2 == 0 else started[::-1]:
                report = worker.request("round")
                if not warmup:
                    rounds[worker.name].append(report)
                print(
                    f"  {precision} round {index + 1}{' (warm-up)' if warmup else ''} "
                    f"{worker.name:<9} {report['target_tokens'] / report['seconds']:>8,.0f} target tokens/s, "
                    f"loss {report['loss']:.3f}",
                    flush=True,
                )
    finally:
        for worker in started:
            worker.close()
    return ready, rounds


def summarise_rounds(args, reports, ready, flops, peak, precision):
    """One worker's results from its counted rounds: medians, MFU, peak memory, last loss.

    `ready` is its ready line (`start_worker`): the parameter count and the towers of its step.

    MFU is given against the float32 matmul peak and against the peak of `precision`'s compute
    dtype (`mfu_own_peak`: the bfloat16 peak for mixed_bfloat16). `peak_device_mib` is None on a CPU.
    """
    per_second = np.array([r["target_tokens"] / r["seconds"] for r in reports])
    step_seconds = np.median([r["seconds"] / args.steps for r in reports])
    own_peak = peak["bfloat16" if "bfloat16" in precision else "float32"]
    device_mib = [r["peak_device_mib"] for r in reports if r.get("peak_device_mib") is not None]
    return {
        "parameters": ready["parameters"],
        "towers": ready.get("towers", 1),
        "target_tokens_per_second_median": float(np.median(per_second)),
        "target_tokens_per_second_rounds": per_second.round(1).tolist(),
        "step_ms_median": float(1000 * step_seconds),
        "model_tflops_per_second": flops / step_seconds / 1e12,
        "mfu_fp32_peak": flops / step_seconds / peak["float32"],
        "mfu_own_peak": flops / step_seconds / own_peak,
        "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
        "peak_device_mib": max(device_mib) if device_mib else None,
        "final_loss": reports[-1]["loss"],
    }


def compare(args, precision, flops_per_step, peak):
    """Alternate the workers of one precision and summarise their rounds.

    Returns:
        `{name: results}` of each worker, with both models `"ours_over_keras_hub"` (the ratio
        of the median tokens/s) and, with the shared part's worker too, `"split"`.
    """
    ready, rounds = alternate_rounds(args, precision)
    summary = {}
    for name, reports in rounds.items():
        flops = flops_per_step
        if name == SHARED:  # the shared part: the logits' FLOPs only
            flops = step_flops(args, model_config(args), target_tokens_per_step(args), blocks=False)
        summary[name] = summarise_rounds(args, reports, ready[name], flops, peak, precision)
    if all(name in summary for name in MODELS):
        summary["ours_over_keras_hub"] = results.ours_over_keras_hub(summary, "target_tokens_per_second_median")
        if SHARED in summary:
            summary["split"] = step_split(summary)
    return summary


def step_split(results, target=1.2):
    """Split a step into the shared part and each model's blocks.

    Returns:
        The milliseconds of a step in the shared part and in each model's blocks (its step minus
        the shared part's), and the block time ours would need for `target` times keras-hub's
        speed.
    """
    shared, ours, hub = (results[name]["step_ms_median"] for name in (SHARED, *MODELS))
    return {
        "shared_ms": shared,
        "shared_fraction_of_keras_hub_step": shared / hub,
        "ours_blocks_ms": ours - shared,
        "keras_hub_blocks_ms": hub - shared,
        "target_ratio": target,
        "ours_blocks_ms_needed_for_target": hub / target - shared,
    }
