"""The split of a step's busy time: by part of the model, phase and kind, and the longest ops."""

import collections

from benchmarks.speed.step_breakdown.parts import part_of, phase_of


def breakdown(op_times, modules, steps, top):
    """Busy time per step, split by part, phase and kind, and the longest ops.

    Args:
        op_times: `traces.traced_op_times`' result.
        modules: `hlo.compiled_modules`' result (an op whose program is not there: the newest module).
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
