"""Training throughput: our Transformer against keras-hub's, alternating in one run.

    python benchmarks/train_throughput.py                       # small preset, float32 (+ mixed_bfloat16 if native)
    python benchmarks/train_throughput.py --jit --precision mixed_bfloat16
    python benchmarks/train_throughput.py --rounds 2 --steps 3 --bleu-epochs 0 --preset tiny   # a quick check

What runs:

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
  memory is each worker's maximum resident set size.
- Model-FLOPs utilisation (MFU) = model FLOPs per second / the machine's measured fp32 matmul
  peak (measured first, by the parent, alone; the bf16 peak is printed too).
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
from train_throughput_models import MODELS, SHARED, model_config, target_tokens_per_step, train_step_flops
from train_throughput_rounds import compare, matmul_peak
from train_throughput_worker import run_worker

from keras_transformer.config import PRECISIONS, PRESETS, TrainConfig
from keras_transformer.precision import choose_precision


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size of both models.")
    parser.add_argument("--vocab", type=int, default=8000, help="Source and target vocabulary size V.")
    parser.add_argument("--batch-size", type=int, default=64, help="Sentence pairs per batch B.")
    parser.add_argument("--length", type=int, default=24, help="Padded source and target length S = T of a batch.")
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
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # workers get the same flags
    args.models = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = sorted(set(args.models) - {*MODELS, SHARED})
    if unknown or not args.models:
        parser.error(f"--models takes names from {','.join(MODELS)},{SHARED}; received {unknown or 'nothing'}")
    common.check_at_least(parser, args, ("vocab", "batch_size", "steps", "rounds", "batches", "peak_size"), 1)
    common.check_at_least(parser, args, ("length",), 2)
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


def print_report(args, peak, flops_per_step, comparisons, cpu):
    """The table: each precision's workers (tokens/s, step ms, MFU, peak MiB), ratio and split."""
    config = model_config(args)
    print()
    print(
        f"preset {args.preset} (D {config.d_model}, H {config.num_heads}, F {config.d_ff}, {config.num_blocks}+"
        f"{config.num_blocks} blocks), V {args.vocab}, batch {args.batch_size} x {args.length}, "
        f"jit {'on' if args.jit else 'off'}, {args.rounds} rounds of {args.steps} steps, backend "
        f"{keras.backend.backend()}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    print(
        f"matmul peak ({args.peak_size}^3): float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, bfloat16 "
        f"{peak['bfloat16'] / 1e9:,.0f} GFLOP/s; model FLOPs per step {flops_per_step / 1e9:.2f} GFLOP"
    )
    header = f"{'precision':<16}{'model':<11}{'tokens/s':>10}{'step ms':>9}{'MFU':>7}{'peak MiB':>10}"
    print(header)
    print("-" * len(header))
    for precision, results in comparisons.items():
        for name in args.models:
            r = results[name]
            print(
                f"{precision:<16}{name:<11}{r['target_tokens_per_second_median']:>10,.0f}{r['step_ms_median']:>9.1f}"
                f"{r['mfu_fp32_peak']:>7.1%}{r['peak_rss_mib']:>10,.0f}"
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


def main(argv=None):
    """The parent's run (peak, comparisons, BLEU, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = common.cpu_info()
    policies, choices = choose_policies(args, cpu)
    for choice in choices:
        print(f"precision {choice.requested}: {choice.describe()}", flush=True)
        if choice.warning:
            print(choice.warning, flush=True)
    config = model_config(args)
    flops_per_step = train_step_flops(config, args.batch_size, args.length, args.length, target_tokens_per_step(args))
    peak = {dtype: matmul_peak(args.peak_size, dtype) for dtype in ("float32", "bfloat16")}
    print(
        f"matmul peak: float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, bfloat16 {peak['bfloat16'] / 1e9:,.0f} GFLOP/s",
        flush=True,
    )
    comparisons = {precision: compare(args, precision, flops_per_step, peak) for precision in policies}
    bleu = {}
    if args.bleu_epochs and keras.backend.backend() == "tensorflow":
        bleu = bleu_by_precision(args, policies)
    print_report(args, peak, flops_per_step, comparisons, cpu)
    results = {
        "command": common.command_line(args.argv),
        "config": {
            **{k: v for k, v in vars(args).items() if not k.startswith("worker") and k != "argv"},
            "model": config.to_dict(),
        },
        "backend": keras.backend.backend(),
        "versions": common.package_versions(
            {"keras": "keras", "numpy": "numpy", "tensorflow": "tensorflow", "keras-hub": "keras-hub", "jax": "jax"}
        ),
        **common.machine(cpu),
        "precision": [choice.to_dict() for choice in choices],
        "matmul_peak_flops": peak,
        "model_flops_per_step": flops_per_step,
        "precisions": comparisons,
        "bleu_by_precision": bleu,
    }
    print(f"wrote {common.write_json(args.out, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
