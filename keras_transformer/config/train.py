"""The training config: `TrainConfig` says how to train (task, data, schedule, budget, outputs, decoding).

Besides the dataclass, the choices of its fields (`TASKS`, `LM_SAMPLERS`, `PRECISIONS`,
`STRATEGIES`, `NORMALIZATION_CHOICES`), the defaults that are each task's own (`TASK_DEFAULTS`,
`task_default`: the run directory and the exported model's name), the decoding fields that a
finished or resumed run may change (`DECODING_FIELDS`), and which settings belong to which task
(`_TASK_SETTINGS`), so that a setting given to a task that does not read it is an error rather
than silently unused.
"""

import dataclasses

from keras_transformer.checks import check_choice, check_int, check_number, check_rate
from keras_transformer.config.base import _field, _JsonConfig
from keras_transformer.config.model import PRESETS

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
    "xla_decoding",
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


# The `TrainConfig` fields whose default is the task's own (unset -> `task_default(name, task)`): the
# value below for translate, "-TASK" appended for any other task, so that two tasks trained with
# their defaults share neither a run directory nor an exported model's name.
TASK_DEFAULTS = {"run_dir": "runs/builtin", "model_name": "transformer"}


def task_default(name, task=None):
    """The value of the `TrainConfig` field `name` (one of `TASK_DEFAULTS`) for a run of `task` that sets none.

    Args:
        name: "run_dir" or "model_name".
        task: a task name (`TrainConfig.task`); None for the default task, translate.

    Returns:
        `TASK_DEFAULTS[name]` for translate, with "-TASK" appended for any other task: runs/builtin,
        runs/builtin-lm, runs/builtin-mlm; transformer, transformer-lm, transformer-mlm.
    """
    value = TASK_DEFAULTS[name]
    return value if task in (None, "translate") else f"{value}-{task}"


def default_run_dir(task=None):
    """The run directory of a run of `task` that names none: `task_default("run_dir", task)`."""
    return task_default("run_dir", task)


def default_model_name(task=None):
    """The exported model's name of a run of `task` that names none: `task_default("model_name", task)`."""
    return task_default("model_name", task)


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
    joint_vocab: bool = _field(
        None,
        "Learn one vocabulary from both sides (size --source-vocab-size) and share it (default: true where one "
        "embedding table embeds both sides, --embedding-sharing all or --variant paper).",
    )
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
    run_dir: str = _field(
        None,
        "Where checkpoints, vocabularies, logs and the summary go: one run per folder; a new run refuses a folder "
        "that holds one (--resume continues it, --overwrite replaces it). Each task has its own by default.",
    )
    checkpoint_every_steps: int = _field(
        0, "Also checkpoint the training state every this many steps (for --resume); 0 = not by steps."
    )
    checkpoint_every_seconds: float = _field(
        120.0,
        "Checkpoint the training state when this many seconds passed since the last checkpoint (for --resume); "
        "0 = not by time. Every epoch's end is checkpointed too.",
    )
    export_dir: str = _field("saved_models", "Export root: the model goes to EXPORT_DIR/MODEL_NAME/VERSION.")
    model_name: str = _field(
        None,
        "Model name in the export path and in TF Serving; a resumed run keeps its own. Each task has its own by "
        "default, so that one task's export never becomes the newest version of another's.",
    )
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
    xla_decoding: bool = _field(
        False,
        "Decode translations as one XLA computation, in evaluation and in the exported translator: a few times "
        "faster per sentence on CPUs; one compile per batch size, and TF Serving must run with "
        "--xla_cpu_compilation_enabled=true.",
    )
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
        check_choice("task", self.task, TASKS)
        for name in (
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
        ):
            check_int(name, getattr(self, name), 1)
        for name in ("label_smoothing", "ema_momentum", "lr_cooldown"):
            check_rate(name, getattr(self, name))
        check_number("ema_ramp", self.ema_ramp, 1)
        check_number("length_penalty", self.length_penalty, 0)
        check_number("checkpoint_every_seconds", self.checkpoint_every_seconds, 0)
        for name in (
            "train_size",
            "validation_size",
            "test_size",
            "batch_tokens",
            "validation_bleu_sentences",
            "checkpoint_every_steps",
        ):
            check_int(name, getattr(self, name), 0)
        for name, allowed in (
            ("precision", PRECISIONS),
            ("strategy", STRATEGIES),
            ("source_normalization", NORMALIZATION_CHOICES),
            ("preset", PRESETS),
            ("sampler", LM_SAMPLERS),
        ):
            check_choice(name, getattr(self, name), allowed)
        check_number("learning_rate_scale", self.learning_rate_scale, greater_than=0)
        check_number("temperature", self.temperature, greater_than=0)
        check_rate("top_p", self.top_p, allow_zero=False, allow_one=True)
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
        for name in TASK_DEFAULTS:  # the task's own: two tasks trained with defaults do not collide
            if getattr(self, name) is None:
                setattr(self, name, task_default(name, self.task))

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
            "xla_decoding",
        ),
        ("translate",),
    ),
    (("vocab_size", "tfds_text_feature"), ("lm", "mlm")),
    (("sampler", "num_beams", "temperature", "top_k", "top_p", "sampler_seed"), ("lm",)),
)
