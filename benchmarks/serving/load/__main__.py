"""The command line of the study: `python -m benchmarks.serving.load` (see `__init__`)."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import flags, machine, results

# The bad requests, in turn: what each sends wrong.
BAD_KINDS = ("unknown input name", "unknown signature", "ids outside the vocabulary")
SERVER_START_TIMEOUT_S = 300


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--models",
        type=Path,
        nargs="+",
        default=[Path("saved_models/transformer")],
        help="Model folders of integer versions (text exports), served in turn; ratios are against the first.",
    )
    parser.add_argument(
        "--max-batch-size",
        type=flags.parse_list(int),
        default=[0],
        help="Comma-separated: each model is served once per value, batching concurrent requests up to that many "
        "rows (padded to a power of 2; 0: no batching), as TF Serving's --enable_batching does.",
    )
    parser.add_argument("--batch-timeout-micros", type=int, default=2000, help="How long a batch waits to fill.")
    parser.add_argument("--clients", type=int, default=8, help="Concurrent clients, one request at a time each.")
    parser.add_argument("--requests", type=int, default=10000, help="Requests per model, all clients together.")
    parser.add_argument("--bad-every", type=int, default=50, help="Every N-th request is a bad one (0: none).")
    parser.add_argument("--memory-every", type=float, default=0.5, help="Seconds between two samples of VmRSS.")
    parser.add_argument("--timeout", type=float, default=60.0, help="Seconds a client waits for one answer.")
    parser.add_argument(
        "--warmup-requests",
        type=int,
        default=200,
        help="Untimed requests first, from all clients (XLA compiles once per batch size: not in the figures).",
    )
    flags.add_seed_flags(parser, help="Seed of the sentences' order.")
    flags.add_output_flags(parser, __package__, "load")
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("clients", "requests"), 1)
    flags.check_at_least(parser, args, ("bad_every", "batch_timeout_micros", "warmup_requests"), 0)
    if min(args.max_batch_size) < 0:
        parser.error(f"--max-batch-size must be >= 0. Received: {args.max_batch_size}")
    if len({model.resolve() for model in args.models}) < len(args.models):
        parser.error(f"--models: a folder given twice. Received: {[str(model) for model in args.models]}")
    for model in args.models:
        if not model.is_dir():
            parser.error(f"--models: no folder {model} (train and export first: python train.py)")
    return args


def request_plan(count, bad_every, seed):
    """The requests, in order: `[("good", text) or ("bad", kind)]`, the same for every model."""
    from keras_transformer.data import dates

    texts = dates.builtin_corpus("test", size=1000, seed=seed)[0]
    texts = [text if i % 20 else ("" if i % 40 else "   ") for i, text in enumerate(texts)]
    order = np.random.default_rng(seed).permutation(count) % len(texts)
    plan, bad = [], 0
    for i in range(count):
        if bad_every and (i + 1) % bad_every == 0:
            plan.append(("bad", BAD_KINDS[bad % len(BAD_KINDS)]))
            bad += 1
        else:
            plan.append(("good", texts[order[i]]))
    return plan


def send(url, model_name, request, timeout):
    """Send one planned request; `(outcome, seconds)`, outcome "ok", "defined error" or "failed: ...".

    A good request is "ok" when it gets a translation; a bad one is a "defined error" when the
    server answers it with a 4xx.
    """
    from keras_transformer.export import IDS_SIGNATURE_KEY, SIGNATURE_KEY
    from keras_transformer.export.clients import RestClient, ServingError

    kind, value = request
    signature, inputs = SIGNATURE_KEY, {"text": [value]}
    if value == "unknown input name":
        inputs = {"sentence": ["march 21, 1987"]}
    elif value == "unknown signature":
        signature = "no_such_signature"
    elif value == "ids outside the vocabulary":
        signature, inputs = IDS_SIGNATURE_KEY, {"source_ids": [[5, 10**6]]}
    client = RestClient(url, model_name=model_name, signature_name=signature, timeout=timeout)
    start = time.perf_counter()
    try:
        outputs = client.predict(inputs)
    except ServingError as error:
        seconds = time.perf_counter() - start
        if kind == "bad" and isinstance(error.code, int) and 400 <= error.code < 500:
            return "defined error", seconds
        return f"failed: {error}", seconds
    seconds = time.perf_counter() - start
    if kind == "bad":
        return "failed: a bad request was answered", seconds
    if "translation" not in outputs or len(outputs["translation"]) != 1:
        return f"failed: no translation in {sorted(outputs)}", seconds
    return "ok", seconds


def resident_mib(pid):
    """The process's resident memory (`VmRSS` of /proc/PID/status) in MiB, or None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class StandInProcess:
    """`python -m benchmarks.harness.stand_in_server NAME=PATH` in a process of its own; a context manager.

    Attributes (once entered): `url` (its REST address), `pid`.
    """

    def __init__(self, name, path, max_batch_size=0, batch_timeout_micros=2000):
        self.name, self.path = name, path
        self.batching = [f"--max-batch-size={max_batch_size}", f"--batch-timeout-micros={batch_timeout_micros}"]

    def __enter__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.harness.stand_in_server", f"{self.name}={self.path}", *self.batching],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=flags.REPOSITORY,
        )
        line = _read_line(self.process.stdout, SERVER_START_TIMEOUT_S)
        if not line:
            self.process.kill()
            raise RuntimeError(f"the stand-in server did not start for {self.path}")
        self.url, self.pid = json.loads(line)["rest_url"], self.process.pid
        return self

    def __exit__(self, *exc_info):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


def _read_line(stream, timeout):
    """One line of `stream`, or "" after `timeout` seconds."""
    found = []
    reader = threading.Thread(target=lambda: found.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else ""


def run_load(url, model_name, plan, clients, timeout, memory=None, memory_every=0.5):
    """Send `plan` with `clients` threads; `(outcomes, seconds per request, wall seconds, memory samples)`.

    `memory`: a `callable() -> MiB`, sampled every `memory_every` seconds with the count of requests
    done, or None.
    """
    outcomes, latencies = [None] * len(plan), [0.0] * len(plan)
    next_index, lock, done = [0], threading.Lock(), threading.Event()

    def client():
        while True:
            with lock:
                index = next_index[0]
                next_index[0] += 1
            if index >= len(plan):
                return
            outcomes[index], latencies[index] = send(url, model_name, plan[index], timeout)

    samples = []

    def sampler(every):
        while not done.wait(every):
            samples.append((min(next_index[0], len(plan)), memory()))

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    if memory is not None:
        samples.append((0, memory()))
        threads.append(threading.Thread(target=sampler, args=(memory_every,), daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads[:clients]:
        thread.join()
    wall = time.perf_counter() - start
    done.set()
    if memory is not None:
        samples.append((len(plan), memory()))
    return outcomes, latencies, wall, samples


def summarize(plan, outcomes, latencies, wall, samples):
    """The figures of one model's run (see the study's docstring)."""
    good = [s for (kind, _), outcome, s in zip(plan, outcomes, latencies) if kind == "good" and outcome == "ok"]
    failures = [outcome for outcome in outcomes if outcome.startswith("failed")]
    p50, p95, p99 = (float(np.percentile(good, q) * 1000) if good else None for q in (50, 95, 99))
    mib = [(done, value) for done, value in samples if value is not None]
    slope = float(np.polyfit([d for d, _ in mib], [v for _, v in mib], 1)[0] * 1000) if len(mib) >= 3 else None
    return {
        "requests": len(plan),
        "good_answered": len(good),
        "bad_with_defined_error": outcomes.count("defined error"),
        "bad_sent": sum(kind == "bad" for kind, _ in plan),
        "failed": len(failures),
        "failures": sorted(set(failures))[:10],
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "p99_over_p50": p99 / p50 if good else None,
        "requests_per_s": len(plan) / wall,
        "wall_s": wall,
        "memory_mib": {
            "first": mib[0][1] if mib else None,
            "last": mib[-1][1] if mib else None,
            "peak": max(v for _, v in mib) if mib else None,
            "slope_per_1000_requests": slope,
            "samples": [[d, round(v, 1)] for d, v in mib],
        },
    }


def main(argv=None):
    """Serve each model in turn, drive it with the clients, print the table and write the JSON."""
    args = parse_args(argv)
    started = results.start()
    print(machine.cpu_line(started.cpu))
    plan = request_plan(args.requests, args.bad_every, args.seed)
    runs = {}
    for path, max_batch_size in [(path, size) for path in args.models for size in args.max_batch_size]:
        batching = f"batches of up to {max_batch_size}" if max_batch_size else "no batching"
        label = str(path) if len(args.max_batch_size) == 1 else f"{path}, {batching}"
        with StandInProcess(path.name, path.resolve(), max_batch_size, args.batch_timeout_micros) as server:
            warmup = [("good", "march 21, 1987")] + [request for request in plan if request[0] == "good"]
            run_load(server.url, path.name, warmup[: max(args.warmup_requests, 1)], args.clients, args.timeout)
            outcomes, latencies, wall, samples = run_load(
                server.url, path.name, plan, args.clients, args.timeout,
                lambda pid=server.pid: resident_mib(pid), args.memory_every,
            )  # fmt: skip
        runs[label] = summary = summarize(plan, outcomes, latencies, wall, samples)
        summary["max_batch_size"] = max_batch_size
        print(
            f"{label}: {summary['requests']} requests from {args.clients} clients in {wall:.1f} s, "
            f"{summary['requests_per_s']:.1f}/s; good {summary['good_answered']}, bad with a defined error "
            f"{summary['bad_with_defined_error']} of {summary['bad_sent']}, failed {summary['failed']}"
        )
        if summary["p50_ms"] is not None:
            print(
                f"  latency p50 {summary['p50_ms']:.1f} ms, p95 {summary['p95_ms']:.1f} ms, "
                f"p99 {summary['p99_ms']:.1f} ms (p99 / p50 {summary['p99_over_p50']:.2f})"
            )
        memory_mib = summary["memory_mib"]
        if memory_mib["slope_per_1000_requests"] is not None:
            print(
                f"  server VmRSS {memory_mib['first']:.0f} -> {memory_mib['last']:.0f} MiB "
                f"(peak {memory_mib['peak']:.0f}), slope {memory_mib['slope_per_1000_requests']:+.2f} MiB per 1,000 "
                "requests"
            )
        for failure in summary["failures"]:
            print(f"  failure: {failure}")
    first_label = next(iter(runs))
    first = runs[first_label]
    ratios = {}
    for name, summary in list(runs.items())[1:]:
        ratios[name] = {
            "first_p50_over_this": first["p50_ms"] / summary["p50_ms"] if summary["p50_ms"] else None,
            "this_requests_per_s_over_first": summary["requests_per_s"] / first["requests_per_s"],
        }
        print(
            f"{name} against {first_label}: p50 {results.format_ratio(ratios[name]['first_p50_over_this'])} "
            f"faster, throughput {results.format_ratio(ratios[name]['this_requests_per_s_over_first'])}"
        )
    path = results.write_json(
        flags.output_path(args),
        {
            "command": results.command_line(__package__, args.argv),
            "server": "the project's stand-in for TF Serving's model server (benchmarks.harness.stand_in_server)",
            "clients": args.clients,
            "bad_every": args.bad_every,
            "batch_timeout_micros": args.batch_timeout_micros,
            "machine": machine.machine(started.cpu),
            "load_average": results.load_average(started),
            "versions": machine.package_versions({"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text"}),
            "models": runs,
            "ratios": ratios,
        },
    )
    print(f"Wrote {path}")
    return 0 if all(summary["failed"] == 0 for summary in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
