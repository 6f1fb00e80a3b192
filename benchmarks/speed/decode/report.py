"""The study's report (the batch decoders' table, ratios and checks, the latency) and its JSON."""

import os

import keras

from benchmarks.harness import machine, results
from benchmarks.speed.decode.decoders import BEAM_SIZE, LABELS


def print_report(args, params, first_call, medians, ratios, latency, checks, cpu, engine=None):
    """The table of the batch decoders, their ratios and checks, then the export's latency.

    `engine`: the CTranslate2 peer's `{"batches": .., "latency": ..}` (`ctranslate2_peer`), or empty.
    """
    tokens = args.output_tokens
    print()
    print(
        f"preset {args.preset}, V={args.vocab_size}, batch {args.batch_size}, source {args.source_len} ids, "
        f"{tokens} output tokens, jit {'on' if args.jit_compile else 'off'}, {args.repeats} repeats, "
        f"{os.cpu_count()} CPUs"
    )
    print(machine.cpu_line(cpu))
    print(f"parameters: ours {params['ours']:,}, keras-hub {params['keras_hub']:,}")
    header = f"{'decoder':<30}{'first call s':>13}{'median s/batch':>16}{'sentences/s':>13}{'tokens/s':>11}"
    print(header)
    print("-" * len(header))
    for name, label in LABELS.items():
        median = medians[name]
        print(
            f"{label:<30}{first_call[name]:>13.2f}{median:>16.3f}{args.batch_size / median:>13.1f}"
            f"{args.batch_size * tokens / median:>11.0f}"
        )
    for label, key in (
        ("cached / uncached speed-up:                 ", "cached_over_uncached_speedup"),
        ("ours cached / keras-hub cached (sent./s):   ", "ours_cached_over_keras_hub_sentences_per_s"),
        (
            f"ours beam {BEAM_SIZE} / keras-hub beam {BEAM_SIZE} (sent./s):   ",
            "ours_beam4_over_keras_hub_beam4_sentences_per_s",
        ),
        (f"beam {BEAM_SIZE} / cached greedy (time per batch):  ", "beam4_over_greedy_cached_time"),
    ):
        print(label + results.format_ratio(ratios[key]))
    print(
        f"checks: output shapes [B, {tokens}]; ours cached == uncached on "
        f"{checks['ours_cached_equals_uncached_token_fraction']:.1%} of tokens; keras-hub cached == its uncached "
        f"argmax decode on {checks['keras_hub_checked_sentences']} sentences"
    )
    engine = engine or {}
    if engine.get("batches"):
        print(f"CTranslate2 on our weights, the same batch ({tokens} tokens per sentence):")
        for name, result in engine["batches"].items():
            print(
                f"  {name:<32} {result['median_seconds_per_batch']:>7.3f} s/batch "
                f"{result['sentences_per_second']:>8.1f} sentences/s; ours cached / it: "
                f"{results.format_ratio(result['ours_cached_median_over_it'])}; "
                f"equal to ours on {result['equal_to_ours_token_fraction']:.1%} of tokens"
            )
    if latency:
        served = "loaded SavedModels" if keras.backend.backend() == "tensorflow" else "compiled decoders"
        print(f"single-sentence latency, {served}, {args.latency_requests} requests:")
        for name, result in latency.items():
            if name.startswith("ctranslate2"):
                who = name.removeprefix("ctranslate2_").rsplit("_beam", 1)[0].replace("_", " ")  # "float32 1t"
                who = f"CT2 {who}"
            else:
                who = "keras-hub" if name.startswith("keras_hub") else "ours, XLA" if name.endswith("_xla") else "ours"
            print(
                f"  {who:<14} beam {result['beam_size']}: p50 {result['p50_ms']:.1f} ms, "
                f"p95 {result['p95_ms']:.1f} ms, mean output {result['mean_output_tokens']:.1f} of "
                f"{result['max_output_tokens']} tokens"
            )
        for beam_size in (1, BEAM_SIZE):
            ratio = latency[f"beam{beam_size}"]["keras_hub_p50_over_ours"]
            print(f"  keras-hub p50 / ours p50, beam {beam_size}: " + results.format_ratio(ratio))
            if f"beam{beam_size}_xla" in latency:
                ratio = latency[f"beam{beam_size}_xla"]["default_p50_over_xla"]
                print(f"  ours p50 / ours with XLA p50, beam {beam_size}: " + results.format_ratio(ratio))
        for beam, by_type in engine.get("latency", {}).items():
            for compute_type, best in by_type.items():
                line = f"  CTranslate2 {compute_type} at its best ({best['best']}), {beam}: p50 {best['p50_ms']:.1f} ms"
                for key, label in (("ours_p50_over_it", "ours"), ("ours_xla_p50_over_it", "ours with XLA")):
                    if key in best:
                        line += f"; {label} p50 / it: {results.format_ratio(best[key])}"
                print(line)


def results_json(args, model_config, params, cpu, measured):
    """The JSON of a run: its configuration (the command from `args.argv`), machine and versions, then `measured`."""
    config = {
        "preset": args.preset,
        "model": model_config.to_dict(),
        "vocab_size": args.vocab_size,
        "batch_size": args.batch_size,
        "source_len": args.source_len,
        "output_tokens": args.output_tokens,
        "jit_compile": args.jit_compile,
        "repeats": args.repeats,
        "latency_requests": args.latency_requests,
        "ctranslate2": args.ctranslate2,
        "seed": args.seed,
        "parameters": params,
        "backend": keras.backend.backend(),
        "versions": machine.package_versions(
            {
                "tensorflow": "tensorflow",
                "jax": "jax",
                "keras": "keras",
                "keras_hub": "keras-hub",
                "ctranslate2": "ctranslate2",
            }
        ),
        **machine.machine(cpu),
        "command": results.command_line(__package__, args.argv),
    }
    return {"config": config, **measured}
