"""What the study reports: the tables on stdout and the results JSON.

Training per kind (tokens/s, per CPU-second, step ms, MFU, CPU MFU, peak memory, final loss, the
ratios ours / keras-hub), then generation (new tokens/s, per CPU-second, agreement with the
uncached decode, the ratios). The JSON holds the flags and model configs, the `architecture`
differences, versions, the machine, the precision chosen, the matmul peak and every figure.
"""

import os
from pathlib import Path

from benchmarks.harness import machine
from benchmarks.harness.language_peers import ARCHITECTURE, GENERATORS
from benchmarks.harness.language_workload import MODELS, max_length, model_config, train_step_flops
from benchmarks.harness.results import command_line, format_ratio


def print_report(args, cpu, precision, peak, training, generation):
    """The tables: training per kind (tokens/s, per CPU-second, step ms, MFU, memory, ratios), then generation."""
    config = model_config(args, args.kinds[0])
    print()
    print(
        f"preset {args.preset} (D {config.d_model}, H {config.num_heads}, F {config.d_ff}, N {config.num_blocks}), "
        f"V {args.vocab_size}, positions {'learned' if args.learned_positions else 'sinusoid'}, precision "
        f"{precision['policy']}, jit {'on' if args.jit_compile else 'off'}, {os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
    print(
        f"matmul peak ({args.peak_size}^3): float32 {peak['float32'] / 1e9:,.0f} GFLOP/s (best of the repeats), "
        f"{peak['float32_per_cpu_second'] / 1e9:,.0f} GFLOP per CPU-second; model FLOPs per training step "
        f"{train_step_flops(config, args.batch_size, args.length) / 1e9:.2f} GFLOP"
    )
    print_training(args, training)
    if generation:
        print_generation(args, generation)


def print_training(args, training):
    """The training table: one row per kind and library, then each kind's ratios ours / keras-hub."""
    peers = {"decoder": "GPT2Backbone", "encoder": "BertBackbone"}
    print(f"training: batches {args.batch_size} x {args.length}, {args.rounds} rounds of {args.steps} steps (medians)")
    header = (
        f"{'kind':<9}{'model':<14}{'params':>10}{'tokens/s':>10}{'tok/CPU-s':>11}{'step ms':>9}{'MFU':>7}{'CPU MFU':>9}"
        f"{'peak MiB':>10}{'loss':>7}"
    )
    print(header)
    print("-" * len(header))
    for kind, results in training.items():
        for name in MODELS:
            r = results[name]
            print(
                f"{kind:<9}{name if name == 'ours' else peers[kind]:<14}{r['parameters']:>10,}"
                f"{r['tokens_per_second_median']:>10,.0f}{r['tokens_per_cpu_second_median']:>11,.0f}"
                f"{r['step_ms_median']:>9.1f}{r['mfu_fp32_peak']:>7.1%}{r['mfu_fp32_peak_cpu_time']:>9.1%}"
                f"{r['peak_rss_mib']:>10,.0f}{r['final_loss']:>7.2f}"
            )
        extra = ""
        if kind == "encoder":
            extra = (
                f" (masked tokens/s: ours {results['ours']['predicted_tokens_per_second_median']:,.0f}, "
                f"keras-hub {results['keras-hub']['predicted_tokens_per_second_median']:,.0f})"
            )
        print(
            f"{kind:<9}ours / keras-hub: {format_ratio(results['ours_over_keras_hub'])}, per CPU-second "
            f"{format_ratio(results['ours_over_keras_hub_cpu_time'])}{extra}"
        )


def print_generation(args, generation):
    """The generation table: one row per generator, then the ratios ours / each keras-hub generator."""
    print(
        f"generation: {args.batch_size} prompts x {args.prompt_length} tokens, {args.new_tokens} new tokens each, "
        f"greedy, no stop token, {args.rounds} rounds (medians)"
    )
    header = f"{'generator':<22}{'new tokens/s':>13}{'per CPU-s':>11}{'== uncached':>13}"
    print(header)
    print("-" * len(header))
    for label in (*GENERATORS["ours"], *GENERATORS["keras-hub"]):
        r = generation[label]
        print(
            f"{label:<22}{r['new_tokens_per_second_median']:>13,.0f}{r['new_tokens_per_cpu_second_median']:>11,.0f}"
            f"{r['equal_to_uncached']:>13.0%}"
        )
    ratio = {key: format_ratio(value) for key, value in generation.items() if key.startswith("ours_")}
    print(
        f"ours / keras-hub (same work): {ratio['ours_over_keras_hub']}, per CPU-second "
        f"{ratio['ours_over_keras_hub_cpu_time']}; ours / keras-hub generate(): "
        f"{ratio['ours_over_keras_hub_generate']}, per CPU-second {ratio['ours_over_keras_hub_generate_cpu_time']}"
    )


def results_json(args, cpu, precision, peak, training, generation):
    """The results JSON: the command, the flags and model configs, the architectures, the machine, every figure."""
    return {
        "command": command_line(__package__, args.argv),
        "config": {
            **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in ("worker", "argv")},
            "max_length": max_length(args),
            "models": {kind: model_config(args, kind).to_dict() for kind in args.kinds},
        },
        "architecture": ARCHITECTURE,
        "versions": machine.package_versions({"keras": "keras", "tensorflow": "tensorflow", "keras-hub": "keras-hub"}),
        **machine.machine(cpu),
        "precision": precision,
        "matmul_peak_flops": peak,
        "training": training,
        "generation": generation,
    }
