"""Configuration dataclasses: `ModelConfig` rebuilds the network, `TrainConfig` says how to train.

`LanguageModelConfig` rebuilds a decoder-only or encoder-only language model from the same sizes
(`language_model_preset`) and attention options.

Every hyperparameter has one name everywhere: the dataclass field, the CLI flag (`--d-model`,
also accepted as `--d_model`), the JSON key saved beside checkpoints and exports, and the layer
argument. Help texts live in the field metadata and become the CLI's `--help`.
"""

import dataclasses
import json
from pathlib import Path

from keras_transformer.files import write_text_atomically


def _field(default, help, cli=True, choices=None):
    """A dataclass field whose metadata the CLI turns into a flag.

    Args:
        default: the field's default value (its type is the flag's type).
        help: one-sentence help text, shown by `--help`.
        cli: whether `train` offers the field as a flag.
        choices: allowed values of the flag, or None for any.

    Returns:
        A `dataclasses.field`.
    """
    return dataclasses.field(default=default, metadata={"help": help, "cli": cli, "choices": choices})


class _JsonConfig:
    """JSON round trip and validation shared by the config dataclasses."""

    def validate(self):
        """Check the field values.

        Returns:
            `self`, so that `Config(...).validate()` can be chained.

        Raises:
            ValueError: a value is out of range or inconsistent with another (the message names it).
        """
        return self

    def to_dict(self):
        """The fields as JSON types.

        Returns:
            dict of field name to value, tuples as lists.
        """
        return {
            key: list(value) if isinstance(value, tuple) else value for key, value in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, values):
        """A validated config from a dict, e.g. the output of `to_dict`.

        Args:
            values: dict of field name to value; fields left out keep their defaults.

        Returns:
            The validated config.

        Raises:
            ValueError: an unknown key or an invalid value.
        """
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown {cls.__name__} keys: {unknown}. Known keys: {sorted(known)}")
        return cls(**values).validate()

    def save(self, path):
        """Write the config as JSON, atomically (a reader never sees half a file).

        Args:
            path: the JSON file to write; missing parent folders are made.
        """
        write_text_atomically(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path):
        """Read a config written by `save`.

        Args:
            path: the JSON file.

        Returns:
            The validated config.

        Raises:
            FileNotFoundError: no file at `path`.
            ValueError: the file is not a JSON object of valid fields.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"No {cls.__name__} file at {path}")
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} must hold a JSON object, not {type(values).__name__}")
        return cls.from_dict(values)


def _check_positive(config, *names):
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")


def _check_rate(config, *names):
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


ATTENTION_INITIALIZATIONS = ("glorot", "per_head")  # MultiheadAttention's `initialization`
# The score functions s(x, q) of `keras_transformer.layers.AttentionScore`, the paper's first.
ATTENTION_SCORES = ("scaled_dot", "dot", "additive", "bilinear", "cosine")


PROJECTION_ACTIVATIONS = ("linear", "relu")
# Which of a translation model's [V, D] tables are one (`ModelConfig.embedding_sharing`).
EMBEDDING_SHARING = ("none", "decoder", "all")
# The attention options of every model kind: (default, help, choices) of each field.
_ATTENTION_OPTIONS = {
    "use_output_projection": (True, "Apply the paper's attention output projection W^O (the tutorial omits it).", None),
    "projection_activation": (
        "linear",
        "Activation of the Q/K/V projections: linear (paper) or relu (tutorial).",
        PROJECTION_ACTIVATIONS,
    ),
    "attention_initialization": (
        "glorot",
        "Initialization of the attention projections: glorot (tutorial) or per_head (Glorot with the fans of the "
        "[D, H, K] per-head kernel views: smaller, a faster start).",
        ATTENTION_INITIALIZATIONS,
    ),
    "attention_score": (
        "scaled_dot",
        "Score function of every attention sublayer: scaled_dot (paper), dot or bilinear (Luong et al. 2015), "
        "additive (Bahdanau et al. 2015), cosine (cosine similarity times a learned per-head scale).",
        ATTENTION_SCORES,
    ),
}


def check_choice(name, value, choices):
    """Check that an argument is one of its choices: the one check of the attention score, wherever it is given.

    Args:
        name: str, the argument's name (`attention_score` in a config or block, `score` in a layer).
        value: the value given.
        choices: tuple of the allowed values.

    Returns:
        `value`.

    Raises:
        ValueError: `value` is not one of `choices`; the message names the argument and the value.
    """
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")
    return value


def _attention_field(name):
    """The dataclass field of the attention option `name`, the same in every model config."""
    default, help, choices = _ATTENTION_OPTIONS[name]
    return _field(default, help, choices=choices)


def _check_model_sizes(config):
    """Check the fields every model config has: sizes, dropout and the attention options.

    Raises:
        ValueError: a value is out of range or not one of its choices (the message names it).
    """
    _check_positive(config, "d_model", "num_heads", "num_blocks", "d_ff")
    _check_rate(config, "dropout_rate")
    if config.d_model % config.num_heads:
        raise ValueError(
            f"`d_model` must be divisible by `num_heads`. Received: d_model={config.d_model}, "
            f"num_heads={config.num_heads}"
        )
    if config.attention_initialization not in ATTENTION_INITIALIZATIONS:
        raise ValueError(
            f"`attention_initialization` must be one of {ATTENTION_INITIALIZATIONS}. "
            f"Received: {config.attention_initialization!r}"
        )
    check_choice("attention_score", config.attention_score, ATTENTION_SCORES)
    if config.projection_activation not in PROJECTION_ACTIVATIONS:
        raise ValueError(
            f"`projection_activation` must be 'linear' or 'relu'. Received: {config.projection_activation!r}"
        )


@dataclasses.dataclass
class ModelConfig(_JsonConfig):
    """Everything needed to rebuild the network. Defaults are the paper's base model.

    Each field's help text (its `help` metadata, also shown by `keras-transformer train --help`)
    documents it; `validate` checks them.
    """

    source_vocab_size: int = _field(8000, "Source vocabulary size V_s (set from the learned vocabulary).", cli=False)
    target_vocab_size: int = _field(8000, "Target vocabulary size V_t (set from the learned vocabulary).", cli=False)
    d_model: int = _field(512, "Width D of embeddings and of every block's output.")
    num_heads: int = _field(8, "Attention heads H; d_model must be divisible by it.")
    num_blocks: int = _field(6, "Encoder blocks, and as many decoder blocks.")
    d_ff: int = _field(2048, "Inner width F of the feed-forward sublayers.")
    dropout_rate: float = _field(0.1, "Dropout on embeddings, attention weights and sublayer outputs.")
    max_source_len: int = _field(64, "Longest source in tokens; longer training pairs are dropped.")
    max_target_len: int = _field(64, "Longest target in tokens, end token included; also the decoding limit.")
    learned_positions: bool = _field(False, "Learn position embeddings instead of the fixed sinusoids.")
    use_output_projection: bool = _attention_field("use_output_projection")
    projection_activation: str = _attention_field("projection_activation")
    attention_initialization: str = _attention_field("attention_initialization")
    attention_score: str = _attention_field("attention_score")
    embedding_sharing: str = _field(
        "none",
        "Embedding tables that are one (paper section 3.4): none (three tables: source, target, output logits); "
        "decoder (the target embedding table also computes the logits, h E^T); all (one table for source, target "
        "and logits: needs one vocabulary for both sides, --joint-vocab true).",
        choices=EMBEDDING_SHARING,
    )

    def validate(self):
        _check_positive(self, "source_vocab_size", "target_vocab_size", "max_source_len", "max_target_len")
        _check_model_sizes(self)
        if self.embedding_sharing not in EMBEDDING_SHARING:
            raise ValueError(
                f"`embedding_sharing` must be one of {EMBEDDING_SHARING}. Received: {self.embedding_sharing!r}"
            )
        if self.embedding_sharing == "all" and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(
                "embedding_sharing='all' uses one table for both sides, so the vocabularies must be one (a joint "
                f"vocabulary). Received: source_vocab_size={self.source_vocab_size}, "
                f"target_vocab_size={self.target_vocab_size}"
            )
        return self


_FILE_PAIRS = ("train_files", "validation_files", "test_files")
# What `train` can train: a translation model, a causal (GPT-style) or a masked (BERT-style) language model.
TASKS = ("translate", "lm", "mlm")
# The samplers of an exported causal language model (keras-hub's, by name: `generation.SAMPLERS`).
LM_SAMPLERS = ("greedy", "beam", "top_k", "top_p", "random")
# The `TrainConfig` fields of decoding (a translation's beam search, a language model's sampler):
# what `evaluate` and `export` may change of a finished run, and a resumed run may change.
DECODING_FIELDS = (
    "beam_size",
    "length_penalty",
    "sampler",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "sampler_seed",
)
NORMALIZATION_CHOICES = ("auto", "on", "off")
# "auto": mixed_bfloat16 where the hardware computes bfloat16 natively, else float32 (see `precision`).
PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")

# Named model sizes. "small" is the default of `python train.py` on the built-in corpus.
PRESETS = {
    "tiny": dict(d_model=32, num_heads=2, num_blocks=1, d_ff=64, dropout_rate=0.0),
    "small": dict(d_model=128, num_heads=4, num_blocks=2, d_ff=512, dropout_rate=0.1),
    "medium": dict(d_model=256, num_heads=4, num_blocks=3, d_ff=1024, dropout_rate=0.1),
    "base": dict(d_model=512, num_heads=8, num_blocks=6, d_ff=2048, dropout_rate=0.1),
}


def preset(name, **overrides):
    """`ModelConfig` of a named size with overrides: what a new run builds.

    Args:
        name: `tiny`, `small`, `medium` or `base` (see `PRESETS`).
        **overrides: `ModelConfig` fields that replace the preset's (or the defaults).

    Returns:
        The validated `ModelConfig`.

    Raises:
        ValueError: an unknown preset, or an invalid combination (e.g. `d_model` not divisible
            by the preset's `num_heads`).
    """
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides}).validate()


# The two language-model families built from the same layers: GPT-style and BERT-style.
LANGUAGE_MODEL_KINDS = ("decoder", "encoder")


@dataclasses.dataclass
class LanguageModelConfig(_JsonConfig):
    """Everything needed to rebuild a language model: decoder-only (GPT) or encoder-only (BERT).

    `kind="decoder"` is a causal language model (each position predicts the next token from the
    ones before it); `kind="encoder"` is a bidirectional masked language model (each position sees
    the whole sequence), with an optional classification head on its first position. The sizes
    and attention options mean what they mean in `ModelConfig`; each field's help text documents
    it, and `validate` checks them.
    """

    kind: str = _field(
        "decoder",
        "decoder: a causal (GPT-style) language model; encoder: a bidirectional (BERT-style) masked language model.",
        cli=False,
        choices=LANGUAGE_MODEL_KINDS,
    )
    vocab_size: int = _field(8000, "Vocabulary size V (set from the learned vocabulary).", cli=False)
    d_model: int = _field(512, "Width D of embeddings and of every block's output.")
    num_heads: int = _field(8, "Attention heads H; d_model must be divisible by it.")
    num_blocks: int = _field(6, "Transformer blocks.")
    d_ff: int = _field(2048, "Inner width F of the feed-forward sublayers.")
    dropout_rate: float = _field(0.1, "Dropout on embeddings, attention weights and sublayer outputs.")
    max_length: int = _field(128, "Longest sequence in tokens (training and generation, prompt included).")
    learned_positions: bool = _field(False, "Learn position embeddings instead of the fixed sinusoids.")
    tie_embeddings: bool = _field(
        True, "Compute the output logits with the token embedding matrix (one [V, D] table) instead of their own."
    )
    num_classes: int = _field(
        0, "Classes of the encoder's classification head on the first position; 0 = no head.", cli=False
    )
    use_output_projection: bool = _attention_field("use_output_projection")
    projection_activation: str = _attention_field("projection_activation")
    attention_initialization: str = _attention_field("attention_initialization")
    attention_score: str = _attention_field("attention_score")

    def validate(self):
        if self.kind not in LANGUAGE_MODEL_KINDS:
            raise ValueError(f"`kind` must be one of {LANGUAGE_MODEL_KINDS}. Received: kind={self.kind!r}")
        _check_positive(self, "vocab_size", "max_length")
        _check_model_sizes(self)
        for name in ("learned_positions", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"`{name}` must be a bool. Received: {name}={getattr(self, name)!r}")
        if not isinstance(self.num_classes, int) or isinstance(self.num_classes, bool) or self.num_classes < 0:
            raise ValueError(f"`num_classes` must be an int >= 0. Received: num_classes={self.num_classes!r}")
        if self.num_classes and self.kind != "encoder":
            raise ValueError(
                f"Only an encoder has a classification head. Received: kind={self.kind!r}, "
                f"num_classes={self.num_classes}"
            )
        return self


def language_model_preset(name, kind, **overrides):
    """`LanguageModelConfig` of a named size (the sizes of `PRESETS`) and kind, with overrides.

    Args:
        name: `tiny`, `small`, `medium` or `base` (see `PRESETS`).
        kind: `"decoder"` (GPT-style) or `"encoder"` (BERT-style).
        **overrides: `LanguageModelConfig` fields that replace the preset's (or the defaults).

    Returns:
        The validated `LanguageModelConfig`.

    Raises:
        ValueError: an unknown preset or kind, or an invalid combination.
    """
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    return LanguageModelConfig(**{**PRESETS[name], **overrides, "kind": kind}).validate()


@dataclasses.dataclass
class TrainConfig(_JsonConfig):
    """How to train: the task, data, schedule, budget and where outputs go.

    `task` says what is trained: a translation model (`ModelConfig`) or a language model
    (`LanguageModelConfig`, `lm` or `mlm`). Settings that only one task reads (the translation
    vocabularies and decoding, the language model's vocabulary size and sampler) must keep their
    defaults under another task: `validate` says which one does not. Each field's help text (its
    `help` metadata, also shown by `keras-transformer train --help`) documents it; `validate`
    checks them.
    """

    task: str = _field(
        "translate",
        "What to train: translate (the encoder-decoder on sentence pairs), lm (a decoder-only, GPT-style causal "
        "language model on text) or mlm (an encoder-only, BERT-style masked language model on text). lm and mlm "
        "read one text per line, learn one vocabulary (--vocab-size) and size the model with --preset, "
        "--max-length and the other model flags.",
        choices=TASKS,
    )
    preset: str = _field("small", "Model size preset; explicit model flags override it.", choices=tuple(PRESETS))
    corpus: str = _field(
        "builtin",
        "Where the sentence pairs (or, for --task lm/mlm, the texts) come from: builtin (generated dates; lm/mlm "
        "read their typed forms), files (--train-files, --validation-files, --test-files) or tfds (--tfds-name). "
        "Implied by those flags.",
        choices=("builtin", "files", "tfds"),
    )
    train_files: tuple = _field(
        (),
        "SOURCE TARGET: line-aligned training files, UTF-8, plain or gzip. For --task lm/mlm: one or more text "
        "files, one text per line, read in order.",
    )
    validation_files: tuple = _field(
        (), "SOURCE TARGET: line-aligned validation files. For --task lm/mlm: one or more text files."
    )
    test_files: tuple = _field(
        (), "SOURCE TARGET: line-aligned test files (scored at the end). For --task lm/mlm: one or more text files."
    )
    tfds_name: str = _field(
        "",
        "TFDS dataset: for translation a supervised pair dataset, e.g. ted_hrlr_translate/pt_to_en or "
        "wmt14_translate/de-en; for --task lm/mlm any dataset with a text feature (--tfds-text-feature), e.g. lm1b. "
        "Its train, validation and test splits are read.",
    )
    tfds_text_feature: str = _field("text", "The text feature of the --tfds-name dataset, for --task lm/mlm.")
    tfds_data_dir: str = _field("", "TFDS data directory (empty: TFDS's default).")
    train_size: int = _field(
        0,
        "Training pairs (texts, for --task lm/mlm) to use: the first N of the files or dataset, or N generated; "
        "0 = all (built-in: 20000).",
    )
    validation_size: int = _field(
        0,
        "Validation pairs (or texts) to use: the first N of the split; 0 = all (built-in: 1000). Checked every epoch.",
    )
    test_size: int = _field(
        0, "Test pairs (or texts) scored at the end: the first N of the split; 0 = all (built-in: 1000)."
    )
    source_normalization: str = _field(
        "auto",
        "Normalize how source text is typed (vocabulary, training and the exported graph): fold case and split "
        "digit runs, punctuation and symbols into words, so that 'MARCH 3,1987' and 'march 3 , 1987' read alike. "
        "on, off (lossless, case and spacing kept), or auto (on for the built-in dates, off for files and tfds).",
        choices=NORMALIZATION_CHOICES,
    )
    joint_vocab: bool = _field(False, "Learn one vocabulary from both sides (size --source-vocab-size) and share it.")
    vocab_size: int = _field(
        400,
        "Requested WordPiece vocabulary size of --task lm/mlm (one vocabulary; mlm's holds <mask>); the learned one "
        "may be smaller (the model config records it).",
    )
    source_vocab_size: int = _field(
        400, "Requested source WordPiece vocabulary size; the learned one may be smaller (the model config records it)."
    )
    target_vocab_size: int = _field(
        100, "Requested target WordPiece vocabulary size; the learned one may be smaller (the model config records it)."
    )
    epochs: int = _field(12, "Training epochs.")
    steps_per_epoch: int = _field(200, "Optimizer steps per epoch (the training data repeats).")
    batch_size: int = _field(
        64,
        "Sentence pairs (rows of --max-length tokens, for --task lm/mlm) per batch (when --batch-tokens is 0); "
        "global, split across replicas.",
    )
    batch_tokens: int = _field(
        0, "Batch by token budget instead: about this many tokens (padded, longer side) per global batch; 0 = off."
    )
    warmup_steps: int = _field(400, "Noam schedule warm-up steps: the learning rate peaks there.")
    learning_rate_scale: float = _field(1.0, "Multiplier of the Noam learning rate.")
    lr_cooldown: float = _field(
        0.0,
        "Cool the learning rate down at the end of the run: over the last steps, this share of the run's "
        "epochs * steps_per_epoch, it falls linearly from the Noam rate to 0 (e.g. 0.3); 0 = off, the paper's "
        "schedule.",
    )
    label_smoothing: float = _field(0.1, "Label smoothing epsilon of the loss.")
    ema_momentum: float = _field(
        0.0,
        "Keep an exponential moving average of the weights with this momentum (e.g. 0.998) and end training "
        "with the averaged weights, which are then evaluated and exported; 0 = off. The momentum ramps up as "
        "min(momentum, t / (t + ema_ramp)) at step t, so the average spans a share of a short run (see ema_ramp).",
    )
    ema_ramp: float = _field(
        9.0,
        "How far back the moving average looks while it ramps up: its momentum at step t is "
        "min(ema_momentum, t / (t + ema_ramp)), so step s weighs about (s / t) ** (ema_ramp - 1) in it; 9 spans "
        "about the last tenth of the steps so far, 1 is the plain mean of all of them.",
    )
    seed: int = _field(0, "Random seed for data generation, shuffling and initialization.")
    run_dir: str = _field("runs/builtin", "Where checkpoints, vocabularies, logs and the summary go.")
    checkpoint_every_steps: int = _field(
        0, "Also checkpoint the training state every this many steps (for --resume); 0 = not by steps."
    )
    checkpoint_every_seconds: float = _field(
        120.0,
        "Checkpoint the training state when this many seconds passed since the last checkpoint (for --resume); "
        "0 = not by time. Every epoch's end is checkpointed too.",
    )
    export_dir: str = _field("saved_models", "Export root: the model goes to EXPORT_DIR/MODEL_NAME/VERSION.")
    model_name: str = _field("transformer", "Model name in the export path and in TF Serving.")
    validation_bleu_sentences: int = _field(
        0, "After every epoch, translate this many validation sentences (greedy) and log their BLEU; 0 = off."
    )
    precision: str = _field(
        "auto",
        "Keras dtype policy of training: float32, or mixed_bfloat16 / mixed_float16 (half-precision compute, "
        "float32 weights, attention softmax, logits and loss), or auto: mixed_bfloat16 where the hardware computes "
        "bfloat16 natively (a GPU of compute capability 8.0+, a TPU, a CPU with AVX512-BF16 or AMX), float32 "
        "elsewhere. Chosen once at the start; the log and summary.json say what and why, and a resumed run keeps it.",
        choices=PRECISIONS,
    )
    jit_compile: bool = _field(False, "Compile the training step with XLA (one compile per batch shape).")
    strategy: str = _field(
        "default",
        "tf.distribute strategy: default (one device), mirrored (all local GPUs), multi_worker (TF_CONFIG "
        "cluster), tpu (wired, untested).",
        choices=STRATEGIES,
    )
    beam_size: int = _field(4, "Beam size of evaluation and of the exported translator; 1 is greedy decoding.")
    length_penalty: float = _field(0.6, "Beam search's GNMT length-penalty alpha (0 ranks by log-probability).")
    sampler: str = _field(
        "greedy",
        "How the exported --task lm model chooses each next token (keras-hub's samplers; the evaluation's logged "
        "continuations are greedy): greedy, beam (the likeliest of --num-beams continuations), "
        "top_k (from the --top-k likeliest), top_p (from the smallest set of probability >= --top-p) or random.",
        choices=LM_SAMPLERS,
    )
    temperature: float = _field(1.0, "Softmax temperature of --sampler top_k, top_p and random (--task lm).")
    num_beams: int = _field(5, "Beams of --sampler beam (--task lm).")
    top_k: int = _field(10, "k of --sampler top_k (--task lm).")
    top_p: float = _field(0.9, "p of --sampler top_p, in (0, 1] (--task lm).")
    sampler_seed: int = _field(
        0, "Seed of the sampling (--task lm): a freshly loaded export samples the same continuations."
    )

    def validate(self):
        if self.task not in TASKS:
            raise ValueError(f"`task` must be one of {TASKS}. Received: task={self.task!r}")
        _check_positive(
            self,
            "vocab_size",
            "num_beams",
            "top_k",
            "source_vocab_size",
            "target_vocab_size",
            "epochs",
            "steps_per_epoch",
            "batch_size",
            "warmup_steps",
            "beam_size",
        )
        _check_rate(self, "label_smoothing")
        _check_rate(self, "ema_momentum", "lr_cooldown")
        if not self.ema_ramp >= 1:
            raise ValueError(f"`ema_ramp` must be >= 1. Received: {self.ema_ramp}")
        if not self.length_penalty >= 0:
            raise ValueError(f"`length_penalty` must be >= 0. Received: {self.length_penalty}")
        if not self.checkpoint_every_seconds >= 0:
            raise ValueError(f"`checkpoint_every_seconds` must be >= 0. Received: {self.checkpoint_every_seconds}")
        for name in (
            "train_size",
            "validation_size",
            "test_size",
            "batch_tokens",
            "validation_bleu_sentences",
            "checkpoint_every_steps",
        ):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"`{name}` must be an int >= 0. Received: {getattr(self, name)!r}")
        for name, allowed in (
            ("precision", PRECISIONS),
            ("strategy", STRATEGIES),
            ("source_normalization", NORMALIZATION_CHOICES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}. Received: {getattr(self, name)!r}")
        if self.preset not in PRESETS:
            raise ValueError(f"Unknown preset {self.preset!r}; expected one of {sorted(PRESETS)}")
        if not self.learning_rate_scale > 0:
            raise ValueError(f"`learning_rate_scale` must be positive. Received: {self.learning_rate_scale}")
        if self.sampler not in LM_SAMPLERS:
            raise ValueError(f"`sampler` must be one of {LM_SAMPLERS}. Received: sampler={self.sampler!r}")
        if not self.temperature > 0:
            raise ValueError(f"`temperature` must be positive. Received: temperature={self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"`top_p` must be in (0, 1]. Received: top_p={self.top_p!r}")
        self._validate_task_settings()
        self._validate_corpus()
        return self

    def _validate_task_settings(self):
        """Settings of another task than `task` must keep their defaults: one error names the first that does not."""
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        for names, tasks in _TASK_SETTINGS:
            if self.task in tasks:
                continue
            for name in names:
                if getattr(self, name) != defaults[name]:
                    flag = "--" + name.replace("_", "-")
                    raise ValueError(
                        f"{flag} is a setting of --task {'/'.join(tasks)}, not of --task {self.task}"
                        + (f"; --task {self.task} learns one vocabulary of --vocab-size" if "vocab" in name else "")
                    )

    @property
    def is_language_model(self):
        """Whether the task trains a language model (`lm` or `mlm`) on text, not a translation model."""
        return self.task != "translate"

    @property
    def normalizes_source(self):
        """Whether the source tokenizer normalizes typing: `source_normalization`, auto resolved by the corpus.

        Never for a language model: its text is kept as typed (case and spacing).
        """
        if self.is_language_model:
            return False
        if self.source_normalization == "auto":
            return self.corpus == "builtin"
        return self.source_normalization == "on"

    def __post_init__(self):
        # JSON gives lists; the run's saved config must compare equal to the flags' tuples.
        for name in _FILE_PAIRS:
            setattr(self, name, tuple(getattr(self, name)))

    def _validate_corpus(self):
        given_files = [name for name in _FILE_PAIRS if getattr(self, name)]
        for name in given_files:
            if not self.is_language_model and len(getattr(self, name)) != 2:
                raise ValueError(f"`{name}` takes two paths, SOURCE TARGET. Received: {getattr(self, name)!r}")
        if self.corpus == "files":
            missing = [name for name in _FILE_PAIRS if not getattr(self, name)]
            if missing:
                raise ValueError(f"corpus 'files' needs {', '.join('--' + m.replace('_', '-') for m in missing)}")
        elif given_files:
            raise ValueError(f"{', '.join(given_files)} given but corpus is {self.corpus!r}; use --corpus files")
        if (self.corpus == "tfds") != bool(self.tfds_name):
            raise ValueError("corpus 'tfds' and --tfds-name go together")


# The settings of some tasks only, `(names, tasks)`: given to another task they are an error
# (`TrainConfig.validate`), rather than silently unused.
_TASK_SETTINGS = (
    (
        (
            "source_normalization",
            "joint_vocab",
            "source_vocab_size",
            "target_vocab_size",
            "batch_tokens",
            "validation_bleu_sentences",
            "beam_size",
            "length_penalty",
        ),
        ("translate",),
    ),
    (("vocab_size", "tfds_text_feature"), ("lm", "mlm")),
    (("sampler", "num_beams", "temperature", "top_k", "top_p", "sampler_seed"), ("lm",)),
)
