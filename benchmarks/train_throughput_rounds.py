"""The parent side of train_throughput.py: the matmul peak, and the workers' alternating rounds.

`matmul_peak` measures the machine's matmul rate, in the parent, alone, before any worker starts.
`compare` runs one precision at one length: it starts a `--worker` process of the script per
model of `--models` (`start_worker`), has them train a round each in turn, the order alternating every
round (ABBA: `alternate_rounds`), and summarises each one's counted rounds (`summarise_rounds`:
median target tokens/s, step time, model TFLOP/s, MFU, peak memory: the process's resident set and,
on a GPU, the device's), the ratio ours / keras-hub
and, with the shared part's worker, the split of a step (`step_split`).
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import common
import numpy as np
from keras import ops
from train_throughput_models import MODELS, SHARED, model_config, step_flops, target_tokens_per_step

SCRIPT = Path(__file__).with_name("train_throughput.py")  # what the workers run, with --worker NAME


def matmul_peak(size, dtype, repeats=5, chain=4):
    """Median FLOP/s of `size`^3 matmuls in `dtype` (after one warm-up), through `keras.ops`."""
    rng = np.random.default_rng(0)
    a = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32")), dtype)
    b = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32") / size**0.5), dtype)

    def run():
        c = a
        for _ in range(chain):
            c = ops.matmul(c, b)
        return float(ops.convert_to_numpy(ops.cast(c[0, 0], "float32")))  # waits for the result

    run()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(chain * 2 * size**3 / (time.perf_counter() - start))
    return float(np.median(rates))


def peak_dtypes(policies):
    """The matmul peaks `policies` need: float32's always, bfloat16's where a bfloat16 policy runs.

    (Under `ONEDNN_MAX_CPU_ISA=AVX2` on a CPU with AVX512-BF16, oneDNN crashes on a bfloat16
    matmul: a float32 run there measures no bfloat16 peak.)
    """
    return ("float32", "bfloat16") if any("bfloat16" in policy for policy in policies) else ("float32",)


def matmul_peaks(size, dtypes=("float32", "bfloat16")):
    """`{dtype: FLOP/s}`: `matmul_peak` of each of `dtypes`, in this process."""
    return {dtype: matmul_peak(size, dtype) for dtype in dtypes}


def describe_peaks(peak):
    """`"float32 N GFLOP/s, bfloat16 M GFLOP/s"`, or "bfloat16 not measured"."""
    bfloat16 = f"{peak['bfloat16'] / 1e9:,.0f} GFLOP/s" if "bfloat16" in peak else "not measured"
    return f"float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, bfloat16 {bfloat16}"


def matmul_peaks_elsewhere(size, dtypes=("float32", "bfloat16")):
    """`matmul_peaks` measured in a fresh process of its own, with the backend's default threads.

    For a process that sets TensorFlow's threads for training towers (one intra-op thread): its
    own matmuls would run on one core, and the peak must be the machine's.
    """
    code = (
        f"import json, sys; sys.path.insert(0, {str(SCRIPT.parent)!r}); from train_throughput_rounds import "
        f"matmul_peaks; print(json.dumps(matmul_peaks({int(size)}, {tuple(dtypes)!r})))"
    )
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if process.returncode:
        raise RuntimeError(f"the matmul peak's process failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def start_worker(args, name, precision):
    """A `--worker` subprocess of this script for one model, precision and length (`args.length`), built and ready.

    Returns:
        `(worker, ready)`: the `common.JsonLinesWorker` (one round per `request("round")`) and
        its ready line: the model's `parameters` and the `towers` of its step.
    """
    command = common.worker_command(
        SCRIPT, args.argv, "--worker", name, "--worker-precision", precision, "--worker-length", str(args.length)
    )
    worker = common.JsonLinesWorker(command, name)
    return worker, worker.answer()


def alternate_rounds(args, precision):
    """Train the workers of one precision a round at a time, in ABBA order.

    Returns:
        `(ready, rounds)`: `{name: ready line}` (`start_worker`) and `{name: [round report, ...]}`,
        the counted rounds only (the warm-up rounds are printed, not kept).
    """
    workers, ready = [], {}
    try:
        for name in args.models:
            worker, ready[name] = start_worker(args, name, precision)
            workers.append(worker)
        rounds = {worker.name: [] for worker in workers}
        for index in range(args.warmup_rounds + args.rounds):
            warmup = index < args.warmup_rounds
            for worker in workers if index % 2 == 0 else workers[::-1]:
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
        for worker in workers:
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
    results = {}
    for name, reports in rounds.items():
        flops = flops_per_step
        if name == SHARED:  # the shared part: the logits' FLOPs only
            flops = step_flops(args, model_config(args), target_tokens_per_step(args), blocks=False)
        results[name] = summarise_rounds(args, reports, ready[name], flops, peak, precision)
    if all(name in results for name in MODELS):
        results["ours_over_keras_hub"] = common.ours_over_keras_hub(results, "target_tokens_per_second_median")
        if SHARED in results:
            results["split"] = step_split(results)
    return results


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
