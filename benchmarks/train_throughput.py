"""Training throughput: our Transformer against keras-hub's, alternating in one run.

    python benchmarks/train_throughput.py                       # small preset, float32 (+ mixed_bfloat16 if native)
    python benchmarks/train_throughput.py --jit --precision mixed_bfloat16
    python benchmarks/train_throughput.py --rounds 2 --steps 3 --bleu-epochs 0 --preset tiny   # a quick check
    python benchmarks/train_throughput.py --length 64 256 1024 --tokens-per-step 4096 --bleu-epochs 0  # a length sweep
    python benchmarks/train_throughput.py --task lm             # our decoder-only LM against keras-hub's GPT-2

What runs:

- `--task translation` (the default): our encoder-decoder Transformer against keras-hub's layers, on
  padded sentence pairs, as below. `--task lm`: our decoder-only language model
  (`build_decoder_only`, learned positions, tied embeddings) against keras-hub's `GPT2Backbone`
  with the tied head of `GPT2CausalLM`, at the same size (language_models_build.py), on packed
  causal-LM windows of `--length` tokens (every position a target; no BLEU check, no shared part).
- A length sweep: `--length` takes several lengths, run one after the other, each with its own
  workers; `--tokens-per-step N` sets the batch size at each length to `N // length`, so every
  length trains on the same tokens per step. A summary table across the lengths ends the report.
- Two worker processes (this script with `--worker NAME`), one per model, each building its model
  once under the `--precision` dtype policy, compiling it with
  `keras_transformer.training.compile_transformer` (the same masked label-smoothed loss, metrics,
  Adam and Noam schedule for both) and waiting for orders on stdin:
    ours        `build_transformer(preset(--preset, ...))`
    keras-hub   `KerasHubTransformer` (benchmarks/peers.py): keras-hub's `TokenAndPositionEmbedding`,
                `TransformerEncoder` and `TransformerDecoder` at the same D, H, F, depth, dropout
                and vocabulary
- The parent tells them, in turn, to train one round: `model.fit` for `--steps` steps on the same
  `--batches` synthetic batches (seeded token ids, `--batch-size` pairs padded to `--length`,
  each sentence `--length // 2 .. --length` real tokens), in the same order. The order of the two
  alternates every round (ABBA), so slow drift of the machine falls on both alike. Only one
  worker runs at a time; the other waits, idle. The first `--warmup-rounds` rounds (graph
  tracing, XLA compiles, caches) are not counted.
- Throughput is real target tokens (labels that are not padding) per second of a round; the
  report gives the median over the rounds and the ratio of the medians, ours / keras-hub. Peak
  memory is each worker's maximum resident set size and, on a GPU, the most device memory it used.
- Model-FLOPs utilisation (MFU) = model FLOPs per second / the machine's measured matmul peak
  (measured first, by the parent, alone): against the float32 peak ("MFU"), and against the peak
  of the precision's compute dtype ("own MFU": the bfloat16 peak for mixed_bfloat16).
  train_throughput_models.py gives the model FLOPs of a step and how they are counted.
- `--models ours,keras-hub,shared` adds a third worker that trains only what both models' steps
  share besides their blocks (both embedding tables, the logits projection, the loss and Adam
  over those), and the report splits each step: the shared part's milliseconds, each model's
  blocks (its step minus the shared part), and the block time ours would need for 1.2x.
- Precision: `--precision float32 auto` by default. `auto` is resolved once, by the parent, with
  `keras_transformer.precision.choose_precision`: mixed_bfloat16 where the hardware computes
  bfloat16 natively (a CPU with AVX512-BF16 or AMX, a GPU of compute capability 8.0+, a TPU),
  else float32, which then runs once. So the defaults always measure float32 and add
  mixed_bfloat16 only where it can be the faster: on a CPU with AVX2 only, bfloat16 matmuls are
  emulated and a mixed_bfloat16 round takes many times longer. An explicit `mixed_bfloat16` is
  run as asked, with a warning where it is emulated. What each flag became, and why, is printed
  and written to the JSON (`precision`), beside the CPU model and flags.
- `--bleu-epochs N` (TensorFlow backend only) then trains our model on the built-in corpus
  (`runs.train`, small preset, N epochs) once in each precision and prints the test BLEU of
  each, to show that the faster precision does not cost translation quality.

The script runs under any Keras backend: `benchmarks/gpu.sh` runs it with JAX on a GPU. Under
TensorFlow the batches go through `tf.data` (cached, prefetched); under other backends through a
Python generator. Results go to `--out` as JSON.

The modules: this one holds the command line, the precision choice, the BLEU check, the report
and `main`; train_throughput_models.py what every worker builds alike (config, batches, models,
FLOP count); train_throughput_worker.py a worker; train_throughput_rounds.py the matmul peak and
the parent's alternating rounds and their summary.
"""

import argparse
import os
import sys
import tempfile

import common
import keras
from language_models_workload import FIRST_PIECE_ID
from train_throughput_models import MODELS, SHARED, TASKS, at_length, model_config, step_flops, target_tokens_per_step
from train_throughput_rounds import compare, describe_peaks, matmul_peaks, peak_dtypes
from train_throughput_worker import run_worker

from keras_transformer.config import PRECISIONS, PRESETS, TrainConfig
from keras_transformer.precision import choose_precision


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--task",
        default="translation",
        choices=TASKS,
        help="translation: encoder-decoder Transformers; lm: our decoder-only LM against keras-hub's GPT2Backbone.",
    )
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size of both models.")
    parser.add_argument("--vocab", type=int, default=8000, help="Source and target vocabulary size V.")
    parser.add_argument("--batch-size", type=int, default=64, help="Sentence pairs (lm: windows) per batch B.")
    parser.add_argument(
        "--length",
        type=int,
        nargs="+",
        default=[24],
        help="Padded source and target length S = T of a batch (lm: window length T); several lengths: a sweep.",
    )
    parser.add_argument(
        "--tokens-per-step",
        type=int,
        help="Batch size at each length = this // length (instead of --batch-size): equal tokens per step.",
    )
    parser.add_argument(
        "--precision",
        nargs="+",
        default=["float32", "auto"],
        choices=PRECISIONS,
        help="Dtype policies to compare in, one pair of workers each (default: float32 auto). auto is "
        "mixed_bfloat16 where the hardware computes bfloat16 natively and float32 elsewhere; a policy given twice "
        "runs once.",
    )
    parser.add_argument("--jit", action="store_true", help="Compile both models' training steps with XLA.")
    parser.add_argument("--steps", type=int, default=20, help="Training steps per round.")
    parser.add_argument("--rounds", type=int, default=7, help="Counted rounds per model.")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="Rounds run first and not counted.")
    parser.add_argument("--batches", type=int, default=16, help="Distinct synthetic batches, cycled.")
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"Comma-separated subset of: ours,keras-hub,{SHARED}. '{SHARED}' times what both models' steps "
        "share (embeddings, logits, loss, Adam; no blocks), which splits each step into blocks and the rest.",
    )
    parser.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    parser.add_argument(
        "--bleu-epochs",
        type=int,
        default=4,
        help="Epochs of the built-in-corpus BLEU run per precision (TensorFlow backend); 0 skips it.",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/train_throughput.json", help="JSON results file.")
    parser.add_argument("--worker", choices=(*MODELS, SHARED), help=argparse.SUPPRESS)
    policies = [name for name in PRECISIONS if name != "auto"]  # a worker is given what auto chose
    parser.add_argument("--worker-precision", choices=policies, help=argparse.SUPPRESS)
    parser.add_argument("--worker-length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # workers get the same flags
    args.models = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = sorted(set(args.models) - {*MODELS, SHARED})
    if unknown or not args.models:
        parser.error(f"--models takes names from {','.join(MODELS)},{SHARED}; received {unknown or 'nothing'}")
    if args.task == "lm" and SHARED in args.models:
        parser.error(f"--models {SHARED} is the translation task's shared part; --task lm has none")
    common.check_at_least(parser, args, ("vocab", "batch_size", "steps", "rounds", "batches", "peak_size"), 1)
    common.check_at_least(parser, args, ("warmup_rounds",), 0)
    for length in args.length:
        if length < 2:
            parser.error(f"--length must be >= 2. Received: {length}")
        if args.tokens_per_step is not None and args.tokens_per_step < length:
            parser.error(
                f"--tokens-per-step must be >= every --length (a batch of one row at least). Received: "
                f"{args.tokens_per_step} with --length {length}"
            )
    args.length = list(dict.fromkeys(args.length))  # a length given twice runs once
    if args.task == "lm" and args.vocab < FIRST_PIECE_ID + 2:
        parser.error(
            f"--vocab must be >= {FIRST_PIECE_ID + 2} for --task lm (ids 0-4 are reserved). Received: {args.vocab}"
        )
    return args


def choose_policies(args, cpu, accelerators=None):
    """The dtype policies to run: each `--precision` resolved (`choose_precision`), once each.

    Args:
        args: the parsed flags.
        cpu: a `common.cpu_info()` result.
        accelerators: `keras_transformer.precision.visible_accelerators()`; asked when `None`.

    Returns:
        `(policies, choices)`: the distinct policies in the order of the flags, and the
        `PrecisionChoice` of each flag.
    """
    choices = [choose_precision(name, cpu, accelerators) for name in args.precision]
    return list(dict.fromkeys(choice.policy for choice in choices)), choices


def bleu_by_precision(args, policies):
    """Our model on the built-in corpus, `--bleu-epochs` epochs, once per policy: test BLEU."""
    from keras_transformer import runs

    scores = {}
    with tempfile.TemporaryDirectory() as folder:
        for precision in policies:
            config = TrainConfig(
                epochs=args.bleu_epochs,
                precision=precision,
                jit_compile=args.jit,
                run_dir=f"{folder}/{precision}",
                export_dir=f"{folder}/exports",
                seed=args.seed,
            )
            summary = runs.train(config, log=lambda message: None, verbose=0, export=False)
            scores[precision] = {
                "bleu": summary["test"]["bleu"],
                "exact_match": summary["test"]["exact_match"],
                "target_tokens_per_second": summary.get("target_tokens_per_second"),
                "train_seconds": summary["train_seconds_this_session"],
            }
            score = scores[precision]
            print(
                f"  built-in corpus, {args.bleu_epochs} epochs, {precision}: test BLEU {score['bleu']:.2f}, "
                f"exact match {score['exact_match']:.1%}, {score['train_seconds']:.0f} s",
                flush=True,
            )
    return scores


def print_report(args, peak, sweep, cpu):
    """The tables: per length, each precision's workers (tokens/s, step ms, MFU, peak memory), ratio and split.

    Then, for a sweep, one line per length and precision: both models' tokens/s, the ratio, our MFU.
    """
    print()
    print(
        f"task {args.task}, preset {args.preset}, V {args.vocab}, jit {'on' if args.jit else 'off'}, {args.rounds} "
        f"rounds of {args.steps} steps, backend {keras.backend.backend()}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
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
        for precision, results in point["precisions"].items():
            for name in args.models:
                r = results[name]
                device = "-" if r["peak_device_mib"] is None else f"{r['peak_device_mib']:,.0f}"
                print(
                    f"{precision:<16}{name:<11}{r['target_tokens_per_second_median']:>10,.0f}"
                    f"{r['step_ms_median']:>9.1f}{r['mfu_fp32_peak']:>7.1%}{r['mfu_own_peak']:>9.1%}"
                    f"{r['peak_rss_mib']:>10,.0f}{device:>12}{r['towers']:>8}"
                )
            if "ours_over_keras_hub" in results:
                print(f"{precision:<16}ours / keras-hub: {common.format_ratio(results['ours_over_keras_hub'])}")
            if "split" in results:
                split = results["split"]
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
            for precision, results in point["precisions"].items():
                ours, hub = results["ours"], results["keras-hub"]
                print(
                    f"  length {point['length']:>5} x batch {point['batch_size']:<5} {precision:<16}"
                    f"{ours['target_tokens_per_second_median']:>12,.0f}{hub['target_tokens_per_second_median']:>12,.0f}"
                    f"{common.format_ratio(results['ours_over_keras_hub'], width=8)}{ours['mfu_own_peak']:>8.1%}"
                )


def run_length(args, policies, peak):
    """One length of the sweep (`args` at that length): its batch, model FLOPs and each precision's comparison."""
    flops_per_step = step_flops(args, model_config(args), target_tokens_per_step(args))
    print(f"length {args.length}, batch {args.batch_size}: {flops_per_step / 1e9:.2f} GFLOP per step", flush=True)
    return {
        "length": args.length,
        "batch_size": args.batch_size,
        "model": model_config(args).to_dict(),
        "model_flops_per_step": flops_per_step,
        "precisions": {precision: compare(args, precision, flops_per_step, peak) for precision in policies},
    }


def main(argv=None):
    """The parent's run (peak, comparisons per length, BLEU, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = common.cpu_info()
    policies, choices = choose_policies(args, cpu)
    for choice in choices:
        print(f"precision {choice.requested}: {choice.describe()}", flush=True)
        if choice.warning:
            print(choice.warning, flush=True)
    peak = matmul_peaks(args.peak_size, peak_dtypes(policies))
    print(f"matmul peak: {describe_peaks(peak)}", flush=True)
    sweep = [run_length(at_length(args, length), policies, peak) for length in args.length]
    bleu = {}
    if args.bleu_epochs and args.task == "translation" and keras.backend.backend() == "tensorflow":
        bleu = bleu_by_precision(args, policies)
    print_report(args, peak, sweep, cpu)
    results = {
        "command": common.command_line(args.argv),
        "config": {k: v for k, v in vars(args).items() if not k.startswith("worker") and k != "argv"},
        "backend": keras.backend.backend(),
        "versions": common.package_versions(
            {"keras": "keras", "numpy": "numpy", "tensorflow": "tensorflow", "keras-hub": "keras-hub", "jax": "jax"}
        ),
        **common.machine(cpu),
        "precision": [choice.to_dict() for choice in choices],
        "matmul_peak_flops": peak,
        "lengths": sweep,
        "bleu_by_precision": bleu,
    }
    print(f"wrote {common.write_json(args.out, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
