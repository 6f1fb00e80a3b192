"""The command line's flags: generated from the config dataclasses' fields, and read from `--config`.

`build_parser` makes the `train`, `evaluate`, `export`, `generate` and `translate` sub-commands;
the flags of `train` come from the fields of `TrainConfig`, `ModelConfig` and
`LanguageModelConfig`, with their help texts. `load_config_file` reads a `--config` JSON file and
`split_by_config` sorts settings into the training and the model config's.
"""

import argparse
import dataclasses
import json
import textwrap
from pathlib import Path

from keras_transformer.config import (
    DECODING_FIELDS,
    PRESETS,
    VARIANT_SWITCHES,
    LanguageModelConfig,
    ModelConfig,
    TrainConfig,
)
from keras_transformer.config.train import TASK_DEFAULTS, TASKS, task_default

_BOOLEAN_CHOICES = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def boolean(text):
    """The flags' true/false type: true, false, 1, 0, yes or no, in any case; `argparse.ArgumentTypeError` otherwise."""
    try:
        return _BOOLEAN_CHOICES[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but never wrapping inside a hyphenated word.

    A flag like `--source-vocab-size` in a help text stays whole.
    """

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


def _default_text(config_class, field, only):
    """What `--help` says a flag defaults to: the value used when the flag is left out."""
    if only is not None:  # evaluate / export: the run's saved settings
        return "(default: the run's)"
    if field.name in VARIANT_SWITCHES:
        return "(default: the --variant's)"
    if config_class is TrainConfig and field.name in TASK_DEFAULTS:
        return f"(default: {', '.join(f'{task_default(field.name, task)} for --task {task}' for task in TASKS)})"
    by_preset = [f"{name} {values[field.name]!r}" for name, values in PRESETS.items() if field.name in values]
    if config_class in (ModelConfig, LanguageModelConfig) and by_preset:
        return f"(default: set by --preset: {', '.join(by_preset)})"
    return f"(default: {field.default!r})"


def _value_type(field):
    """The type of a field's values: its default's, or its annotation's where the default is None."""
    return field.type if field.default is None else type(field.default)


def add_config_flags(parser, config_class, title, only=None, exclude=(), fields=None, defaults=None):
    """Flags for the fields of `config_class`: `--field-name` (and `--field_name`), the field's help and choices.

    The one generator of config flags: the `train`, `evaluate` and `export` commands use it, and so
    do the benchmarks, so that a flag always has its field's name.

    Args:
        parser: the (sub)command's `argparse.ArgumentParser`.
        config_class: `TrainConfig`, `ModelConfig` or `LanguageModelConfig`.
        title: the title of the flags' group in `--help`.
        only: names of the only fields to offer, whose flags then default to the run's settings
            (`evaluate`, `export`); None for all fields with `cli=True`.
        exclude: names of fields not to offer (flags another group has already).
        fields: names of the fields to offer, in this order, whatever their `cli` metadata; None for
            the fields `only` and `exclude` select.
        defaults: `{field name: value}`, the flags' defaults (shown by `--help`); a flag of a field
            not in it is left out of the namespace unless given (a config file or the config's own
            default then decides).

    Returns:
        The set of names of the fields offered.
    """
    group = parser.add_argument_group(title)
    offered = set()
    defaults = defaults or {}
    if fields is not None:
        by_name = {field.name: field for field in dataclasses.fields(config_class)}
        unknown = [name for name in fields if name not in by_name]
        if unknown:
            raise ValueError(f"`fields` must name fields of {config_class.__name__}. Received: fields={unknown}")
        selected = [by_name[name] for name in fields]
    else:
        selected = [
            field
            for field in dataclasses.fields(config_class)
            if field.metadata.get("cli", True) and (only is None or field.name in only) and field.name not in exclude
        ]
    for field in selected:
        offered.add(field.name)
        flag = "--" + field.name.replace("_", "-")
        aliases = [flag] if "_" not in field.name else [flag, "--" + field.name]
        # File paths: SOURCE TARGET for translation, one or more text files for a language model
        # (`TrainConfig.validate` checks the count for the task).
        paths = isinstance(field.default, tuple)
        kind = str if paths else {int: int, float: float, bool: boolean, str: str}[_value_type(field)]
        group.add_argument(
            *aliases,
            dest=field.name,
            type=kind,
            nargs="+" if paths else None,
            choices=field.metadata.get("choices"),
            # Without a given default, only explicit flags reach the namespace.
            default=defaults.get(field.name, argparse.SUPPRESS),
            metavar="FILE" if paths else None if field.metadata.get("choices") else field.name.upper(),
            help=field.metadata["help"]
            if paths
            else f"{field.metadata['help']} "
            + (
                f"(default: {defaults[field.name]!r})"
                if field.name in defaults
                else _default_text(config_class, field, only)
            ),
        )
    return offered


def build_parser():
    """The `keras-transformer` parser, its sub-command in the namespace's `command`."""
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        formatter_class=_HelpFormatter,
        description="Train, evaluate, export and use the Transformer of 'Attention Is All You Need'.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_train_command(commands)
    _add_run_commands(commands)
    _add_generate_command(commands)
    _add_translate_command(commands)
    return parser


def _add_train_command(commands):
    """`train`: `--config`, `--resume` or `--overwrite`, and one flag per field of the training and model configs.

    Args:
        commands: the parser's sub-parsers (`add_subparsers`' result).
    """
    train = commands.add_parser(
        "train",
        formatter_class=_HelpFormatter,
        help="train a model, evaluate it on the test split and export it",
        description="Train on the built-in corpus (default), print test exact match and BLEU, write "
        "RUN_DIR/summary.json and export a SavedModel to EXPORT_DIR/MODEL_NAME/VERSION. With --task lm or "
        "--task mlm, train a language model on text instead and print its test perplexity and token accuracy.",
    )
    train.add_argument(
        "--config", type=Path, help="JSON file of TrainConfig and model config fields; flags override it"
    )
    existing = train.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue the interrupted run in --run-dir")
    existing.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --run-dir by a new one: its files (configs, vocabularies, checkpoints, model, "
        "logs, summary) are deleted once the new settings are checked; a folder holding other files is refused, "
        "and exports are kept",
    )
    add_config_flags(train, TrainConfig, "training")
    model_flags = add_config_flags(train, ModelConfig, "model (override the preset)")
    add_config_flags(
        train,
        LanguageModelConfig,
        "language model (--task lm/mlm; the model flags above but --max-source-len and --max-target-len apply too)",
        exclude=model_flags,
    )


def _add_run_commands(commands):
    """`evaluate` and `export`, which read a finished run: `--run-dir` and the decoding flags, defaulting to the run's.

    Args:
        commands: the parser's sub-parsers (`add_subparsers`' result).
    """
    evaluate = commands.add_parser(
        "evaluate", formatter_class=_HelpFormatter, help="score a finished run on its test split"
    )
    evaluate.add_argument("--run-dir", required=True, type=Path, help="run directory written by `train`")
    add_config_flags(evaluate, TrainConfig, "decoding", only=DECODING_FIELDS)

    export = commands.add_parser(
        "export",
        formatter_class=_HelpFormatter,
        help="export a finished run as a new SavedModel (or CTranslate2) version",
        description="Write EXPORT_DIR/MODEL_NAME/VERSION (text in, translation out; needs a model server "
        "with tensorflow-text ops), or with --ids-only EXPORT_DIR/MODEL_NAME_ids/VERSION (token ids in and "
        "out, core TensorFlow ops only). Both rewrite EXPORT_DIR/models.config. With --format ctranslate2, "
        "write a translation run's weights for the CTranslate2 engine instead, "
        "EXPORT_DIR/MODEL_NAME_ctranslate2/VERSION, which `keras-transformer translate --model` reads (needs "
        'pip install "keras-transformer[ctranslate2]"; beams are ranked by log-probability there).',
    )
    export.add_argument("--run-dir", required=True, type=Path, help="run directory written by `train`")
    export.add_argument("--export-dir", type=Path, help="export root (default: the run's export_dir)")
    export.add_argument(
        "--ids-only", action="store_true", help="export token ids -> token ids without tensorflow-text ops"
    )
    export.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="savedmodel",
        help="savedmodel (TF Serving's, the default) or ctranslate2 (the CTranslate2 engine's; translation runs)",
    )
    add_config_flags(export, TrainConfig, "decoding", only=DECODING_FIELDS)


EXPORT_FORMATS = ("savedmodel", "ctranslate2")  # `export --format`


def _add_generate_command(commands):
    """`generate`: `--model`, `--input` and the prompts to continue.

    Args:
        commands: the parser's sub-parsers (`add_subparsers`' result).
    """
    generate = commands.add_parser(
        "generate",
        formatter_class=_HelpFormatter,
        help="continue prompts with an exported language model (train --task lm)",
        description="Continue the PROMPT arguments, or else each line of --input FILE or of standard input, and "
        "print one line per prompt, in order: the generated text that follows the prompt (without the prompt). "
        "The export's sampler, chosen when it was exported (--sampler, --temperature, --top-k, --top-p, "
        "--sampler-seed of train or export), picks each token. A prompt that is not valid UTF-8 (its bad bytes "
        "are read as U+FFFD) or longer than the model reads (only its beginning is continued) is still continued, "
        "with a warning on standard error that names its line. A line the model fails on is named in an error on "
        "standard error and printed as an empty line; the other lines are continued. Exit status: 0 when every "
        "line was continued, 1 when some line failed, 2 when the model or the input file is missing.",
    )
    generate.add_argument(
        "--model",
        required=True,
        type=Path,
        help="SavedModel folder of a --task lm run, or a model folder holding integer versions (the highest is used)",
    )
    generate.add_argument(
        "--input",
        metavar="FILE",
        help="read the prompts from FILE, one per line ('-' for standard input, what is read when no PROMPT is given)",
    )
    generate.add_argument("prompt", nargs="*", help="prompts to continue (none: read them from --input)")


def _add_translate_command(commands):
    """`translate`: `--model`, `--input` and the sentences to translate.

    Args:
        commands: the parser's sub-parsers (`add_subparsers`' result).
    """
    translate = commands.add_parser(
        "translate",
        formatter_class=_HelpFormatter,
        help="translate text with an exported SavedModel",
        description="Translate the TEXT arguments, or else each line of --input FILE or of standard input, "
        "and print one line per sentence, in order. A sentence that is not valid UTF-8 (its bad bytes are read "
        "as U+FFFD) or longer than the model reads (only its beginning is translated) is still translated, with "
        "a warning on standard error that names its line. A line the model fails on is named in an error on "
        "standard error and printed as an empty line; the other lines are translated. Exit status: 0 when "
        "every line was translated, 1 when some line failed, 2 when the model or the input file is missing.",
    )
    translate.add_argument(
        "--model",
        required=True,
        type=Path,
        help="SavedModel folder, or a model folder holding integer versions (the highest is used)",
    )
    translate.add_argument(
        "--input",
        metavar="FILE",
        help="read the sentences from FILE, one per line ('-' for standard input, what is read when no TEXT is given)",
    )
    translate.add_argument("text", nargs="*", help="sentences to translate (none: read them from --input)")


_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
# Vocabulary sizes are requests (TrainConfig); the model config records the learned sizes.
_MODEL_FIELDS = {
    f.name
    for config_class in (ModelConfig, LanguageModelConfig)
    for f in dataclasses.fields(config_class)
    if f.metadata.get("cli", True)
}


def split_by_config(values):
    """A dict of settings -> (TrainConfig settings, ModelConfig settings)."""
    return (
        {k: v for k, v in values.items() if k in _TRAIN_FIELDS},
        {k: v for k, v in values.items() if k in _MODEL_FIELDS},
    )


def load_config_file(path):
    """The settings of a `--config` JSON file: `(TrainConfig settings, model config settings)`.

    Args:
        path: `Path` of the file.

    Returns:
        two dicts of field name -> value; a `RunError` names a file that is not a JSON object of
        known fields.
    """
    from keras_transformer.runs import RunError

    if not path.is_file():
        raise FileNotFoundError(f"--config: no such file: {path}")
    try:
        values = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunError(f"--config: {path} is not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise RunError(f"--config: {path} must hold a JSON object")
    unknown = sorted(set(values) - _TRAIN_FIELDS - _MODEL_FIELDS)
    if unknown:
        raise RunError(f"--config: unknown keys {unknown} in {path}")
    return split_by_config(values)
