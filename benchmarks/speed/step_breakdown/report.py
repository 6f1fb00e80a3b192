"""The study's table: per length, the step, its busy time by part, phase and kind, and the longest ops."""

import os

import keras

from benchmarks.harness import machine
from benchmarks.harness.matmul_peak import describe_peaks


def print_report(args, results, peak, cpu):
    """Per length: the step, its busy time by part, phase and kind (ms and share), and the longest ops."""
    print()
    print(
        f"task {args.task}, preset {args.preset}, V {args.vocab_size}, {args.precision}, {args.tokens_per_step} tokens "
        f"per step, backend {keras.backend.backend()} ({results[0]['device']}), {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
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
