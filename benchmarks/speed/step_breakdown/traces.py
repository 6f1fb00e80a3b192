"""The profilers: tracing a few steps, and how long each op ran in the trace (JAX's or TensorFlow's)."""

import collections
import contextlib
import re
from pathlib import Path

from benchmarks.speed.step_breakdown.parts import phase_of

TF_MATMUL_OPS = re.compile(r"MatMul|Conv|Einsum")


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
