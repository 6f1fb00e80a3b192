"""The flags of the Multi30k study: what they are, their checks, and the defaults that follow from others.

`add_corpus_flags`, `add_shared_config_flags`, `add_our_model_flags` and
`add_measurement_and_output_flags` define them, in the order `--help` lists them. A flag that sets
a field of `TrainConfig` or `ModelConfig` has the field's name and help (`flags.add_config_flags`),
and the configs' own `validate()` checks its value (`check_args` builds our model's configs with
`flags.config_from_flags`); the study's own flags (the budget, the curve, late dropout, the
validation decodings, the models) are checked here. `check_args` refuses a bad value
(`parser.error`) and fills in what depends on other flags:

- `--recipe` gives our model's flags that are not set (`RECIPES`). `best` is per-head attention
  initialization, weight averaging over about the last third of the run (`TrainConfig.ema_momentum`
  0.9999 and `ema_ramp` 3: momentum `min(0.9999, t / (t + 3))` at step t, so the average spans a
  share of the steps taken, whatever the machine's speed) and one embedding table for source,
  target and logits (`ModelConfig.embedding_sharing` all) over one joint vocabulary. `tutorial`
  is the tutorial code's glorot initialization without averaging, with three tables.
- `--joint-vocab` defaults to true exactly when our embedding table is one.
- `--warmup-steps` defaults to `round(1000 * minutes / 30)`, at least 1, so the Noam learning rate
  peaks about a third of the way into the budget and decays for the rest, whatever the budget.
- `--precision auto` is resolved once, in the parent (`choose_precision`), and the policy it
  chose is given to both workers: `mixed_bfloat16` where the hardware computes bfloat16 natively
  (a CPU with AVX512-BF16 or AMX, a GPU of compute capability 8.0+, a TPU), `float32`
  elsewhere. An explicit `--precision mixed_bfloat16` where bfloat16 is emulated runs, with a
  warning.
- `--beam-size` is both models' test decoding (ours: our beam search with `--length-penalty`;
  keras-hub's: `keras_hub.samplers.BeamSampler`, which has no length penalty); both models are
  scored greedily too.
"""

import argparse
from pathlib import Path

from benchmarks.harness import flags
from benchmarks.translation.multi30k.data import SPLIT_FILES, split_paths, vocabulary_sizes
from benchmarks.translation.multi30k.models import model_settings, train_settings
from keras_transformer.config import PRESETS, ModelConfig, TrainConfig
from keras_transformer.precision import choose_precision

MODELS = ("ours", "keras-hub")
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
# Config flags whose value, when not given, comes from another flag: `None` until `check_args`.
_DEPENDENT_DEFAULTS = {
    "joint_vocab": "true exactly when our --embedding-sharing is all",
    "warmup_steps": "round(1000 * minutes / 30), at least 1",
    **dict.fromkeys(RECIPES["best"], "--recipe's"),
    "dropout_rate": "the preset's, 0.1 at medium",
    "attention_residual_dropout_rate": "0, the library variant's",
    "export_dir": "no export",
}


def add_corpus_flags(parser):
    """The data and the budget."""
    parser.add_argument(
        "--data", required=True, help="Folder with Multi30k's {train,val,test_2016_flickr}.{de,en}.gz (read only)."
    )
    parser.add_argument("--minutes", type=float, required=True, help="Training wall-clock budget of each model.")


def add_shared_config_flags(parser):
    """The `TrainConfig` and `ModelConfig` flags of both models: size, vocabularies, batching, schedule, decoding."""
    flags.add_config_flags(
        parser,
        TrainConfig,
        "both models' training and test decoding (TrainConfig; each model's test translation is scored with beam "
        "search of --beam-size and greedily)",
        fields=(
            "preset",
            "source_vocab_size",
            "target_vocab_size",
            "joint_vocab",
            "train_size",
            "test_size",
            "batch_size",
            "batch_tokens",
            "warmup_steps",
            "learning_rate_scale",
            "label_smoothing",
            "precision",
            "jit_compile",
            "steps_per_epoch",
            "beam_size",
        ),
        defaults={
            "preset": "medium",
            "source_vocab_size": 8000,
            "target_vocab_size": 8000,
            "joint_vocab": None,
            "train_size": 0,
            "test_size": 0,
            "batch_size": 64,
            "batch_tokens": 0,
            "warmup_steps": None,
            "learning_rate_scale": 1.0,
            "label_smoothing": 0.1,
            "precision": "auto",
            "jit_compile": False,
            "steps_per_epoch": 200,
            "beam_size": 4,
        },
    )
    flags.add_config_flags(
        parser,
        ModelConfig,
        "both models' lengths (ModelConfig): longer training pairs are dropped and counted, longer test sources "
        "are cut, translations are at most --max-target-len long",
        fields=("max_source_len", "max_target_len"),
        defaults={"max_source_len": 40, "max_target_len": 40},
    )
    flags.add_seed_flags(parser, help="Seed of the weights, dropout and batch order.")
    parser.add_argument(
        "--models",
        type=flags.parse_list(str, choices=MODELS),
        default=list(MODELS),
        help=f"Comma-separated models to train, from {', '.join(MODELS)} (default: {','.join(MODELS)}).",
    )


def add_our_model_flags(parser):
    """`--recipe` and our model's own flags: initialization, averaging, cooldown, tables, dropout, length penalty."""
    parser.add_argument(
        "--recipe",
        default="best",
        choices=sorted(RECIPES),
        help="Defaults of our model's flags below: best (per_head initialization, weight averaging over about the "
        "last third of the run: momentum 0.9999, ramp 3, one embedding table over a joint vocabulary; what won on "
        "Multi30k at the medium preset) or tutorial (glorot, no averaging, three tables: the tutorial code).",
    )
    flags.add_config_flags(
        parser,
        ModelConfig,
        "our model only (ModelConfig; keras-hub's model keeps the preset's dropout and its own layers)",
        fields=("attention_initialization", "embedding_sharing", "dropout_rate", "attention_residual_dropout_rate"),
        defaults=dict.fromkeys(
            ("attention_initialization", "embedding_sharing", "dropout_rate", "attention_residual_dropout_rate")
        ),
    )
    flags.add_config_flags(
        parser,
        TrainConfig,
        "our model only (TrainConfig; keras-hub's model trains without averaging or cooldown, and its beam search, "
        "keras_hub.samplers.BeamSampler, ranks by summed log-probability: no --length-penalty)",
        fields=("ema_momentum", "ema_ramp", "lr_cooldown", "length_penalty", "export_dir"),
        defaults={**dict.fromkeys(("ema_momentum", "ema_ramp", "lr_cooldown", "export_dir")), "length_penalty": 1.4},
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
        "--validation-decodings",
        default="",
        help="After training, also score our model on the whole validation split with each of these "
        "BEAM:ALPHA decodings (e.g. 1:0,4:0.6,4:1.0; beam 1 is greedy): the way to choose --beam-size and "
        "--length-penalty without looking at the test split; empty = off.",
    )


def add_measurement_and_output_flags(parser):
    """The curve, output and work-folder flags (and the parent's `--worker`)."""
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
    flags.add_output_flags(parser, __package__, "multi30k")
    work = flags.results_folder(__package__) / "work"
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=work,
        help="Cached vocabularies and each worker's files (configs, result JSON); not committed (default: "
        f"{work.relative_to(flags.REPOSITORY).as_posix()}).",
    )
    parser.add_argument("--worker", choices=MODELS, default=None, help=argparse.SUPPRESS)  # set by the parent


def build_parser():
    """The study's parser, every flag in `--help`'s order."""
    parser = flags.study_parser(__package__)
    add_corpus_flags(parser)
    add_shared_config_flags(parser)
    add_our_model_flags(parser)
    add_measurement_and_output_flags(parser)
    for action in parser._actions:  # the config flags whose default another flag gives say which
        if action.dest in _DEPENDENT_DEFAULTS:
            action.help = action.help.rsplit(" (default: ", 1)[0] + f" (default: {_DEPENDENT_DEFAULTS[action.dest]})"
    return parser


def check_args(parser, args):
    """Check the flags (`parser.error` on a bad one) and fill in the defaults that depend on others."""
    if not args.minutes > 0:
        parser.error(f"--minutes must be > 0. Received: {args.minutes}")
    flags.check_at_least(parser, args, ("curve_points", "curve_sentences"), 1)
    for name, value in RECIPES[args.recipe].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not 0 <= args.late_dropout < 1:
        parser.error(f"--late-dropout must be in [0, 1). Received: {args.late_dropout}")
    our_dropout = PRESETS[args.preset]["dropout_rate"] if args.dropout_rate is None else args.dropout_rate
    if args.late_dropout and our_dropout == 0:
        parser.error("--late-dropout raises our model's dropout rate, which is 0 here: give --dropout-rate above 0")
    flags.check_at_least(parser, args, ("late_dropout_epochs",), 0)
    args.validation_decodings = parse_decodings(parser, args.validation_decodings)
    if args.joint_vocab is None:  # one vocabulary where one table embeds both sides
        args.joint_vocab = args.embedding_sharing == "all"
    if args.embedding_sharing == "all" and not args.joint_vocab:
        parser.error("--embedding-sharing all embeds both sides with one table: it needs --joint-vocab true")
    if args.warmup_steps is None:
        args.warmup_steps = max(1, round(WARMUP_STEPS_PER_MINUTE * args.minutes))
    args.models = [name for name in MODELS if name in args.models]
    if args.export_dir and "ours" not in args.models:
        parser.error("--export-dir exports our model: add ours to --models")
    args.precision_choice = choose_precision(args.precision)  # the workers are given its policy
    args.policy = args.precision_choice.policy
    # Our model's configs, as its worker builds them, checked by their own `validate()`.
    flags.config_from_flags(parser, args, TrainConfig, **train_settings(args, "ours"))
    flags.config_from_flags(parser, args, ModelConfig, **model_settings(args, "ours", *vocabulary_sizes(args)))
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
