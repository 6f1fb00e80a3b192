"""Where a training step's time goes: our model's step, op by op, at several lengths, under JAX or TensorFlow.

    KERAS_BACKEND=jax python benchmarks/step_breakdown.py                     # small preset, lengths 64 256 1024
    KERAS_BACKEND=jax python benchmarks/step_breakdown.py --task lm --precision mixed_bfloat16
    python benchmarks/step_breakdown.py --length 24 --tokens-per-step 1536    # TensorFlow: train_throughput's step
    bash benchmarks/gpu.sh profile                                            # base preset on a GPU

What runs under JAX (XLA makes the step one program whose ops can be named):

- For each `--length`, at `--tokens-per-step` tokens per step (batch = tokens // length), our model
  of `--task` (train_throughput_models.py: the same configs, batches and model FLOPs as
  train_throughput.py) is compiled with `compile_transformer(jit_compile=True)` and trained with
  `model.fit`: one warm-up round (the XLA compile), `--rounds` timed rounds of `--steps` steps
  (the median step time, MFU against the measured matmul peak of the precision's compute dtype),
  then `--trace-steps` steps under `jax.profiler.trace`.
- The compiled step's optimized HLO is dumped by XLA (`--xla_dump_to`, set by this script before
  JAX starts), and every op the profiler timed is looked up there: its kind (a matmul: a dot or
  convolution, or a fusion or library call around one; an attention kernel: a fused attention
  custom call; else the rest: elementwise, reductions, copies) and its `op_name`, the JAX name
  stack of the Keras layers that emitted it. That path gives the op's phase (forward, backward:
  `transpose(jvp(...))`, optimizer update) and its part of the model:

    attention core      scores, mask, softmax, weighted sum and head reshapes, per kind of
                        attention (encoder self, decoder self (causal), cross; the LM's causal self)
    attention proj.     the query, key, value and output projections
    feed-forward        both layers and the activation
    layer norm          every LayerNorm
    embeddings          token embeddings, positions, their dropout
    logits and loss     the output projection, the loss
    optimizer           Adam's update of every weight
    other               what no layer claims (casts, masks of the inputs, the metrics)

- The report gives, per length: the step's wall-clock time, the ops' busy time per step (on a
  CPU the sum over its threads, so it can exceed the wall clock), the share of the busy time in
  each part and phase, the share in matmuls, and the `--top` ops with their paths.

Under TensorFlow (its default step, no XLA: the one train_throughput.py times, in one training
tower per core as `train.py` runs it, or with `--threads default` TensorFlow's own threads) the
same rounds run, traced with `tf.profiler`; each op the executor ran is named by its path of name scopes (Keras's
layers, `gradient_tape/` for the backward pass, the optimizer's scope for the update) and its op
type (a matmul: `MatMul`, `BatchMatMul`, oneDNN's fused matmuls, convolutions, einsums). The
executor runs independent ops on two threads at once, so here too the busy time can exceed the
wall clock.

Results go to `--out` as JSON; `--trace DIR` keeps each length's profiler trace there (for
TensorBoard's profile plugin or Perfetto), and under JAX the HLO dump. Peer models are not broken down:
their layers have other names. The figures are the profiler's: op times on a GPU are the device's
kernel times; on a CPU they are the thunks' wall-clock spans on each thread.
"""

import argparse
import collections
import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

DUMP_FLAG = "--xla_dump_to"


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    import common
    from train_throughput_models import TASKS

    from keras_transformer.config import PRECISIONS, PRESETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--task", default="translation", choices=TASKS, help="Our encoder-decoder or decoder-only model."
    )
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size.")
    parser.add_argument("--vocab", type=int, default=8000, help="Vocabulary size V.")
    parser.add_argument(
        "--length", type=int, nargs="+", default=[64, 256, 1024], help="Sequence lengths to break down."
    )
    parser.add_argument("--tokens-per-step", type=int, default=4096, help="Batch size at each length = this // length.")
    parser.add_argument(
        "--precision", default="float32", choices=[p for p in PRECISIONS if p != "auto"], help="Dtype policy."
    )
    parser.add_argument(
        "--attention-dropout-rate",
        type=float,
        help="Dropout on the attention weights (default: the preset's, the tutorial's); 0 lets the fused "
        "attention run in training where auto chooses it.",
    )
    parser.add_argument("--steps", type=int, default=10, help="Training steps per timed round.")
    parser.add_argument("--rounds", type=int, default=3, help="Timed rounds per length (the median step).")
    parser.add_argument("--trace-steps", type=int, default=3, help="Steps traced by the profiler per length.")
    parser.add_argument("--batches", type=int, default=4, help="Distinct synthetic batches, cycled.")
    parser.add_argument("--top", type=int, default=12, help="Ops listed per length, the longest first.")
    parser.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    parser.add_argument(
        "--threads",
        default="towers",
        choices=["towers", "default"],
        help="TensorFlow's threads: towers (as train.py and train_throughput.py's ours set them: one training tower "
        "per core where that applies, the matmul peak measured in a process of its own) or TensorFlow's default.",
    )
    parser.add_argument(
        "--trace", help="Keep the profiler traces and the HLO dump in this folder (default: a temporary one)."
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/step_breakdown.json", help="JSON results file.")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.jit, args.batch_size = True, None  # what train_throughput_models reads
    common.check_at_least(parser, args, ("vocab", "steps", "rounds", "trace_steps", "batches", "top", "peak_size"), 1)
    for length in args.length:
        if length < 2 or args.tokens_per_step < length:
            parser.error(
                f"every --length must be >= 2 and <= --tokens-per-step ({args.tokens_per_step}). Received: {length}"
            )
    return args


# ---------------------------------------------------------------- the HLO dump: what each op is


INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+) = .*?\b(?P<opcode>[a-z][a-z0-9\-]*)\(")
COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+) .*\{\s*$")
MATMUL_OPCODES = {"dot", "convolution"}


def parse_hlo(text):
    """The instructions of an optimized HLO module's text: `{name: {"opcode", "op_name", "kind"}}`.

    `kind` is "matmul" for a dot or convolution, a fusion whose computations hold one, or a
    library call to a matmul (cuBLAS, oneDNN); "attention kernel" for a fused attention call
    (cuDNN's flash attention); "other" for the rest.
    """
    opcodes, calls, instructions, current = collections.defaultdict(set), collections.defaultdict(set), {}, None
    for line in text.splitlines():
        header = COMPUTATION.match(line)
        if header and " = " not in line:
            current = header.group("name")
            continue
        match = INSTRUCTION.match(line)
        if not match or current is None:
            continue
        name, opcode = match.group("name"), match.group("opcode")
        target = re.search(r'custom_call_target="([^"]+)"', line)
        if opcode == "custom-call" and target:
            opcode = f"custom-call:{target.group(1)}"
        called = set(re.findall(r"(?:calls|to_apply)=%?([\w.\-]+)", line))
        opcodes[current].add(opcode)
        calls[current] |= called
        op_name = re.search(r'op_name="([^"]*)"', line)
        instructions[name] = {"opcode": opcode, "op_name": op_name.group(1) if op_name else "", "calls": called}

    def under(computations, seen):
        found = set()
        for computation in computations - seen:
            seen.add(computation)
            found |= opcodes[computation] | under(calls[computation], seen)
        return found

    for info in instructions.values():
        info["kind"] = op_kind({info["opcode"]} | under(info.pop("calls"), set()))
    return instructions


def op_kind(opcodes):
    """The kind of an op, "matmul", "attention kernel" or "other", from the opcodes it runs (see `parse_hlo`)."""
    library_calls = " ".join(opcode for opcode in opcodes if opcode.startswith("custom-call")).lower()
    if any(word in library_calls for word in ("fmha", "attention", "flash")):
        return "attention kernel"
    if opcodes & MATMUL_OPCODES or any(word in library_calls for word in ("gemm", "matmul", "cublas", "onednn")):
        return "matmul"
    return "other"


# ---------------------------------------------------------------- the op_name path: which part of the model


# TensorFlow's graph optimizer (Grappler) names the ops it rewrites by its passes, e.g.
# ".../ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul".
GRAPPLER_SCOPE = re.compile(r"[A-Z]\w*Optimizer/")
OPTIMIZER_SCOPE = re.compile(r"adam|optimizer|sgd", re.IGNORECASE)  # the training's optimizer


def _updates_weights(op_name):
    """Whether an op belongs to the training's optimizer (Grappler's pass names set aside)."""
    return bool(OPTIMIZER_SCOPE.search(GRAPPLER_SCOPE.sub("", op_name)))


def phase_of(op_name):
    """An op's phase, from its path: forward, backward (`transpose(jvp(...))`), update (the optimizer) or other."""
    if _updates_weights(op_name):
        return "update"
    if "transpose(jvp(" in op_name:
        return "backward"
    if "jvp(" in op_name:
        return "forward"
    return "other"


def part_of(op_name):
    """The part of the model an op belongs to, from its path (the module docstring's list)."""
    if _updates_weights(op_name):
        return "optimizer"
    path = re.sub(r"(?:transpose\()?jvp\(([^()]*)\)\)?", r"\1", GRAPPLER_SCOPE.sub("", op_name).lower())
    if "dropout" in path:
        return "dropout"
    if "layer_norm" in path:
        return "layer norm"
    if "attention" in path:
        if re.search(r"(query|key|value|output)_dense", path):
            return "attention projections"
        if "cross_attention" in path:
            return "attention core: cross"
        if "decoder_block" in path:
            return "attention core: decoder self (causal)"
        if "encoder_block" in path:
            return "attention core: encoder self"
        return "attention core: self (causal, decoder-only LM)"  # its blocks are block_0, block_1, ...
    if "feed_forward" in path:
        return "feed-forward"
    if "embedding" in path or "positions" in path:
        return "embeddings"
    if "logits" in path or "loss" in path:
        return "logits and loss"
    return "other"


# ---------------------------------------------------------------- the profiler's trace: how long each op ran


def newest_trace(trace_dir):
    """The newest profiler trace file (`*.xplane.pb`) under `trace_dir`."""
    return max(Path(trace_dir).rglob("*.xplane.pb"), key=lambda path: path.stat().st_mtime)


def traced_op_times(trace_dir):
    """`{(program_id, hlo_op): nanoseconds}` of the train step's ops in the newest trace under `trace_dir`.

    Device planes (a GPU's) are read where they hold timed ops, their "XLA Ops" line only where it
    exists (the same kernels appear again on the streams' lines); otherwise the host's threads (XLA
    on a CPU runs each op as a thunk on one of them).
    """
    import jax

    path = newest_trace(trace_dir)
    data = jax.profiler.ProfileData.from_file(str(path))
    device, host = collections.Counter(), collections.Counter()
    for plane in data.planes:
        is_device = plane.name.startswith("/device:")
        lines = list(plane.lines)
        if is_device and any(line.name == "XLA Ops" for line in lines):
            lines = [line for line in lines if line.name == "XLA Ops"]
        for line in lines:
            for event in line.events:
                stats = dict(event.stats)
                module = str(stats.get("hlo_module", ""))
                if "train_step" not in module:
                    continue
                op = stats.get("hlo_op", event.name)
                (device if is_device else host)[(stats.get("program_id"), op)] += event.duration_ns
    return device or host


def compiled_modules(dump_dir):
    """`{program_id: instructions}` of every train-step module XLA dumped into `dump_dir` (`parse_hlo`)."""
    modules = {}
    for path in Path(dump_dir).glob("module_*train_step*after_optimizations.txt"):
        program_id = int(path.name.split(".")[0].removeprefix("module_"))
        modules[program_id] = parse_hlo(path.read_text())
    return modules


TF_MATMUL_OPS = re.compile(r"MatMul|Conv|Einsum")


def traced_tf_op_times(trace_dir):
    """`({(0, op): nanoseconds}, {0: instructions})` of TensorFlow's ops in the newest trace under `trace_dir`.

    The ops are the events `"path/of/scopes/name:OpType"` on the executor's threads (read with
    TensorFlow's own `XSpace` proto); each one's instruction (for `breakdown`) gives its path as
    `op_name`, its kind by op type, and its phase by path (`gradient_tape/`: backward; the
    optimizer's scope: update; else forward).
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = newest_trace(trace_dir)
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    times, instructions = collections.Counter(), {}
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                full_name = plane.event_metadata[event.metadata_id].name
                name, _, op_type = full_name.rpartition(":")
                if not name or "::" in full_name:  # the executor's own spans, not ops
                    continue
                times[(0, full_name)] += event.duration_ps / 1000
                if full_name not in instructions:
                    phase = phase_of(name)
                    instructions[full_name] = {
                        "op_name": name,
                        "kind": "matmul" if TF_MATMUL_OPS.search(op_type) else "other",
                        "phase": phase
                        if phase == "update"
                        else ("backward" if "gradient_tape/" in name else "forward"),
                    }
    return times, {0: instructions}


def breakdown(op_times, modules, steps, top):
    """Busy time per step, split by part, phase and kind, and the longest ops.

    Args:
        op_times: `traced_op_times`' result.
        modules: `compiled_modules`' result (an op whose program is not there: the newest module).
        steps: the traced steps (the times are divided by it).
        top: how many of the longest ops to list.
    """
    newest = modules[max(modules)]
    rows = []
    for (program_id, op), nanoseconds in op_times.items():
        info = modules.get(program_id, newest).get(op, {"op_name": "", "kind": "other"})
        rows.append((nanoseconds / steps / 1e6, op, info))
    busy = sum(ms for ms, _, _ in rows)
    by_part, by_phase, by_kind = collections.Counter(), collections.Counter(), collections.Counter()
    for ms, _, info in rows:
        by_part[part_of(info["op_name"])] += ms
        by_phase[info.get("phase") or phase_of(info["op_name"])] += ms
        by_kind[info["kind"]] += ms
    rows.sort(key=lambda row: -row[0])
    return {
        "busy_ms_per_step": busy,
        # The distinct fused attention kernels (cuDNN's) that ran: none where "auto" chose the fused
        # path means Keras fell back to one that is not fused.
        "fused_attention_ops": sum(1 for _, _, info in rows if info["kind"] == "attention kernel"),
        "ms_by_part": dict(by_part.most_common()),
        "ms_by_phase": dict(by_phase.most_common()),
        "ms_by_kind": dict(by_kind.most_common()),
        "top_ops": [
            {"op": op, "ms_per_step": ms, "kind": info["kind"], "op_name": info["op_name"]}
            for ms, op, info in rows[:top]
        ],
    }


# ---------------------------------------------------------------- the run


def run_length(args, length, peak, folder):
    """Build, time and trace our model at one length: its results (`breakdown` and the timings)."""
    import keras
    from train_throughput_models import (
        at_length,
        build_model,
        model_config,
        round_target_tokens,
        step_flops,
        synthetic_batches,
        target_tokens_per_step,
    )
    from train_throughput_worker import RoundClock, training_data

    from keras_transformer.config import TrainConfig
    from keras_transformer.training import compile_transformer, dtype_policy

    args = at_length(args, length)
    keras.utils.set_random_seed(args.seed)
    config = model_config(args)
    with dtype_policy(args.precision):
        train_config = TrainConfig(warmup_steps=400, jit_compile=keras.backend.backend() == "jax")
        model = compile_transformer(build_model("ours", config), config, train_config)
    batches = synthetic_batches(args)
    data, clock = training_data(batches), RoundClock()

    def train(steps):
        model.fit(data(), epochs=1, steps_per_epoch=steps, callbacks=[clock], shuffle=False, verbose=0)
        return clock.ended - clock.started

    start = time.perf_counter()
    train(args.steps)  # the XLA compile
    compile_seconds = time.perf_counter() - start
    step_seconds = float(sorted(train(args.steps) / args.steps for _ in range(args.rounds))[args.rounds // 2])
    trace_dir = Path(folder) / f"trace_length_{length}"
    with profiler_trace(trace_dir):
        train(args.trace_steps)
    flops = step_flops(args, config, target_tokens_per_step(args))
    own_peak = peak["bfloat16" if "bfloat16" in args.precision else "float32"]
    result = {
        "length": length,
        "batch_size": args.batch_size,
        "first_round_seconds": compile_seconds,
        "step_ms": 1000 * step_seconds,
        "target_tokens_per_second": round_target_tokens(args, batches) / args.steps / step_seconds,
        "model_flops_per_step": flops,
        "mfu_own_peak": flops / step_seconds / own_peak,
        "trace": str(trace_dir) if args.trace else None,  # a temporary folder's is gone after the run
    }
    if keras.backend.backend() == "jax":
        op_times, modules = traced_op_times(trace_dir), compiled_modules(Path(folder) / "hlo")
    else:
        op_times, modules = traced_tf_op_times(trace_dir)
    result.update(breakdown(op_times, modules, args.trace_steps, args.top))
    return result


def device_kind():
    """The device the step runs on: JAX's first device's kind, or "cpu" under TensorFlow here (no GPU path)."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return str(jax.devices()[0].device_kind)
    return "cpu"


@contextlib.contextmanager
def profiler_trace(trace_dir):
    """The backend's profiler, tracing into `trace_dir` while the block runs."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        with jax.profiler.trace(str(trace_dir)):
            yield
        return
    import tensorflow as tf

    tf.profiler.experimental.start(str(trace_dir))
    try:
        yield
    finally:
        tf.profiler.experimental.stop()


def print_report(args, results, peak, cpu):
    """Per length: the step, its busy time by part, phase and kind (ms and share), and the longest ops."""
    import common
    import keras
    from train_throughput_rounds import describe_peaks

    print()
    print(
        f"task {args.task}, preset {args.preset}, V {args.vocab}, {args.precision}, {args.tokens_per_step} tokens per "
        f"step, backend {keras.backend.backend()} ({results[0]['device']}), {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    print(f"matmul peak: {describe_peaks(peak)}")
    parts = list(dict.fromkeys(part for r in results for part in r["ms_by_part"]))
    header = f"{'':<46}" + "".join(f"{'length ' + str(r['length']):>16}" for r in results)
    print(header)
    print("-" * len(header))

    def row(label, values):
        print(f"{label:<46}" + "".join(f"{value:>16}" for value in values))

    row("batch", [r["batch_size"] for r in results])
    row("step ms (wall clock)", [f"{r['step_ms']:.1f}" for r in results])
    row("MFU (the precision's peak)", [f"{r['mfu_own_peak']:.1%}" for r in results])
    row("busy ms per step (all threads)", [f"{r['busy_ms_per_step']:.1f}" for r in results])
    row("fused attention kernels that ran", [r["fused_attention_ops"] for r in results])
    row("training towers (TensorFlow on a CPU)", [r["towers"] for r in results])
    for key, label in (("ms_by_kind", "kind"), ("ms_by_phase", "phase"), ("ms_by_part", "part")):
        names = parts if key == "ms_by_part" else list(dict.fromkeys(n for r in results for n in r[key]))
        for name in names:
            row(
                f"  {label}: {name}",
                [f"{r[key].get(name, 0):.1f} ({r[key].get(name, 0) / r['busy_ms_per_step']:.0%})" for r in results],
            )
    for r in results:
        print(f"\nlength {r['length']}: the longest ops (ms per step, kind, path)")
        for op in r["top_ops"]:
            print(f"  {op['ms_per_step']:8.2f}  {op['kind']:<16} {op['op']:<28} {op['op_name'][:110]}")


def set_hlo_dump(argv):
    """Have XLA dump the train step's optimized HLO as text, before JAX starts; returns the run's folder.

    The folder is `--trace` or a new temporary one; the dump goes to its `hlo/`.
    """
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--trace")
    trace = early.parse_known_args(argv)[0].trace
    folder = Path(trace) if trace else Path(tempfile.mkdtemp(prefix="step_breakdown_"))
    flags = os.environ.get("XLA_FLAGS", "")
    if DUMP_FLAG in flags:
        sys.exit(f"XLA_FLAGS already sets {DUMP_FLAG}; step_breakdown.py sets it itself (to {folder / 'hlo'})")
    dump = f"{DUMP_FLAG}={folder / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    os.environ["XLA_FLAGS"] = f"{flags} {dump}".strip()
    return folder


def main(argv=None):
    """Set XLA's HLO dump, then break the step down at every length; print and write the JSON.

    `XLA_FLAGS` is given back as it was at the end (JAX read it when it started).
    """
    flags = os.environ.get("XLA_FLAGS")
    try:
        return run(sys.argv[1:] if argv is None else argv)
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags


def run(argv):
    """`main`'s run, with the HLO dump set."""
    folder = set_hlo_dump(argv)
    args = parse_args(argv)
    import common
    import keras
    from train_throughput_rounds import matmul_peaks, matmul_peaks_elsewhere, peak_dtypes

    if keras.backend.backend() not in ("jax", "tensorflow"):
        sys.exit(f"step_breakdown.py traces JAX's or TensorFlow's step; Keras runs {keras.backend.backend()}")
    cpu = common.cpu_info()
    towers = 1
    if keras.backend.backend() == "tensorflow" and args.threads == "towers":
        from keras_transformer.training.threads import configure_cpu_threads

        peak = matmul_peaks_elsewhere(args.peak_size, peak_dtypes([args.precision]))
        towers = configure_cpu_threads()
    else:
        peak = matmul_peaks(args.peak_size, peak_dtypes([args.precision]))
    results = []
    for length in args.length:
        print(f"length {length}: building, compiling, timing, tracing", flush=True)
        result = run_length(args, length, peak, folder)
        result["device"], result["towers"] = device_kind(), towers
        results.append(result)
    print_report(args, results, peak, cpu)
    written = {
        "command": common.command_line(args.argv),
        "config": {k: v for k, v in vars(args).items() if k != "argv"},
        "backend": keras.backend.backend(),
        "device": results[0]["device"],
        "versions": common.package_versions(
            {"keras": "keras", "jax": "jax", "tensorflow": "tensorflow", "numpy": "numpy"}
        ),
        **common.machine(cpu),
        "matmul_peak_flops": peak,
        "lengths": results,
    }
    print(f"wrote {common.write_json(args.out, written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
