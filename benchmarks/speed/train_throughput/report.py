"""The study's report: per length, each precision's workers, their ratio and the step's split; the sweep."""

import os

import keras

from benchmarks.harness import machine, results
from benchmarks.harness.matmul_peak import describe_peaks
from benchmarks.harness.training_workload import MODELS, at_length, model_config


def print_report(args, peak, sweep, cpu):
    """The tables: per length, each precision's workers (tokens/s, step ms, MFU, peak memory), ratio and split.

    Then, for a sweep, one line per length and precision: both models' tokens/s, the ratio, our MFU.
    """
    print()
    print(
        f"task {args.task}, preset {args.preset}, V {args.vocab_size}, jit {'on' if args.jit_compile else 'off'}, "
        f"{args.rounds} rounds of {args.steps} steps, backend {keras.backend.backend()}, {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
    print(f"matmul peak ({args.peak_size}^3): {describe_peaks(peak)}")
    for point in sweep:
        config = model_config(at_length(args, point["length"]))
        blocks = config.num_blocks if args.task == "lm" else f"{config.num_blocks}+{config.num_blocks}"
        print(
            f"\nlength {point['length']}, batch {point['batch_size']} (D {config.d_model}, H {config.num_heads}, F "
            f"{config.d_ff}, {blocks} blocks); "
            f"model FLOPs per step {point['model_flops_per_step'] / 1e9:.2f} GFLOP"
        )
        header = (
            f"{'precision':<16}{'model':<11}{'tokens/s':>10}{'step ms':>9}{'MFU':>7}{'own MFU':>9}"
            f"{'peak MiB':>10}{'device MiB':>12}{'towers':>8}"
        )
        print(header)
        print("-" * len(header))
        for precision, summary in point["precisions"].items():
            for name in args.models:
                r = summary[name]
                device = "-" if r["peak_device_mib"] is None else f"{r['peak_device_mib']:,.0f}"
                print(
                    f"{precision:<16}{name:<11}{r['target_tokens_per_second_median']:>10,.0f}"
                    f"{r['step_ms_median']:>9.1f}{r['mfu_fp32_peak']:>7.1%}{r['mfu_own_peak']:>9.1%}"
                    f"{r['peak_rss_mib']:>10,.0f}{device:>12}{r['towers']:>8}"
                )
            if "ours_over_keras_hub" in summary:
                print(f"{precision:<16}ours / keras-hub: {results.format_ratio(summary['ours_over_keras_hub'])}")
            if "split" in summary:
                split = summary["split"]
                print(
                    f"{precision:<16}step split: shared part {split['shared_ms']:.1f} ms "
                    f"({split['shared_fraction_of_keras_hub_step']:.0%} of keras-hub's step); blocks: ours "
                    f"{split['ours_blocks_ms']:.1f} ms, keras-hub {split['keras_hub_blocks_ms']:.1f} ms; "
                    f"{split['target_ratio']:g}x would need ours' blocks at "
                    f"{split['ours_blocks_ms_needed_for_target']:.1f} ms"
                )
    if len(sweep) > 1 and all(name in args.models for name in MODELS):
        print(f"\nthe sweep ({args.task}): target tokens/s, ours / keras-hub, our MFU (own dtype's peak)")
        for point in sweep:
            for precision, summary in point["precisions"].items():
                ours, hub = summary["ours"], summary["keras-hub"]
                print(
                    f"  length {point['length']:>5} x batch {point['batch_size']:<5} {precision:<16}"
                    f"{ours['target_tokens_per_second_median']:>12,.0f}{hub['target_tokens_per_second_median']:>12,.0f}"
                    f"{results.format_ratio(summary['ours_over_keras_hub'], width=8)}{ours['mfu_own_peak']:>8.1%}"
                )
