"""The parent process of the study: it starts both workers and alternates their rounds.

`start_workers` starts the two `--worker` processes of the study and checks that they made the
same batches and chose the same precision. `race` then has the `ours` worker measure the matmul
peak, alone, and sends both workers each training round of each kind and each generation round
in turn, the order alternating every round (ABBA: `alternate`); `summarise_training` and
`summarise_generation` turn the counted rounds into medians, MFU, peak memory and the ratios
ours / keras-hub.
"""

import json

import numpy as np

from benchmarks.harness.language_peers import GENERATORS
from benchmarks.harness.language_workload import MODELS, model_config, train_step_flops
from benchmarks.harness.results import ours_over_keras_hub
from benchmarks.harness.workers import JsonLinesWorker, worker_command


def start_workers(args):
    """Both `--worker` subprocesses, built and ready: `(workers, ready lines)` in the order of `MODELS`."""
    workers = [JsonLinesWorker(worker_command(__package__, args.argv, "--worker", name), name) for name in MODELS]
    ready = {}
    try:
        for worker in workers:
            ready[worker.name] = worker.answer()
    except BaseException:
        for worker in workers:
            worker.process.kill()
        raise
    for kind in args.kinds:
        sums = {name: answer["checksums"][kind] for name, answer in ready.items()}
        if len(set(sums.values())) != 1:
            raise RuntimeError(f"the workers made different {kind} batches: {sums}")
    policies = {name: answer["precision"]["policy"] for name, answer in ready.items()}
    if len(set(policies.values())) != 1:
        raise RuntimeError(f"the workers chose different precisions: {policies}")
    return workers, ready


def alternate(workers, orders, warmup, label):
    """Send each worker every order in turn, the workers' order alternating (ABBA).

    Args:
        workers: the `JsonLinesWorker`s.
        orders: a function of the round index giving the order (a dict) for that round.
        warmup: the first rounds, answered but not kept.
        label: a function of (round index, worker name, answer) giving the progress line.

    Returns:
        `(kept, first)`: `{name: [answer, ...]}` of the counted rounds, and `{name: answer}` of the
        first round (warm-up or not).
    """
    kept, first = {worker.name: [] for worker in workers}, {}
    for index, order in enumerate(orders):
        for worker in workers if index % 2 == 0 else workers[::-1]:
            answer = worker.request(json.dumps(order))
            first.setdefault(worker.name, answer)
            if index >= warmup:
                kept[worker.name].append(answer)
            print(
                f"  round {index + 1}{' (warm-up)' if index < warmup else ''} {label(worker.name, answer)}", flush=True
            )
    return kept, first


def summarise_training(args, kind, config, rounds, parameters, peak):
    """The training results of one kind: each library's medians, MFU, memory, and the ratio."""
    flops = train_step_flops(config, args.batch_size, args.length)
    results = {}
    for name, reports in rounds.items():
        seconds = np.array([r["seconds"] for r in reports])
        step_seconds = float(np.median(seconds)) / args.steps
        cpu_step_seconds = float(np.median([r["cpu_seconds"] for r in reports])) / args.steps
        results[name] = {
            "parameters": parameters[name],
            "tokens_per_second_median": float(np.median([r["input_tokens"] / s for r, s in zip(reports, seconds)])),
            "tokens_per_second_rounds": [round(r["input_tokens"] / s, 1) for r, s in zip(reports, seconds)],
            "predicted_tokens_per_second_median": float(
                np.median([r["predicted_tokens"] / s for r, s in zip(reports, seconds)])
            ),
            "tokens_per_cpu_second_median": float(np.median([r["input_tokens"] / r["cpu_seconds"] for r in reports])),
            "step_ms_median": 1000 * step_seconds,
            "mfu_fp32_peak": flops / step_seconds / peak["float32"],
            "mfu_fp32_peak_cpu_time": flops / cpu_step_seconds / peak["float32_per_cpu_second"],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
            "final_loss": reports[-1]["loss"],
        }
    results["model_flops_per_step"] = flops
    results["ours_over_keras_hub"] = ours_over_keras_hub(results, "tokens_per_second_median")
    results["ours_over_keras_hub_cpu_time"] = ours_over_keras_hub(results, "tokens_per_cpu_second_median")
    return results


def summarise_generation(args, rounds, checks):
    """The generation results: each generator's median new tokens/s, ratios ours / each keras-hub one."""
    new_tokens = args.batch_size * args.new_tokens
    results = {}
    for name, reports in rounds.items():
        for label in GENERATORS[name]:
            seconds = [r["seconds"][label] for r in reports]
            cpu_seconds = [r["cpu_seconds"][label] for r in reports]
            results[label] = {
                "new_tokens_per_second_median": new_tokens / float(np.median(seconds)),
                "new_tokens_per_cpu_second_median": new_tokens / float(np.median(cpu_seconds)),
                "seconds_rounds": seconds,
                "cpu_seconds_rounds": cpu_seconds,
                "equal_to_uncached": checks[name]["equal_to_uncached"][label],
                "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
            }
    for suffix, key in (("", "new_tokens_per_second_median"), ("_cpu_time", "new_tokens_per_cpu_second_median")):
        ours = results["ours"][key]
        results["ours_over_keras_hub" + suffix] = ours / results["keras-hub"][key]
        results["ours_over_keras_hub_generate" + suffix] = ours / results["keras-hub generate"][key]
    return results


def train_rounds(args, workers, ready, kind, peak):
    """The warm-up and counted training rounds of `kind`, alternating, and their summary."""
    orders = [{"do": "train", "kind": kind}] * (args.warmup_rounds + args.rounds)
    rounds, _ = alternate(
        workers,
        orders,
        args.warmup_rounds,
        lambda name, r: f"{kind} {name:<9} {r['input_tokens'] / r['seconds']:>9,.0f} tokens/s, loss {r['loss']:.3f}",
    )
    parameters = {name: answer["parameters"][kind] for name, answer in ready.items()}
    return summarise_training(args, kind, model_config(args, kind), rounds, parameters, peak)


def generate_rounds(args, workers):
    """The warm-up (and check) call and the counted generation rounds, alternating, and their summary."""
    orders = [{"do": "generate", "index": i} for i in range(1 + args.rounds)]
    rounds, first = alternate(
        workers,
        orders,
        1,
        lambda name, r: (
            "generate "
            + ", ".join(f"{label} {args.batch_size * args.new_tokens / s:,.0f}" for label, s in r["seconds"].items())
            + " new tokens/s"
        ),
    )
    return summarise_generation(args, rounds, first)


def race(args, workers, ready):
    """The matmul peak, then the training rounds of every kind and the generation rounds; closes the workers.

    Args:
        args: the parsed flags.
        workers: the started workers (`start_workers`).
        ready: their ready lines.

    Returns:
        `(peak, training, generation)`: the `ours` worker's matmul peak, `{kind: summary}` of the
        training, and the generation summary (`{}` without the decoder).
    """
    training, generation = {}, {}
    try:
        peak = workers[0].request(json.dumps({"do": "peak"}))  # the other worker waits, idle
        print(
            f"matmul peak: float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, "
            f"{peak['float32_per_cpu_second'] / 1e9:,.0f} GFLOP per CPU-second",
            flush=True,
        )
        for kind in args.kinds:
            training[kind] = train_rounds(args, workers, ready, kind, peak)
        if "decoder" in args.kinds:
            generation = generate_rounds(args, workers)
    finally:
        for worker in workers:
            worker.close()
    return peak, training, generation
