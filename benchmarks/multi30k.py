r"""Multi30k German->English in a fixed training-time budget: our Transformer against keras-hub's.

    python benchmarks/multi30k.py --data path/to/multi30k --minutes 30
    python benchmarks/multi30k.py --data path/to/multi30k --minutes 0.5 --preset tiny --vocab 2000 \
        --train-size 3000 --test-size 100 --curve-points 2 --curve-sentences 50        # a quick check

One run, three steps:

1. The parent process reads `train.{de,en}.gz` of `--data` and learns, from the training split
   only, one WordPiece vocabulary (at most `--vocab` pieces) of both sides' text, used on both
   sides by both models (`--joint-vocab on`, the default with our one embedding table), or with
   `--joint-vocab off` one per side. They are cached in `--work-dir`, keyed by size, jointness
   and `--train-size`, and learned outside every budget.
2. Each model of `--models` is trained and scored in its own subprocess (`--worker NAME`, the
   same flags), one after the other, so each gets every core and its own peak memory:
     ours        `build_transformer(preset(--preset, ...))`
     keras-hub   `KerasHubTransformer` (benchmarks/peers.py): keras-hub's `TokenAndPositionEmbedding`,
                 `TransformerEncoder` and `TransformerDecoder` at the same width, heads, feed-forward
                 width, depth, dropout and vocabularies
   Both are compiled by `keras_transformer.training.compile_transformer` (masked label-smoothed
   loss, Adam(0.9, 0.98, 1e-9) on the Noam schedule) and trained by `model.fit` on the same
   batches, in the same order: `translation_batches.make_dataset` of the pairs that fit in `--max-len`
   tokens per side, shuffled with `--seed`, bucketed by length. The first batches are
   fingerprinted in each worker and the parent checks that the fingerprints agree.
   Our model trains by `--recipe best` unless told otherwise: per-head attention initialization
   and weight averaging over about the last third of the run (`TrainConfig.ema_momentum` 0.9999
   and `ema_ramp` 3: momentum `min(0.9999, t / (t + 3))` at step t, so the average spans a share
   of the steps taken, whatever the machine's speed; `--ema-ramp 9` is the last tenth, the
   previous default, with `--ema-momentum 0.998`), and one embedding table for source, target
   and logits (`--embedding-sharing all`, `ModelConfig.embedding_sharing`), so one joint
   vocabulary, which keras-hub's model uses too, keeping its three tables; `--recipe tutorial` is
   the tutorial code's glorot initialization without averaging, with three tables and one
   vocabulary per side. `--joint-vocab` defaults to on exactly when our table is one.
   With averaging, our model is scored, along the curve and at the end, with the moving average
   of its weights, and the curve also records the weights as trained (`bleu_trained_weights`, a
   dashed line in the PNG). keras-hub's model trains as its layers come, without averaging.
   The budget is `--minutes` of training wall clock: the clock starts when `fit` starts (graph
   tracing is training time), pauses while the model is scored for the curve, and `fit` stops
   after the step that reaches the budget. The curve: greedy sacreBLEU of the first
   `--curve-sentences` sentences of test_2016_flickr (or, with `--curve-split validation`, of the
   validation split: the one to choose settings by) at `--curve-points` evenly spaced moments of
   the budget, the last at its end. Then the whole test_2016_flickr (1000 sentences) is
   translated with each model's final decoding and scored with sacreBLEU and chrF:
     ours        beam search (`--beam-size`, `--length-penalty`) through the same `Translator` graph
                 that `--export-dir` saves; its greedy score is reported as well, so the table shows
                 how much of a difference comes from the decoding
     keras-hub   greedy, `keras_hub.samplers.GreedySampler` with key/value caches, stopping once
                 every sentence has produced `</s>`
3. The parent prints both models side by side (under a header that names the CPU model and its
   matmul flags), writes the results as JSON (`--out`, with the CPU model and all its flags from
   /proc/cpuinfo) and plots BLEU against training minutes (`--plot`).

How to read it. "target tokens/s" counts real target tokens (labels that are not padding, the
`target_tokens` metric) per second of training clock, the median over the complete chunks of
`--chunk-steps` steps (the first chunk includes graph tracing; the last, cut by the budget,
is left out). "epochs" is target tokens trained on / target tokens in the training pairs.
"peak MiB" is the worker's maximum resident set size (`ru_maxrss`), training and scoring
included. Minutes on a shared machine are noisy: the two models run one after the other, so
load from other processes can fall on one more than the other; the JSON keeps per-chunk times.

Precision: both models train under `--precision auto` by default, resolved once by the parent
(`keras_transformer.training.precision.choose_precision`) and given to both workers: `mixed_bfloat16`
where the hardware computes bfloat16 natively (a CPU with AVX512-BF16 or AMX, a GPU of compute
capability 8.0+, a TPU), `float32` elsewhere. On a CPU with AVX512-BF16 and AMX the keras-hub
model trained at 1.34x its float32 tokens/s in mixed_bfloat16; on a CPU with AVX2 only,
bfloat16 is emulated and the medium preset did 83 steps in its first 5 minutes. The report
header and the JSON (`precision`) say what was chosen and why, beside the CPU model and flags;
an explicit `--precision mixed_bfloat16` where bfloat16 is emulated runs, with a warning.

Warm-up: the Noam schedule peaks after `--warmup` steps. The default scales with the budget,
`round(1000 * minutes / 30)` (at least 1): about a third of the roughly 100 steps a minute that
the medium preset took with 64-sentence batches in float32 on 2 CPU cores, so the learning rate
peaks a third of the way in and decays for the rest, whatever the budget. A 4000-step warm-up,
the paper's, would never peak in 30 minutes on such a machine.
"""

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import common
import keras
import numpy as np
import sacrebleu
import tensorflow as tf
from peers import KerasHubTransformer

from keras_transformer.config import ATTENTION_INITIALIZATIONS, EMBEDDING_SHARING, PRESETS, TrainConfig, preset
from keras_transformer.data.parallel_text import ParallelText, read_parallel_files
from keras_transformer.data.tokenizers import END_ID, PAD_ID, SubwordTokenizer
from keras_transformer.data.translation_batches import EncodedPairs, encode_pairs, make_dataset
from keras_transformer.data.vocabulary import learn_translation_vocabularies, write_vocabulary
from keras_transformer.evaluation import score_translations, translate_texts
from keras_transformer.models import build_transformer
from keras_transformer.runs import MODEL_CONFIG_FILE, export_run, make_translator
from keras_transformer.training import LateDropout, averaged_weights, compile_transformer
from keras_transformer.training.precision import choose_precision

MODELS = ("ours", "keras-hub")
SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"
SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
PRECISIONS = ("auto", "float32", "mixed_bfloat16")
WARMUP_STEPS_PER_MINUTE = 1000 / 30  # see "Warm-up" in the module docstring
# Our model's settings by `--recipe`: what won on Multi30k (medium preset, 30 minutes), or the tutorial's.
RECIPES = {
    "best": {
        "attention_initialization": "per_head",
        "ema_momentum": 0.9999,
        "ema_ramp": 3.0,
        "embedding_sharing": "all",
        "lr_cooldown": 0.0,
    },
    "tutorial": {
        "attention_initialization": "glorot",
        "ema_momentum": 0.0,
        "ema_ramp": 9.0,
        "embedding_sharing": "none",
        "lr_cooldown": 0.0,
    },
}
FINGERPRINT_BATCHES = 20  # batches hashed to check that both models train on the same ones
MAX_CHUNKS = 1_000_000  # `fit` epochs; the budget stops training long before
WORKER_RESULT_FILE = "result.json"
# The packages whose versions the JSON records: {JSON key: distribution name}.
VERSIONS = {
    "tensorflow": "tensorflow",
    "tensorflow_text": "tensorflow-text",
    "keras": "keras",
    "keras_hub": "keras-hub",
    "sacrebleu": "sacrebleu",
    "numpy": "numpy",
}


# ---------------------------------------------------------------- flags


def add_corpus_and_schedule_flags(parser):
    """The data, budget, model size, batching and learning-rate flags."""
    parser.add_argument(
        "--data", required=True, help="Folder with Multi30k's {train,val,test_2016_flickr}.{de,en}.gz (read only)."
    )
    parser.add_argument("--minutes", type=float, required=True, help="Training wall-clock budget of each model.")
    parser.add_argument("--preset", default="medium", choices=sorted(PRESETS), help="Model size of both models.")
    parser.add_argument(
        "--vocab", type=int, default=8000, help="Most WordPiece pieces of the joint vocabulary, or of each side's."
    )
    parser.add_argument(
        "--joint-vocab",
        choices=("on", "off"),
        default=None,
        help="Learn one --vocab-piece vocabulary from both sides' training text, used by both models on both sides "
        "(default: on exactly when our --embedding-sharing is all).",
    )
    parser.add_argument(
        "--max-len",
        type=int,
        default=40,
        help="Most tokens per side (the target's </s> included); longer training pairs are dropped and counted, "
        "longer test sources are cut, and translations are at most this long.",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="Sentence pairs per batch (when --batch-tokens is 0)."
    )
    parser.add_argument(
        "--batch-tokens", type=int, default=0, help="Batch by about this many tokens (padded, longer side); 0 = off."
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="Noam warm-up steps (default: round(1000 * minutes / 30), at least 1)."
    )
    parser.add_argument("--lr-scale", type=float, default=1.0, help="Multiplier of the Noam learning rate.")
    parser.add_argument("--label-smoothing", type=float, default=0.1, help="Label smoothing epsilon of the loss.")


def add_model_and_decoding_flags(parser):
    """The precision, XLA, initialization, weight-averaging, decoding, seed and model-choice flags."""
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="Keras dtype policy of both models (mixed_bfloat16: bfloat16 compute, float32 weights, logits and loss; "
        "auto: mixed_bfloat16 where the hardware computes bfloat16 natively, float32 elsewhere).",
    )
    parser.add_argument("--jit", action="store_true", help="Train both models with XLA (model.jit_compile).")
    parser.add_argument(
        "--recipe",
        default="best",
        choices=sorted(RECIPES),
        help="Defaults of our model's flags below: best (per_head initialization, weight averaging over about the "
        "last third of the run: momentum 0.9999, ramp 3, one embedding table over a joint vocabulary; what won on "
        "Multi30k at the medium preset) or tutorial (glorot, no averaging, three tables: the tutorial code).",
    )
    parser.add_argument(
        "--attention-initialization",
        default=None,
        choices=ATTENTION_INITIALIZATIONS,
        help="Our model's attention projection initialization (ModelConfig.attention_initialization; default: "
        "--recipe's).",
    )
    parser.add_argument(
        "--ema-momentum",
        type=float,
        default=None,
        help="Our model's weight averaging (TrainConfig.ema_momentum, ramped up over the run): it ends training "
        "with, and is scored with, the moving average of its weights; 0 = off (default: --recipe's).",
    )
    parser.add_argument(
        "--ema-ramp",
        type=float,
        default=None,
        help="How far back our weight average looks while it ramps up (TrainConfig.ema_ramp): momentum "
        "min(--ema-momentum, t / (t + RAMP)) at step t; 9 spans about the last tenth of the steps, 3 about the "
        "last third, 1 all of them (default: --recipe's).",
    )
    parser.add_argument(
        "--lr-cooldown",
        type=float,
        default=None,
        help="Our model's learning-rate cooldown (TrainConfig.lr_cooldown): over this share of the budget's end "
        "the rate falls linearly to 0, the budget's steps estimated from the clock as training goes; 0 = off, the "
        "Noam schedule to the end (default: --recipe's).",
    )
    parser.add_argument(
        "--embedding-sharing",
        default=None,
        choices=EMBEDDING_SHARING,
        help="Our model's shared embedding tables (ModelConfig.embedding_sharing; all needs --joint-vocab on; "
        "default: --recipe's).",
    )
    parser.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="Our model's dropout rate (ModelConfig.dropout_rate; keras-hub keeps the preset's; default: the "
        "preset's, 0.1 at medium).",
    )
    parser.add_argument(
        "--late-dropout",
        type=float,
        default=0.0,
        help="Raise our model's dropout to this rate after --late-dropout-epochs passes over the training pairs "
        "(keras_transformer.training.LateDropout); 0 = off.",
    )
    parser.add_argument(
        "--late-dropout-epochs",
        type=float,
        default=6.0,
        help="Passes over the training pairs (counted in steps: batches of one pass) before --late-dropout.",
    )
    parser.add_argument(
        "--beam-size", type=int, default=4, help="Beam size of our model's test translation (1: greedy)."
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=1.4,
        help="Our beam search's GNMT length-penalty alpha (1.4 scored best of 0.6, 1.0 and 1.4 on the validation "
        "split; --validation-decodings measures others).",
    )
    parser.add_argument(
        "--validation-decodings",
        default="",
        help="After training, also score our model on the whole validation split with each of these "
        "BEAM:ALPHA decodings (e.g. 1:0,4:0.6,4:1.0; beam 1 is greedy): the way to choose --beam-size and "
        "--length-penalty without looking at the test split; empty = off.",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the weights, dropout and batch order.")
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"Comma-separated models to train, from {', '.join(MODELS)}."
    )


def add_measurement_and_output_flags(parser):
    """The throughput chunk, curve, corpus-size and output flags (and the parent's `--worker`)."""
    parser.add_argument(
        "--chunk-steps", type=int, default=200, help="Steps per `fit` epoch: the unit of the tokens/s median."
    )
    parser.add_argument(
        "--curve-points", type=int, default=6, help="Curve points, evenly spaced over the budget, the last at its end."
    )
    parser.add_argument(
        "--curve-sentences",
        type=int,
        default=300,
        help="First --curve-split sentences scored (greedy) at curve points.",
    )
    parser.add_argument(
        "--curve-split",
        default="test",
        choices=("test", "validation"),
        help="The split the curve scores: test (test_2016_flickr) or validation (val; choose settings by this one).",
    )
    parser.add_argument("--train-size", type=int, default=0, help="First N training pairs only; 0 = all 29,000.")
    parser.add_argument("--test-size", type=int, default=0, help="First N test_2016 sentences only; 0 = all 1,000.")
    parser.add_argument(
        "--export-dir",
        default=None,
        help="Export our trained model as train.py does: EXPORT_DIR/transformer/VERSION, text in (default: none).",
    )
    parser.add_argument("--out", default="benchmarks/results/multi30k.json", help="Results JSON (dirs are created).")
    parser.add_argument("--plot", default=None, help="BLEU-versus-minutes PNG (default: --out with .png).")
    parser.add_argument(
        "--work-dir",
        default="benchmarks/results/multi30k_work",
        help="Cached vocabularies and each worker's files (configs, result JSON).",
    )
    parser.add_argument("--worker", choices=MODELS, default=None, help=argparse.SUPPRESS)  # set by the parent


def check_args(parser, args):
    """Check the flags (`parser.error` on a bad one) and fill in the defaults that depend on others."""
    if not args.minutes > 0:
        parser.error(f"--minutes must be > 0. Received: {args.minutes}")
    names = ("vocab", "max_len", "batch_size", "beam_size", "chunk_steps", "curve_points", "curve_sentences")
    common.check_at_least(parser, args, names, 1)
    common.check_at_least(parser, args, ("batch_tokens", "train_size", "test_size"), 0)
    for name, value in RECIPES[args.recipe].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not 0 <= args.ema_momentum < 1:
        parser.error(f"--ema-momentum must be in [0, 1). Received: {args.ema_momentum}")
    if not args.ema_ramp >= 1:
        parser.error(f"--ema-ramp must be >= 1. Received: {args.ema_ramp}")
    if not 0 <= args.lr_cooldown < 1:
        parser.error(f"--lr-cooldown must be in [0, 1). Received: {args.lr_cooldown}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        parser.error(f"--dropout must be in [0, 1). Received: {args.dropout}")
    if not 0 <= args.late_dropout < 1:
        parser.error(f"--late-dropout must be in [0, 1). Received: {args.late_dropout}")
    our_dropout = PRESETS[args.preset]["dropout_rate"] if args.dropout is None else args.dropout
    if args.late_dropout and our_dropout == 0:
        parser.error("--late-dropout raises our model's dropout rate, which is 0 here: give --dropout above 0")
    if not args.late_dropout_epochs >= 0:
        parser.error(f"--late-dropout-epochs must be >= 0. Received: {args.late_dropout_epochs}")
    args.validation_decodings = parse_decodings(parser, args.validation_decodings)
    if args.joint_vocab is None:  # one vocabulary where one table embeds both sides
        args.joint_vocab = "on" if args.embedding_sharing == "all" else "off"
    if args.embedding_sharing == "all" and args.joint_vocab != "on":
        parser.error("--embedding-sharing all embeds both sides with one table: it needs --joint-vocab on")
    if args.warmup is None:
        args.warmup = max(1, round(WARMUP_STEPS_PER_MINUTE * args.minutes))
    common.check_at_least(parser, args, ("warmup",), 1)
    models = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        parser.error(f"--models takes names from {', '.join(MODELS)}. Received: {args.models!r}")
    args.models = [name for name in MODELS if name in models]
    if args.export_dir and "ours" not in args.models:
        parser.error("--export-dir exports our model: add ours to --models")
    args.plot = args.plot or str(Path(args.out).with_suffix(".png"))
    args.precision_choice = choose_precision(args.precision)  # the workers are given its policy
    args.policy = args.precision_choice.policy
    for split in SPLIT_FILES:
        for path in split_paths(args.data, split):
            if not path.is_file():
                parser.error(f"--data {args.data} has no {path.name}")
    return args


def parse_decodings(parser, text):
    """`--validation-decodings` as `[(beam_size, length_penalty), ...]` (`parser.error` on a bad one)."""
    decodings = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        beam, _, alpha = item.partition(":")
        try:
            decoding = (int(beam), float(alpha))
        except ValueError:
            decoding = None
        if decoding is None or decoding[0] < 1 or not decoding[1] >= 0:
            parser.error(f"--validation-decodings takes BEAM:ALPHA items, BEAM >= 1, ALPHA >= 0. Received: {item!r}")
        decodings.append(decoding)
    return decodings


def parse_args(argv=None):
    """The benchmark's flags, checked and completed (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    add_corpus_and_schedule_flags(parser)
    add_model_and_decoding_flags(parser)
    add_measurement_and_output_flags(parser)
    return check_args(parser, parser.parse_args(argv))


def split_paths(data_dir, split):
    """`(German file, English file)` of a Multi30k split."""
    return tuple(
        Path(data_dir) / f"{SPLIT_FILES[split]}.{language}.gz" for language in (SOURCE_LANGUAGE, TARGET_LANGUAGE)
    )


def read_split(data_dir, split, size=0):
    """`ParallelText` of a split, cut to its first `size` pairs (0: all)."""
    return read_parallel_files(*split_paths(data_dir, split)).head(size)


# ---------------------------------------------------------------- parent: vocabularies, workers, report


def vocabulary_paths(args):
    """`{"source": path, "target": path}` of the cached vocabularies for `--vocab`, `--train-size`."""
    joint = "_joint" if args.joint_vocab == "on" else ""
    folder = Path(args.work_dir) / f"vocab{args.vocab}{joint}_train{args.train_size or 'all'}"
    return {side: folder / f"{side}_vocab.txt" for side in ("source", "target")}


def vocabulary_origin(args):
    """What the vocabularies are learned from: a different corpus in the same work dir relearns."""
    train_paths = split_paths(args.data, "train")
    return {
        "files": [str(path.resolve()) for path in train_paths],
        "file_bytes": [path.stat().st_size for path in train_paths],
        "train_size": args.train_size,
        "vocab": args.vocab,
        "joint": args.joint_vocab == "on",
    }


def prepare_vocabularies(args):
    """Learn the vocabularies from the training split, unless cached for the same files and sizes.

    Returns:
        `{"source_size", "target_size", "seconds" (0 when cached), "cached", "folder"}`.
    """
    paths = vocabulary_paths(args)
    folder = paths["source"].parent
    origin = vocabulary_origin(args)
    origin_path = folder / "origin.json"
    cached = all(path.is_file() for path in paths.values()) and (
        origin_path.is_file() and json.loads(origin_path.read_text()) == origin
    )
    seconds = 0.0
    if not cached:
        print(f"Learning {args.vocab}-piece vocabularies from the training split into {folder} ...", flush=True)
        start = time.perf_counter()
        train = read_split(args.data, "train", args.train_size)
        folder.mkdir(parents=True, exist_ok=True)
        joint = args.joint_vocab == "on"
        vocabularies = learn_translation_vocabularies(train.sources, train.targets, args.vocab, args.vocab, joint)
        for side, path in paths.items():
            write_vocabulary(vocabularies[side], path)
        origin_path.write_text(json.dumps(origin, indent=2) + "\n")
        seconds = time.perf_counter() - start
    sizes = {side: sum(1 for _ in path.open(encoding="utf-8")) for side, path in paths.items()}
    print(
        f"Vocabularies: {sizes['source']} {SOURCE_LANGUAGE} / {sizes['target']} {TARGET_LANGUAGE} pieces "
        f"({'cached' if cached else f'learned in {seconds:.0f} s'}, {folder})",
        flush=True,
    )
    return {
        "source_size": sizes["source"],
        "target_size": sizes["target"],
        "seconds": round(seconds, 1),
        "cached": cached,
        "folder": str(folder),
    }


def worker_dir(args, name):
    """The work folder of model `name`'s worker: its configs and result JSON."""
    return Path(args.work_dir) / name


def run_workers(args, argv):
    """Run every model's worker, one after the other; `{name: result dict}`."""
    results = {}
    for name in args.models:
        result_path = worker_dir(args, name) / WORKER_RESULT_FILE
        result_path.unlink(missing_ok=True)
        print(f"\n=== {name}: training for {args.minutes:g} minutes ===", flush=True)
        start = time.perf_counter()
        command = common.worker_command(__file__, argv, "--precision", args.policy, "--worker", name)
        completed = subprocess.run(command)
        if completed.returncode != 0 or not result_path.is_file():
            raise RuntimeError(f"The {name} worker failed (exit status {completed.returncode}); see its output above")
        results[name] = json.loads(result_path.read_text())
        results[name]["process_wall_seconds"] = round(time.perf_counter() - start, 1)
    return results


def report_header(args, first):
    """The report's first line: the corpus, budget, model, batching and schedule of the run."""
    dropout = "the preset's" if args.dropout is None else f"{args.dropout:g}"
    averaging = f"weight averaging {args.ema_momentum:g} (ramp {args.ema_ramp:g})" if args.ema_momentum else None
    return (
        f"Multi30k {SOURCE_LANGUAGE}->{TARGET_LANGUAGE}, {args.minutes:g} training minutes per model, preset "
        f"{args.preset}, vocab {first['vocab_sizes'][0]}/{first['vocab_sizes'][1]}, {first['train_pairs']:,} "
        f"training pairs ({first['dropped_pairs']} dropped, > {args.max_len} tokens), batch "
        f"{f'{args.batch_tokens} tokens' if args.batch_tokens else f'{args.batch_size} sentences'}, warm-up "
        f"{args.warmup}, lr scale {args.lr_scale:g}, {args.policy}, jit {'on' if args.jit else 'off'}, "
        f"{os.cpu_count()} CPUs; ours: {args.attention_initialization} attention initialization, "
        f"{averaging or 'no weight averaging'}, "
        f"{f'learning-rate cooldown over the last {args.lr_cooldown:.0%}' if args.lr_cooldown else 'no cooldown'}, "
        f"embedding sharing {args.embedding_sharing}, dropout {dropout}"
        f"{f' raised to {args.late_dropout:g} after {args.late_dropout_epochs:g} epochs' if args.late_dropout else ''}"
        f"; joint vocabulary {args.joint_vocab}"
    )


def report_row(results, label, path, style, compare=None):
    """One line of the report's table.

    Args:
        results: `{model name: worker result}`, one or both models.
        label: the row's label.
        path: the keys of the value in a worker result (`common.value_at`).
        style: formats a value, e.g. `"{:.2f}".format`.
        compare: with both models, `"ratio"` (ours / keras-hub), `"difference"` (ours -
            keras-hub, in BLEU) or `None`.

    Returns:
        The line, without a newline.
    """
    values = [common.value_at(result, path) for result in results.values()]
    line = f"{label:<34}" + "".join(f"{style(value):>18}" for value in values)
    if len(values) == 2 and compare == "ratio":
        line += common.format_ratio(values[0] / values[1], width=18)
    elif len(values) == 2 and compare == "difference":
        line += f"{values[0] - values[1]:>+13.2f} BLEU"
    return line


def print_report(args, results, cpu):
    """Both models side by side: training, memory, curve and test scores."""
    names = list(results)
    both = len(names) == 2
    first = results[names[0]]
    print()
    print(report_header(args, first))
    print(common.cpu_line(cpu))
    print(f"precision: {args.precision_choice.describe()}")
    header = f"{'':<34}" + "".join(f"{name:>18}" for name in names) + (f"{'ours / keras-hub':>18}" if both else "")
    print(header)
    print("-" * len(header))
    rows = [
        ("parameters", ["parameters"], "{:,}".format, "ratio"),
        ("training minutes (clock)", ["train", "minutes"], "{:.2f}".format),
        ("steps", ["train", "steps"], "{:,}".format, "ratio"),
        ("epochs", ["train", "epochs"], "{:.2f}".format, "ratio"),
        ("target tokens/s (median chunk)", ["train", "target_tokens_per_second_median"], "{:,}".format, "ratio"),
        ("peak memory MiB", ["peak_rss_mib"], "{:,.0f}".format, "ratio"),
        (
            f"curve BLEU, end ({args.curve_split} {args.curve_sentences})",
            ["curve", -1, "bleu"],
            "{:.2f}".format,
            "difference",
        ),
        (f"test_2016 BLEU ({first['test']['sentences']} sent.)", ["test", "bleu"], "{:.2f}".format, "difference"),
        ("  decoding", ["decoding"], str),
        ("test_2016 BLEU, greedy", ["test_greedy", "bleu"], "{:.2f}".format, "difference"),
        ("test_2016 chrF", ["test", "chrf"], "{:.2f}".format),
        ("scoring pauses s (curve + test)", ["wall_seconds", "scoring"], "{:.0f}".format),
    ]
    for row in rows:
        print(report_row(results, *row))
    print(f"sacreBLEU: {first['test']['bleu_signature']}")
    for score in results.get("ours", {}).get("validation_decodings", []):
        decoding = decoding_name(score["beam_size"], score["length_penalty"])
        scores = f"BLEU {score['bleu']:.2f}, chrF {score['chrf']:.2f}"
        print(f"ours on validation ({score['sentences']} sent.), {decoding}: {scores}")
    if both:
        peer_final = results["keras-hub"]["curve"][-1]
        reached = minutes_to_reach(results["ours"]["curve"], peer_final["bleu"])
        print(
            f"ours reached keras-hub's curve BLEU at {peer_final['minutes']:.1f} min ({peer_final['bleu']:.2f}) "
            + (
                f"at {reached:.1f} min ({reached / peer_final['minutes']:.0%} of the time; linear between curve points)"
                if reached is not None
                else "never"
            )
        )
        same = results["ours"]["batch_fingerprint"] == results["keras-hub"]["batch_fingerprint"]
        print(f"same batches (first {FINGERPRINT_BATCHES} fingerprinted): {'yes' if same else 'NO'}")


def plot_curves(args, results, path):
    """BLEU against training minutes, one line per model (and its test score as a star), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, result in results.items():
        plot_model_curve(axes, args, name, result)
    axes.set_xlabel("training minutes (clock paused while scoring)")
    axes.set_ylabel("sacreBLEU")
    axes.set_title(f"Multi30k de->en, preset {args.preset}, {args.policy}, {os.cpu_count()} CPUs")
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_model_curve(axes, args, name, result):
    """One model's curve on `axes`: the scored weights, the trained ones if averaged, the test star."""
    points = result["curve"]
    averaged = "bleu_trained_weights" in points[0]
    minutes = [p["minutes"] for p in points]
    line = axes.plot(
        minutes,
        [p["bleu"] for p in points],
        marker="o",
        label=f"{name}: greedy, first {args.curve_sentences} {SPLIT_FILES[args.curve_split]} sentences"
        + (", averaged weights" if averaged else ""),
    )[0]
    if averaged:
        axes.plot(
            minutes,
            [p["bleu_trained_weights"] for p in points],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{name}: the same, weights as trained (no averaging)",
        )
    axes.plot(
        [points[-1]["minutes"]],
        [result["test"]["bleu"]],
        marker="*",
        markersize=14,
        linestyle="none",
        color=line.get_color(),
        label=f"{name}: all {result['test']['sentences']} {SPLIT_FILES['test']} sentences, {result['decoding']}",
    )


def minutes_to_reach(curve, bleu):
    """The training minutes at which a curve first reaches `bleu`, linear between its points.

    Args:
        curve: the curve points of one model's results, `{"minutes", "bleu"}` each, in order.
        bleu: the score to reach.

    Returns:
        float minutes, or None when the curve never reaches `bleu`.
    """
    before_minutes, before_bleu = 0.0, None
    for point in curve:
        if point["bleu"] >= bleu:
            if before_bleu is None or point["bleu"] == before_bleu:
                return point["minutes"]
            share = (bleu - before_bleu) / (point["bleu"] - before_bleu)
            return before_minutes + share * (point["minutes"] - before_minutes)
        before_minutes, before_bleu = point["minutes"], point["bleu"]
    return None


def comparison(results):
    """The JSON's ours-against-keras-hub summary of two models' results."""
    peer_final = results["keras-hub"]["curve"][-1]
    return {
        "ours_minutes_to_keras_hub_final_curve_bleu": minutes_to_reach(results["ours"]["curve"], peer_final["bleu"]),
        "keras_hub_curve_minutes": peer_final["minutes"],
        "test_bleu_ours_minus_keras_hub": round(
            results["ours"]["test"]["bleu"] - results["keras-hub"]["test"]["bleu"], 2
        ),
        "target_tokens_per_second_ours_over_keras_hub": round(
            common.ours_over_keras_hub(results, "train", "target_tokens_per_second_median"), 3
        ),
        "steps_ours_over_keras_hub": round(common.ours_over_keras_hub(results, "train", "steps"), 3),
        "peak_rss_ours_over_keras_hub": round(common.ours_over_keras_hub(results, "peak_rss_mib"), 3),
        "same_batches": results["ours"]["batch_fingerprint"] == results["keras-hub"]["batch_fingerprint"],
    }


def run_parent(args, argv):
    """Vocabularies, then each model's worker, then the report, the JSON and the plot."""
    started = time.perf_counter()
    cpu = common.cpu_info()
    print(f"Precision: {args.precision_choice.describe()}", flush=True)
    if args.precision_choice.warning:
        print(args.precision_choice.warning, flush=True)
    vocabularies = prepare_vocabularies(args)
    results = run_workers(args, argv)
    print_report(args, results, cpu)
    report = {
        "config": {key: value for key, value in vars(args).items() if key not in ("worker", "precision_choice")},
        "command": common.command_line(argv),
        "versions": common.package_versions(VERSIONS),
        **common.machine(cpu),
        "precision": args.precision_choice.to_dict(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "vocabularies": vocabularies,
        "models": results,
        "wall_seconds": {"total": round(time.perf_counter() - started, 1), "vocabularies": vocabularies["seconds"]},
    }
    if len(results) == 2:
        report["comparison"] = comparison(results)
    out, plot = common.write_json(args.out, report), Path(args.plot)
    plot_curves(args, results, plot)
    print(f"wrote {out} and {plot}")
    if report.get("comparison", {}).get("same_batches") is False:
        print("error: the two models did not train on the same batches", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- worker: train one model, score it


class TrainingClock(keras.callbacks.Callback):
    """Training wall clock, paused while the model is scored; stops `fit` at the budget.

    The clock runs from the start of `fit` (the first step's tracing included) to its end, except
    inside `with clock.paused():`. After every step it checks the budget and sets
    `model.stop_training`, so training ends after the step that reaches it. It also records
    the clock seconds and steps of every `fit` epoch (chunk).
    """

    def __init__(self, budget_seconds):
        super().__init__()
        self.budget_seconds = budget_seconds
        self.steps = 0
        self.chunk_seconds, self.chunk_steps = [], []
        self._elapsed, self._running_since = 0.0, None

    def seconds(self):
        running = time.perf_counter() - self._running_since if self._running_since is not None else 0.0
        return self._elapsed + running

    @contextlib.contextmanager
    def paused(self):
        running = self._running_since is not None
        self._elapsed, self._running_since = self.seconds(), None
        try:
            yield
        finally:
            if running:
                self._running_since = time.perf_counter()

    def on_train_begin(self, logs=None):
        self._running_since = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._chunk_start, self._chunk_start_steps = self.seconds(), self.steps

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.seconds() >= self.budget_seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.chunk_seconds.append(self.seconds() - self._chunk_start)
        self.chunk_steps.append(self.steps - self._chunk_start_steps)

    def on_train_end(self, logs=None):
        self._elapsed, self._running_since = self.seconds(), None


class CooldownToBudget(keras.callbacks.Callback):
    """Ends the optimizer's learning-rate cooldown at the step where the clock will reach the budget.

    A budget in minutes is a number of steps only once the machine's speed is known, and that
    speed moves. So the end step (`AveragingAdam.cooldown_end_step`) is 0, not known, until the
    first chunk ends, and after every chunk it is re-estimated as the steps taken plus the budget
    left times the steps per clock second of the chunks so far (all but the first, which
    includes graph tracing, once there are two). Run it after the `TrainingClock` in `fit`'s
    callbacks, so that the clock has closed the chunk.

    Args:
        clock: the run's `TrainingClock`.
    """

    def __init__(self, clock):
        super().__init__()
        self.clock = clock
        self.end_steps = []  # the estimate after each chunk

    def on_train_begin(self, logs=None):
        self.model.optimizer.cooldown_end_step.assign(0.0)

    def on_epoch_end(self, epoch, logs=None):
        seconds, steps = self.clock.chunk_seconds, self.clock.chunk_steps
        if len(seconds) > 1:
            seconds, steps = seconds[1:], steps[1:]
        rate = sum(steps) / max(sum(seconds), 1e-9)
        left = max(self.clock.budget_seconds - self.clock.seconds(), 0.0)
        end = int(self.model.optimizer.iterations) + round(left * rate)
        self.model.optimizer.cooldown_end_step.assign(float(end))
        self.end_steps.append(end)


class BleuCurve(keras.callbacks.Callback):
    """Greedy BLEU of a fixed set of sentences at given moments of the training clock.

    Args:
        clock: the run's `TrainingClock` (paused while scoring).
        translator: object with `translate(string[B]) -> {"translation": string[B]}`.
        text: `ParallelText` to translate and score.
        moments: clock seconds at which to score during training. One more point is scored at
            the step that ends the budget (`clock` stops training there); call `score()` for
            any other.

    With weight averaging on (`--ema-momentum`), a point scores the averaged weights, those
    training would end with there, and, as `bleu_trained_weights`, the weights training reached.
    """

    def __init__(self, clock, translator, text, moments):
        super().__init__()
        self.clock, self.translator, self.text = clock, translator, text
        self.moments = sorted(moments)
        self.points = []
        self.scoring_seconds = 0.0
        self.scored_budget_end = False

    def on_train_batch_end(self, batch, logs=None):
        if self.model.stop_training and not self.scored_budget_end:  # the clock ended training
            self.scored_budget_end = True
            self.score()
        elif self.moments and self.clock.seconds() >= self.moments[0]:
            while self.moments and self.clock.seconds() >= self.moments[0]:
                self.moments.pop(0)
            self.score()

    def _bleu(self):
        hypotheses = translate_texts(self.translator, self.text.sources)
        return round(sacrebleu.metrics.BLEU().corpus_score(hypotheses, [self.text.targets]).score, 2)

    def score(self):
        with self.clock.paused():
            start = time.perf_counter()
            with averaged_weights(self.model) as averaged:
                point = {"minutes": round(self.clock.seconds() / 60, 3), "steps": self.clock.steps}
                point["bleu"] = self._bleu()
            if averaged:
                point["bleu_trained_weights"] = self._bleu()
            seconds = time.perf_counter() - start
            self.scoring_seconds += seconds
            self.points.append({**point, "scoring_seconds": round(seconds, 1)})
            print(
                f"  curve: {point['minutes']:.2f} min, step {point['steps']}, greedy BLEU {point['bleu']:.2f}"
                + (f" (averaged weights; trained weights {point['bleu_trained_weights']:.2f})" if averaged else ""),
                flush=True,
            )


class KerasHubTranslator:
    """Text to text with the keras-hub peer: our tokenizers around its cached greedy generation.

    `translate` has the interface of our `Translator`'s (`string[B]` -> `{"translation":
    string[B]}`), traced once for any batch size. Sources longer than `max_source_len` pieces
    are cut (the peer's position table has that many rows); generation stops once every
    sentence has produced `</s>`, or after `max_target_len` tokens.
    """

    def __init__(self, hub, source_tokenizer, target_tokenizer, max_source_len, max_target_len):
        self.hub = hub
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.max_source_len, self.max_target_len = max_source_len, max_target_len
        self.translate = tf.function(self._translate, input_signature=[tf.TensorSpec([None], tf.string)])

    def _translate(self, text):
        pieces = self.source_tokenizer.tokenize(text)  # (B, (S))
        source_ids = pieces[:, : self.max_source_len].to_tensor(default_value=PAD_ID)  # (B, S)
        output_ids = self.hub.generate(source_ids, self.max_target_len, end_id=END_ID)  # (B, L)
        return {"translation": self.target_tokenizer.detokenize(output_ids)}


def batch_fingerprint(dataset, batches):
    """SHA-256 of the ids and shapes of a dataset's first batches."""
    digest = hashlib.sha256()
    for (source_ids, target_in_ids), target_out_ids in dataset.take(batches):
        for tensor in (source_ids, target_in_ids, target_out_ids):
            array = tensor.numpy()
            digest.update(str(array.shape).encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def worker_train_config(args, name):
    """The `TrainConfig` of a worker.

    It holds the loss, optimizer and schedule settings for `compile_transformer`, and the corpus
    files and decoding settings for the export.
    """
    return TrainConfig(
        preset=args.preset,
        corpus="files",
        train_files=tuple(map(str, split_paths(args.data, "train"))),
        validation_files=tuple(map(str, split_paths(args.data, "validation"))),
        test_files=tuple(map(str, split_paths(args.data, "test"))),
        train_size=args.train_size,
        source_vocab_size=args.vocab,
        target_vocab_size=args.vocab,
        joint_vocab=args.joint_vocab == "on",
        steps_per_epoch=args.chunk_steps,
        batch_size=args.batch_size,
        batch_tokens=args.batch_tokens,
        warmup_steps=args.warmup,
        learning_rate_scale=args.lr_scale,
        label_smoothing=args.label_smoothing,
        precision=args.policy,
        ema_momentum=args.ema_momentum if name == "ours" else 0.0,
        ema_ramp=args.ema_ramp,
        lr_cooldown=args.lr_cooldown if name == "ours" else 0.0,
        seed=args.seed,
        run_dir=str(worker_dir(args, name)),
        export_dir=args.export_dir or "saved_models",
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
    ).validate()


@dataclass
class WorkerData:
    """What a worker trains and scores on: the tokenizers, the text and the encoded training pairs."""

    source_tokenizer: SubwordTokenizer
    target_tokenizer: SubwordTokenizer
    train_text: ParallelText
    test_text: ParallelText
    curve_text: ParallelText  # the first --curve-sentences of --curve-split
    pairs: EncodedPairs


def load_worker_data(args):
    """What a worker trains and scores on, as a `WorkerData`.

    Returns:
        The tokenizers of the parent's cached vocabularies, the training and test text, and the
        training pairs that fit in `--max-len` tokens per side.
    """
    paths = vocabulary_paths(args)
    if not all(path.is_file() for path in paths.values()):
        raise FileNotFoundError(f"No vocabularies in {paths['source'].parent}: run without --worker first")
    source_tokenizer = SubwordTokenizer(str(paths["source"]), name="source_tokenizer")
    target_tokenizer = SubwordTokenizer(str(paths["target"]), name="target_tokenizer")
    train_text = read_split(args.data, "train", args.train_size)
    test_text = read_split(args.data, "test", args.test_size)
    curve_text = read_split(args.data, args.curve_split, args.curve_sentences)
    pairs = encode_pairs(
        train_text.sources, train_text.targets, source_tokenizer, target_tokenizer, args.max_len, args.max_len
    )
    return WorkerData(source_tokenizer, target_tokenizer, train_text, test_text, curve_text, pairs)


def save_worker_configs(args, name, data, run_dir):
    """Make the worker's configs and save them into `run_dir`, where the export reads them.

    Returns:
        `(model_config, train_config)`: the `ModelConfig` at `--preset` with the vocabularies'
        sizes, and `worker_train_config`.
    """
    model_config = preset(
        args.preset,
        source_vocab_size=data.source_tokenizer.vocab_size,
        target_vocab_size=data.target_tokenizer.vocab_size,
        max_source_len=args.max_len,
        max_target_len=args.max_len,
        attention_initialization=args.attention_initialization,
        embedding_sharing=args.embedding_sharing if name == "ours" else "none",
        **({"dropout_rate": args.dropout} if name == "ours" and args.dropout is not None else {}),
    )
    model_config.save(run_dir / MODEL_CONFIG_FILE)
    train_config = worker_train_config(args, name)
    train_config.save(run_dir / "train_config.json")
    return model_config, train_config


def build_worker_model(args, name, model_config, train_config, data, run_dir):
    """Model `name`, compiled by `compile_transformer`, and its translator factory.

    Returns:
        `(model, translator)`: `translator(beam_size, length_penalty=None)` gives an object with
        our `Translator`'s `translate` (the keras-hub peer decodes greedily only: `beam_size` 1).
    """
    if name == "ours":
        model = build_transformer(model_config)

        def translator(beam_size, length_penalty=None):
            return make_translator(
                model,
                model_config,
                data.source_tokenizer,
                data.target_tokenizer,
                run_dir,
                train_config,
                beam_size=beam_size,
                length_penalty=length_penalty,
            )

    else:
        hub = KerasHubTransformer(model_config)
        model = hub.model

        def translator(beam_size):
            assert beam_size == 1, "the keras-hub peer decodes greedily"
            return KerasHubTranslator(hub, data.source_tokenizer, data.target_tokenizer, args.max_len, args.max_len)

    compile_transformer(model, model_config, train_config)
    model.jit_compile = args.jit
    return model, translator


def training_batches(args, pairs):
    """The training batches and their fingerprint.

    Returns:
        `(fingerprint, dataset)`: the fingerprint of the first `FINGERPRINT_BATCHES` (taken
        from a second, identical dataset) and the endless, shuffled, bucketed batches.
    """
    batching = dict(batch_size=args.batch_size, batch_tokens=args.batch_tokens, shuffle=True, repeat=True)
    fingerprint = batch_fingerprint(make_dataset(pairs, seed=args.seed, **batching), FINGERPRINT_BATCHES)
    return fingerprint, make_dataset(pairs, seed=args.seed, **batching)


def late_dropout(args, name, model_config, pairs):
    """Our model's `LateDropout` callback of `--late-dropout`, or None (off, or the keras-hub model).

    `--late-dropout-epochs` becomes a step: that many times the batches of one pass over `pairs`.
    """
    if name != "ours" or not args.late_dropout:
        return None
    one_pass = make_dataset(pairs, batch_size=args.batch_size, batch_tokens=args.batch_tokens)
    steps_per_pass = sum(1 for _ in one_pass)
    return LateDropout(
        args.late_dropout, round(args.late_dropout_epochs * steps_per_pass), from_rate=model_config.dropout_rate
    )


def train_in_budget(args, model, train_data, greedy, curve_text, extra_callbacks=()):
    """`model.fit` until the training clock reaches `--minutes`, scoring the curve on the way.

    Returns:
        `(history, clock, curve, fit_seconds, cooldown_end_steps)`: `fit`'s history, the
        `TrainingClock`, the `BleuCurve` (its last point at the end of training), `fit`'s wall
        seconds, the curve's scoring pauses included, and the learning-rate cooldown's end-step
        estimates, one per chunk (empty without a cooldown).
    """
    budget = args.minutes * 60
    clock = TrainingClock(budget)
    curve = BleuCurve(
        clock,
        greedy,
        curve_text,
        [budget * i / args.curve_points for i in range(1, args.curve_points)],
    )
    cooldown = [CooldownToBudget(clock)] if model.optimizer.cooldown else []
    fit_start = time.perf_counter()
    history = model.fit(
        train_data,
        epochs=MAX_CHUNKS,
        steps_per_epoch=args.chunk_steps,
        shuffle=False,  # the dataset shuffles itself
        callbacks=[clock, *cooldown, curve, *extra_callbacks],
        verbose=2,
    )
    fit_seconds = time.perf_counter() - fit_start
    if not curve.scored_budget_end:  # fit ran out of chunks before the budget
        curve.score()
    return history, clock, curve, fit_seconds, cooldown[0].end_steps if cooldown else []


def training_summary(args, history, clock, pairs):
    """The JSON's `train` section: clock minutes, steps, epochs, tokens/s, per-chunk times, last loss."""
    pair_target_tokens = len(pairs) * pairs.mean_target_tokens()  # </s> included, as in the labels
    tokens = np.array(history.history["target_tokens"])  # per chunk
    seconds = np.array(clock.chunk_seconds)
    per_second = tokens / seconds
    # The median leaves out the last chunk, cut short by the budget (unless no chunk is complete).
    complete = np.array(clock.chunk_steps) == args.chunk_steps
    median_chunks = per_second[complete] if complete.any() else per_second
    return {
        "minutes": round(clock.seconds() / 60, 3),
        "steps": clock.steps,
        "epochs": round(float(tokens.sum()) / pair_target_tokens, 3),
        "target_tokens": int(tokens.sum()),
        "target_tokens_per_second_median": round(float(np.median(median_chunks))),
        "target_tokens_per_second_mean": round(float(tokens.sum()) / clock.seconds()),
        "chunk_seconds": [round(s, 2) for s in seconds.tolist()],
        "chunk_steps": clock.chunk_steps,
        "chunk_target_tokens": [int(t) for t in tokens],
        "final_loss": round(float(history.history["loss"][-1]), 4),
        "final_accuracy": round(float(history.history["accuracy"][-1]), 4),
    }


def score_test(args, name, translator, greedy, test_text):
    """Translate the test split with the model's final decoding and greedily; score both.

    The final decoding is ours' beam search when `--beam-size` > 1, greedy otherwise.

    Returns:
        `(result, hypotheses, final)`: `{"model", "decoding", "test", "test_greedy"}`, the final
        decoding's translations and its translator.
    """
    references = test_text.targets
    result = {"model": name, "decoding": "greedy"}
    final = greedy
    if name == "ours" and args.beam_size > 1:
        final = translator(args.beam_size)
        result["decoding"] = decoding_name(args.beam_size, args.length_penalty)
    hypotheses = translate_texts(final, test_text.sources)
    result["test"] = score_translations(hypotheses, references)
    greedy_hypotheses = hypotheses if final is greedy else translate_texts(greedy, test_text.sources)
    result["test_greedy"] = score_translations(greedy_hypotheses, references)
    print(
        f"{name}: test_2016 BLEU {result['test']['bleu']:.2f} ({result['decoding']}), chrF {result['test']['chrf']:.2f}"
        + (f"; greedy BLEU {result['test_greedy']['bleu']:.2f}" if final is not greedy else ""),
        flush=True,
    )
    return result, hypotheses, final


def score_validation_decodings(args, translator):
    """Our trained model on the whole validation split, once per `--validation-decodings` setting.

    Returns:
        `[{"beam_size", "length_penalty", "seconds", "bleu", "chrf", ...}, ...]` (sacreBLEU
        scores of `score_translations`), in the flag's order.
    """
    validation = read_split(args.data, "validation")
    scores = []
    for beam_size, length_penalty in args.validation_decodings:
        start = time.perf_counter()
        hypotheses = translate_texts(translator(beam_size, length_penalty), validation.sources)
        score = score_translations(hypotheses, validation.targets)
        scores.append(
            {"beam_size": beam_size, "length_penalty": length_penalty, "seconds": round(time.perf_counter() - start, 1)}
            | score
        )
        decoding = decoding_name(beam_size, length_penalty)
        print(f"ours: validation BLEU {score['bleu']:.2f}, chrF {score['chrf']:.2f} ({decoding})", flush=True)
    return scores


def decoding_name(beam_size, length_penalty):
    """`greedy` or `beam B, alpha A`."""
    return "greedy" if beam_size == 1 else f"beam {beam_size}, alpha {length_penalty:g}"


def data_facts(model, model_config, data, fingerprint):
    """The JSON's description of what a worker trained: size, vocabularies, pairs, config, batches."""
    return {
        "parameters": int(model.count_params()),
        "vocab_sizes": [data.source_tokenizer.vocab_size, data.target_tokenizer.vocab_size],
        "train_pairs": len(data.pairs),
        "dropped_pairs": data.pairs.num_dropped,
        "skipped_while_reading": data.train_text.skipped,
        "model_config": model_config.to_dict(),
        "batch_fingerprint": fingerprint,
    }


def run_worker(args):
    """Train and score the model of `--worker` in the budget; write its result JSON to its work folder."""
    name, started = args.worker, time.perf_counter()
    keras.mixed_precision.set_global_policy(args.policy)
    keras.utils.set_random_seed(args.seed)
    run_dir = worker_dir(args, name)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = load_worker_data(args)
    model_config, train_config = save_worker_configs(args, name, data, run_dir)
    model, translator = build_worker_model(args, name, model_config, train_config, data, run_dir)
    print(
        f"{name}: {model.count_params():,} parameters, {len(data.pairs):,} training pairs "
        f"({data.pairs.num_dropped} dropped), {args.policy}, warm-up {args.warmup} steps",
        flush=True,
    )
    fingerprint, train_data = training_batches(args, data.pairs)
    greedy = translator(1)
    late = late_dropout(args, name, model_config, data.pairs)
    if late:
        print(
            f"{name}: dropout {model_config.dropout_rate:g} rises to {late.rate:g} at step {late.start_step}",
            flush=True,
        )
    history, clock, curve, fit_seconds, cooldown_end_steps = train_in_budget(
        args, model, train_data, greedy, data.curve_text, [late] if late else []
    )
    peak_after_training = common.peak_rss_mib()
    train = training_summary(args, history, clock, data.pairs)
    print(
        f"{name}: trained {train['minutes']:.2f} min, {train['steps']} steps, {train['epochs']:.2f} epochs, "
        f"{train['target_tokens_per_second_median']:,} target tokens/s (median chunk)",
        flush=True,
    )
    score_start = time.perf_counter()
    result, hypotheses, final = score_test(args, name, translator, greedy, data.test_text)
    test_seconds = time.perf_counter() - score_start
    if name == "ours" and args.validation_decodings:
        result["validation_decodings"] = score_validation_decodings(args, translator)
    if name == "ours" and args.export_dir:
        result["export_path"] = str(export_run(final, train_config))
        print(f"{name}: exported to {result['export_path']}", flush=True)
    test = data.test_text
    result.update(
        **data_facts(model, model_config, data, fingerprint),
        train=train,
        curve=curve.points,
        examples=[
            {"source": s, "reference": r, "translation": h}
            for s, r, h in list(zip(test.sources, test.targets, hypotheses))[:5]
        ],
        late_dropout=late and {"rate": late.rate, "start_step": late.start_step, "raised_at": late.raised_at},
        lr_cooldown=train_config.lr_cooldown and {"share": train_config.lr_cooldown, "end_steps": cooldown_end_steps},
        peak_rss_mib=round(common.peak_rss_mib(), 1),
        peak_rss_mib_after_training=round(peak_after_training, 1),
        wall_seconds={
            "fit": round(fit_seconds, 1),
            "scoring": round(curve.scoring_seconds + test_seconds, 1),
            "worker": round(time.perf_counter() - started, 1),
        },
    )
    common.write_json(run_dir / WORKER_RESULT_FILE, result)
    return 0


def main(argv=None):
    """The parent's run, or with `--worker NAME` one model's worker."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    return run_parent(args, argv)


if __name__ == "__main__":
    sys.exit(main())
