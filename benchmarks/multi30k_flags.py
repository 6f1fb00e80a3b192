"""The flags of benchmarks/multi30k.py: what they are, their checks, and the defaults that follow from others.

`add_corpus_and_schedule_flags`, `add_model_and_decoding_flags` and
`add_measurement_and_output_flags` define them, in the order `--help` lists them. `check_args`
refuses a bad value (`parser.error`) and fills in what depends on other flags:

- `--recipe` gives our model's flags that are not set (`RECIPES`). `best` is per-head attention
  initialization, weight averaging over about the last third of the run (`TrainConfig.ema_momentum`
  0.9999 and `ema_ramp` 3: momentum `min(0.9999, t / (t + 3))` at step t, so the average spans a
  share of the steps taken, whatever the machine's speed) and one embedding table for source,
  target and logits (`ModelConfig.embedding_sharing` all) over one joint vocabulary. `tutorial`
  is the tutorial code's glorot initialization without averaging, with three tables.
- `--joint-vocab` defaults to on exactly when our embedding table is one.
- `--warmup` defaults to `round(1000 * minutes / 30)`, at least 1, so the Noam learning rate
  peaks about a third of the way into the budget and decays for the rest, whatever the budget.
- `--precision auto` is resolved once, in the parent (`choose_precision`), and the policy it
  chose is given to both workers: `mixed_bfloat16` where the hardware computes bfloat16 natively
  (a CPU with AVX512-BF16 or AMX, a GPU of compute capability 8.0+, a TPU), `float32`
  elsewhere. An explicit `--precision mixed_bfloat16` where bfloat16 is emulated runs, with a
  warning.
"""

import argparse
from pathlib import Path

import common
from multi30k_data import SPLIT_FILES, split_paths

from keras_transformer.config import ATTENTION_INITIALIZATIONS, EMBEDDING_SHARING, PRESETS
from keras_transformer.precision import choose_precision

MODELS = ("ours", "keras-hub")
PRECISIONS = ("auto", "float32", "mixed_bfloat16")
# Noam warm-up steps per budget minute: about a third of the roughly 100 steps a minute that the
# medium preset took with 64-sentence batches in float32 on 2 CPU cores, so that the rate peaks a
# third of the way in.
WARMUP_STEPS_PER_MINUTE = 1000 / 30
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
    add_recipe_flags(parser)
    add_dropout_flags(parser)
    add_decoding_flags(parser)
    parser.add_argument("--seed", type=int, default=0, help="Seed of the weights, dropout and batch order.")
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"Comma-separated models to train, from {', '.join(MODELS)}."
    )


def add_recipe_flags(parser):
    """`--recipe` and the flags of our model whose defaults it gives: initialization, averaging, cooldown, tables."""
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


def add_dropout_flags(parser):
    """Our model's dropout rate, and the late rise of it."""
    parser.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="Our model's dropout rate (ModelConfig.dropout_rate; keras-hub keeps the preset's; default: the "
        "preset's, 0.1 at medium).",
    )
    parser.add_argument(
        "--attention-residual-dropout",
        type=float,
        default=None,
        help="Our model's dropout on each attention sub-layer's output before its residual connection (the "
        "paper's residual dropout, ModelConfig.attention_residual_dropout_rate; default: the variant's, 0 in "
        "the library default).",
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


def add_decoding_flags(parser):
    """Our model's test decoding (beam size, length penalty) and the validation decodings to compare."""
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
    if args.attention_residual_dropout is not None and not 0 <= args.attention_residual_dropout < 1:
        parser.error(f"--attention-residual-dropout must be in [0, 1). Received: {args.attention_residual_dropout}")
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
