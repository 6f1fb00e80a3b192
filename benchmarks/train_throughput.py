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
  peak (the median rate of `--peak-size`^3 matmuls, measured first, by the parent, alone). Model
  FLOPs per training step, on the padded batch [B, S] -> [B, T] with R real target tokens, are
  3x the forward FLOPs (the backward pass is twice the forward):
      forward = B * ( N * [ S * (8 D^2 + 4 D F) + 4 S^2 D ]                          encoder
                    + N * [ T * (12 D^2 + 4 D F) + 4 S D^2 + 4 T^2 D + 4 T S D ]     decoder
                    ) + R * 2 D V                                                      logits
  counting 2 FLOPs per multiply-add of the matmuls only (projections, attention scores and
  weighted sums, feed-forward, logits); embeddings, softmax, LayerNorm and the loss are not
  counted. The blocks are counted over the padded batch (attention mixes the positions of a
  row, so a batched model computes them all), the logits only at the real target positions
  (each position's are its own; those at padding are thrown away by the loss, and our model
  does not compute them). R is the mean over a round's batches. Both models are given the same
  model FLOPs, so their MFU ratio equals their speed ratio.
  The bf16 matmul peak is printed too, as the ceiling of a mixed_bfloat16 run.
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
"""

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import common
import keras
import numpy as np
from keras import ops

from keras_transformer.config import PRECISIONS, PRESETS, TrainConfig, preset
from keras_transformer.data.special_tokens import END_ID, START_ID
from keras_transformer.precision import choose_precision
from keras_transformer.training import compile_transformer, dtype_policy

MODELS = ("ours", "keras-hub")
SHARED = "shared"  # not a model: the part of a step that both models compute alike
FIRST_REGULAR_ID = END_ID + 1


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


def model_config(args):
    """The `ModelConfig` of both models: `--preset` at vocabulary `--vocab` and length `--length`."""
    return preset(
        args.preset,
        source_vocab_size=args.vocab,
        target_vocab_size=args.vocab,
        max_source_len=args.length,
        max_target_len=args.length,
    )


def train_step_flops(config, batch, source_length, target_length, target_tokens=None, blocks=True):
    """Model FLOPs of one training step on a padded batch.

    That is 3x the forward matmul FLOPs (see the module docstring for the formula): the blocks
    over the padded `[batch, length]`, the logits at `target_tokens` real target positions
    (default: every position, `batch * target_length`); with `blocks=False`, the logits' only
    (the shared part).
    """
    d, f, n, v = config.d_model, config.d_ff, config.num_blocks if blocks else 0, config.target_vocab_size
    s, t = source_length, target_length
    target_tokens = batch * t if target_tokens is None else target_tokens
    encoder = n * (s * (8 * d * d + 4 * d * f) + 4 * s * s * d)
    decoder = n * (t * (12 * d * d + 4 * d * f) + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d)
    logits = target_tokens * 2 * d * v
    return 3 * (batch * (encoder + decoder) + logits)


def round_target_tokens(args, batches):
    """The real target tokens (labels that are not padding) of one round's `--steps` steps."""
    return sum(int(np.count_nonzero(batches[i % len(batches)][1])) for i in range(args.steps))


def target_tokens_per_step(args):
    """The mean real target tokens of a step of a round (R of the FLOP formula)."""
    return round_target_tokens(args, synthetic_batches(args)) / args.steps


def synthetic_batches(args):
    """The synthetic training batches, the same for every worker (seeded).

    Each sentence has `L // 2 .. L` real tokens; the target input starts with `<s>` and the
    output ends with `</s>`, as the pipeline makes them.

    Returns:
        `--batches` batches `((source_ids, target_in_ids), target_out_ids)`, int32 `[B, L]` each.
    """
    rng = np.random.default_rng(args.seed)
    batch, length = args.batch_size, args.length
    positions = np.arange(length)[None, :]
    batches = []
    for _ in range(args.batches):
        source = rng.integers(FIRST_REGULAR_ID, args.vocab, size=(batch, length), dtype="int32")
        source *= positions < rng.integers(length // 2, length + 1, size=(batch, 1))
        words = rng.integers(FIRST_REGULAR_ID, args.vocab, size=(batch, length), dtype="int32")
        target_length = rng.integers(length // 2, length + 1, size=(batch, 1))  # </s> included
        target_out = np.where(positions < target_length - 1, words, 0)
        target_out = np.where(positions == target_length - 1, END_ID, target_out).astype("int32")
        target_in = np.where(positions < target_length, np.roll(words, 1, axis=1), 0)
        target_in[:, 0] = START_ID
        batches.append(((source, target_in.astype("int32")), target_out))
    return batches


def training_data(batches):
    """A function giving each round's data: an endless stream of `batches`, from the first, in order.

    Under TensorFlow it gives one cached, prefetching `tf.data` pipeline (each `fit` starts a
    new iterator over it); under other backends a new generator.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        stacked = (
            (np.stack([b[0][0] for b in batches]), np.stack([b[0][1] for b in batches])),
            np.stack([b[1] for b in batches]),
        )
        dataset = tf.data.Dataset.from_tensor_slices(stacked).cache().repeat().prefetch(tf.data.AUTOTUNE)
        return lambda: dataset
    return lambda: (batch for batch in itertools.cycle(batches))  # Keras takes generators, not iterators


def build_shared_part(config):
    """The shared part: what a step of either model computes besides its blocks.

    That is both embedding tables, the logits projection, and (compiled) the loss and Adam over
    those weights. Our model's layers before and after its blocks: source `[B, S]` ids ->
    `TokenEmbedding` -> `PositionalEncoding` -> dropout, whose mean over time is added to every
    target position (so the table gets a gradient); target `[B, T]` ids -> the same -> float32
    `Dense(V)` logits `[B, T, V]`.
    """
    from keras_transformer.layers import PositionalEncoding, TokenEmbedding

    def embed(ids, vocab_size, side):
        hidden = TokenEmbedding(vocab_size, config.d_model, name=f"{side}_embedding")(ids)  # (B, L, D)
        hidden = PositionalEncoding(name=f"{side}_positions")(hidden)
        return keras.layers.Dropout(config.dropout_rate, name=f"{side}_dropout")(hidden)

    source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in_ids = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    source = embed(source_ids, config.source_vocab_size, "source")
    hidden = embed(target_in_ids, config.target_vocab_size, "target") + ops.mean(source, axis=1, keepdims=True)
    logits = keras.layers.Dense(config.target_vocab_size, dtype="float32", name="logits")(hidden)  # (B, T, V)
    return keras.Model([source_ids, target_in_ids], logits, name="shared_part")


def build_model(name, config):
    """The uncompiled model of worker `name`: ours, keras-hub's or the shared part."""
    if name == SHARED:
        return build_shared_part(config)
    if name == "ours":
        from keras_transformer.models import build_transformer

        return build_transformer(config)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers import KerasHubTransformer

    return KerasHubTransformer(config).model


class _RoundClock(keras.callbacks.Callback):
    """Wall-clock seconds of the training steps of one `fit` call.

    The clock runs from its first batch's start to its last batch's end.
    """

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self.started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.ended = time.perf_counter()


def run_worker(args):
    """Build, compile, then train one round per `round` line on stdin, answering with a JSON line."""
    name, precision = args.worker, args.worker_precision
    keras.utils.set_random_seed(args.seed)
    config = model_config(args)
    train_config = TrainConfig(warmup_steps=400, jit_compile=args.jit)
    with dtype_policy(precision):
        model = compile_transformer(build_model(name, config), config, train_config)
    batches = synthetic_batches(args)
    round_data = training_data(batches)
    tokens = round_target_tokens(args, batches)
    clock = _RoundClock()
    print(json.dumps({"ready": True, "parameters": int(model.count_params())}), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        history = model.fit(
            round_data(), epochs=1, steps_per_epoch=args.steps, callbacks=[clock], shuffle=False, verbose=0
        )
        assert int(history.history["target_tokens"][-1]) == tokens, "the round did not train on its batches"
        report = {
            "seconds": clock.ended - clock.started,
            "target_tokens": tokens,
            "loss": float(history.history["loss"][-1]),
            "peak_rss_mib": common.peak_rss_mib(),
        }
        print(json.dumps(report), flush=True)
    return 0


def matmul_peak(size, dtype, repeats=5, chain=4):
    """Median FLOP/s of `size`^3 matmuls in `dtype` (after one warm-up), through `keras.ops`."""
    rng = np.random.default_rng(0)
    a = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32")), dtype)
    b = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32") / size**0.5), dtype)

    def run():
        c = a
        for _ in range(chain):
            c = ops.matmul(c, b)
        return float(ops.convert_to_numpy(ops.cast(c[0, 0], "float32")))  # waits for the result

    run()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(chain * 2 * size**3 / (time.perf_counter() - start))
    return float(np.median(rates))


def start_worker(args, name, precision):
    """A `--worker` subprocess of this script for one model and precision, built and ready.

    Returns:
        `(worker, parameters)`: the `common.JsonLinesWorker` (one round per `request("round")`)
        and the model's parameter count.
    """
    command = common.worker_command(__file__, args.argv, "--worker", name, "--worker-precision", precision)
    worker = common.JsonLinesWorker(command, name)
    return worker, worker.answer()["parameters"]


def alternate_rounds(args, precision):
    """Train the workers of one precision a round at a time, in ABBA order.

    Returns:
        `(parameters, rounds)`: `{name: parameter count}` and `{name: [round report, ...]}`,
        the counted rounds only (the warm-up rounds are printed, not kept).
    """
    workers, parameters = [], {}
    try:
        for name in args.models:
            worker, parameters[name] = start_worker(args, name, precision)
            workers.append(worker)
        rounds = {worker.name: [] for worker in workers}
        for index in range(args.warmup_rounds + args.rounds):
            warmup = index < args.warmup_rounds
            for worker in workers if index % 2 == 0 else workers[::-1]:
                report = worker.request("round")
                if not warmup:
                    rounds[worker.name].append(report)
                print(
                    f"  {precision} round {index + 1}{' (warm-up)' if warmup else ''} "
                    f"{worker.name:<9} {report['target_tokens'] / report['seconds']:>8,.0f} target tokens/s, "
                    f"loss {report['loss']:.3f}",
                    flush=True,
                )
    finally:
        for worker in workers:
            worker.close()
    return parameters, rounds


def summarise_rounds(args, reports, parameters, flops, peak):
    """One worker's results from its counted rounds: medians, MFU, peak memory, last loss."""
    per_second = np.array([r["target_tokens"] / r["seconds"] for r in reports])
    step_seconds = np.median([r["seconds"] / args.steps for r in reports])
    return {
        "parameters": parameters,
        "target_tokens_per_second_median": float(np.median(per_second)),
        "target_tokens_per_second_rounds": per_second.round(1).tolist(),
        "step_ms_median": float(1000 * step_seconds),
        "model_tflops_per_second": flops / step_seconds / 1e12,
        "mfu_fp32_peak": flops / step_seconds / peak["float32"],
        "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
        "final_loss": reports[-1]["loss"],
    }


def compare(args, precision, flops_per_step, peak):
    """Alternate the workers of one precision and summarise their rounds.

    Returns:
        `{name: results}` of each worker, with both models `"ours_over_keras_hub"` (the ratio
        of the median tokens/s) and, with the shared part's worker too, `"split"`.
    """
    parameters, rounds = alternate_rounds(args, precision)
    shared_flops = train_step_flops(
        model_config(args), args.batch_size, args.length, args.length, target_tokens_per_step(args), blocks=False
    )
    results = {}
    for name, reports in rounds.items():
        flops = shared_flops if name == SHARED else flops_per_step  # the shared part: the logits' FLOPs only
        results[name] = summarise_rounds(args, reports, parameters[name], flops, peak)
    if all(name in results for name in MODELS):
        results["ours_over_keras_hub"] = common.ours_over_keras_hub(results, "target_tokens_per_second_median")
        if SHARED in results:
            results["split"] = step_split(results)
    return results


def step_split(results, target=1.2):
    """Split a step into the shared part and each model's blocks.

    Returns:
        The milliseconds of a step in the shared part and in each model's blocks (its step minus
        the shared part's), and the block time ours would need for `target` times keras-hub's
        speed.
    """
    shared, ours, hub = (results[name]["step_ms_median"] for name in (SHARED, *MODELS))
    return {
        "shared_ms": shared,
        "shared_fraction_of_keras_hub_step": shared / hub,
        "ours_blocks_ms": ours - shared,
        "keras_hub_blocks_ms": hub - shared,
        "target_ratio": target,
        "ours_blocks_ms_needed_for_target": hub / target - shared,
    }


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
