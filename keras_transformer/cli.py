"""The `keras-transformer` command line: `train`, `evaluate`, `translate`, `export`, `generate`.

Flags of `train` are generated from the fields of `TrainConfig`, `ModelConfig` and
`LanguageModelConfig` (for `--task lm|mlm`), with their help texts; `--config FILE.json` loads
settings and explicit flags override it. User errors (bad values, missing files, an existing run)
print one `error:` line and exit with status 2.
"""

import argparse
import contextlib
import dataclasses
import itertools
import json
import os
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's C++ start-up chatter quiet

from keras_transformer.config import DECODING_FIELDS, PRESETS, LanguageModelConfig, ModelConfig, TrainConfig  # noqa: E402

_BOOLEAN_CHOICES = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _boolean(text):
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
    by_preset = [f"{name} {values[field.name]!r}" for name, values in PRESETS.items() if field.name in values]
    if config_class in (ModelConfig, LanguageModelConfig) and by_preset:
        return f"(default: set by --preset: {', '.join(by_preset)})"
    return f"(default: {field.default!r})"


def _add_config_flags(parser, config_class, title, only=None, exclude=()):
    """Flags for the fields of `config_class`.

    Args:
        parser: the (sub)command's `argparse.ArgumentParser`.
        config_class: `TrainConfig`, `ModelConfig` or `LanguageModelConfig`.
        title: the title of the flags' group in `--help`.
        only: names of the only fields to offer, whose flags then default to the run's settings
            (`evaluate`, `export`); None for all fields with `cli=True`.
        exclude: names of fields not to offer (flags another group has already).

    Returns:
        The set of names of the fields offered.
    """
    group = parser.add_argument_group(title)
    offered = set()
    for field in dataclasses.fields(config_class):
        if not field.metadata.get("cli", True) or (only is not None and field.name not in only):
            continue
        if field.name in exclude:
            continue
        offered.add(field.name)
        flag = "--" + field.name.replace("_", "-")
        aliases = [flag] if "_" not in field.name else [flag, "--" + field.name]
        # File paths: SOURCE TARGET for translation, one or more text files for a language model
        # (`TrainConfig.validate` checks the count for the task).
        paths = isinstance(field.default, tuple)
        kind = str if paths else {int: int, float: float, bool: _boolean, str: str}[type(field.default)]
        group.add_argument(
            *aliases,
            dest=field.name,
            type=kind,
            nargs="+" if paths else None,
            choices=field.metadata.get("choices"),
            default=argparse.SUPPRESS,  # only explicit flags reach the namespace
            metavar="FILE" if paths else None if field.metadata.get("choices") else field.name.upper(),
            help=field.metadata["help"]
            if paths
            else f"{field.metadata['help']} {_default_text(config_class, field, only)}",
        )
    return offered


def _build_parser():
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
    """`train`: `--config`, `--resume` and one flag per field of the training and model configs.

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
    train.add_argument("--resume", action="store_true", help="continue the interrupted run in --run-dir")
    _add_config_flags(train, TrainConfig, "training")
    model_flags = _add_config_flags(train, ModelConfig, "model (override the preset)")
    _add_config_flags(
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
    _add_config_flags(evaluate, TrainConfig, "decoding", only=DECODING_FIELDS)

    export = commands.add_parser(
        "export",
        formatter_class=_HelpFormatter,
        help="export a finished run as a new SavedModel version",
        description="Write EXPORT_DIR/MODEL_NAME/VERSION (text in, translation out; needs a model server "
        "with tensorflow-text ops), or with --ids-only EXPORT_DIR/MODEL_NAME_ids/VERSION (token ids in and "
        "out, core TensorFlow ops only). Both rewrite EXPORT_DIR/models.config.",
    )
    export.add_argument("--run-dir", required=True, type=Path, help="run directory written by `train`")
    export.add_argument("--export-dir", type=Path, help="export root (default: the run's export_dir)")
    export.add_argument(
        "--ids-only", action="store_true", help="export token ids -> token ids without tensorflow-text ops"
    )
    _add_config_flags(export, TrainConfig, "decoding", only=DECODING_FIELDS)


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


def _split_by_config(values):
    """A dict of settings -> (TrainConfig settings, ModelConfig settings)."""
    return (
        {k: v for k, v in values.items() if k in _TRAIN_FIELDS},
        {k: v for k, v in values.items() if k in _MODEL_FIELDS},
    )


def _load_config_file(path):
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
    return _split_by_config(values)


def _train(args):
    from keras_transformer import runs

    train_values, model_values = _load_config_file(args.config) if args.config else ({}, {})
    train_flags, model_flags = _split_by_config(vars(args))
    model_overrides = {**model_values, **model_flags}
    explicit = {**train_values, **train_flags}
    # File paths are kept absolute, so `evaluate` and `--resume` find them from any directory.
    for name in ("train_files", "validation_files", "test_files"):
        if name in explicit:
            explicit[name] = [os.path.abspath(path) for path in explicit[name]]
    # --train-files ... or --tfds-name imply the corpus, unless it is given.
    if "corpus" not in explicit and any(name in explicit for name in ("train_files", "validation_files", "test_files")):
        explicit["corpus"] = "files"
    elif "corpus" not in explicit and explicit.get("tfds_name"):
        explicit["corpus"] = "tfds"
    # On --resume the saved settings are the base, so only explicit flags count as changes.
    saved = Path(explicit.get("run_dir", TrainConfig.run_dir)) / runs.TRAIN_CONFIG_FILE
    base = TrainConfig.load(saved).to_dict() if args.resume and saved.is_file() else {}
    try:
        train_config = TrainConfig(**{**base, **explicit}).validate()
    except ValueError as error:
        raise runs.RunError(str(error)) from None
    args.run_dir_resolved = Path(train_config.run_dir)  # for the Ctrl-C message
    summary = runs.train(train_config, model_overrides, resume=args.resume)
    test = summary["test"]
    if "perplexity" in test:  # a language model
        scores = f"test perplexity {test['perplexity']:.2f}, token accuracy {test['accuracy']:.2%}"
    else:
        scores = f"test exact match {test['exact_match']:.2%}, BLEU {test['bleu']}"
    print(f"Done in {summary['total_seconds']:.0f} s: {scores}; exported to {summary['export_path']}")
    return 0


def _load_run_for_decoding(args):
    """`(train_config, module)` of `--run-dir`, with explicit decoding (or sampler) flags applied."""
    from keras_transformer import runs

    train_config, model_config, model, module = runs.load_run(args.run_dir)
    decoding = {name: getattr(args, name) for name in DECODING_FIELDS if hasattr(args, name)}
    if decoding:
        try:
            train_config = TrainConfig(**{**train_config.to_dict(), **decoding}).validate()
        except ValueError as error:
            raise runs.RunError(str(error)) from None
        task = runs.task_of(train_config)
        tokenizers = task.load_tokenizers(args.run_dir, train_config)
        module = runs.make_serving_module(model, model_config, tokenizers, args.run_dir, train_config)
    return train_config, module


def _evaluate(args):
    from keras_transformer import runs

    train_config, module = _load_run_for_decoding(args)
    runs.task_of(train_config).evaluate(module, train_config, print)
    return 0


def _export(args):
    from keras_transformer import runs

    train_config, translator = _load_run_for_decoding(args)
    print(f"Exported to {runs.export_run(translator, train_config, args.export_dir, ids_only=args.ids_only)}")
    return 0


# Lines go to the model this many at a time, one call each; a call that fails is retried line by
# line, so that a line the model cannot translate costs only itself.
_TRANSLATE_BATCH = 64


def _read_lines(stream, max_bytes):
    r"""The lines of a binary stream, each cut to its first `max_bytes + 1` bytes.

    A line ends at `\n` (not part of it). The rest of a longer line is read and dropped, so memory
    stays bounded whatever the input; the model reads only `max_bytes` bytes of a sentence and
    flags a longer one `truncated`.

    Args:
        stream: a binary file object.
        max_bytes: int, the most bytes of a sentence the model reads.

    Yields:
        `bytes`, one line at a time.
    """
    while line := stream.readline(max_bytes + 2):
        ended = line.endswith(b"\n")
        rest = line
        while not rest.endswith(b"\n") and (rest := stream.readline(1 << 16)):
            pass
        yield line[:-1] if ended else line[: max_bytes + 1]


@dataclasses.dataclass(frozen=True)
class _TextCommand:
    """What differs between `translate` and `generate`: the signature's names and the words of the messages."""

    input_name: str  # the text signature's input
    output_name: str  # its text output
    arguments: str  # the positional arguments' name in messages
    done: str  # what happens to a text, in messages
    limit: str  # how much of a text the model reads
    needs: str  # the error when the export has no such signature


_TRANSLATE = _TextCommand(
    "text",
    "translation",
    "sentences",
    "translated",
    "max_source_len tokens",
    "takes no text (an ids-only export?); translate needs the text export",
)
_GENERATE = _TextCommand(
    "prompt",
    "continuation",
    "prompts",
    "continued",
    "max_length - 2 pieces",
    "takes no prompt (an ids-only export, or not of a --task lm run?); generate needs the text export of a "
    "--task lm run",
)


def _call_text_signature(signature, texts, command=_TRANSLATE):
    """Translate (or continue) `texts` (a list of `bytes`) with the text signature.

    A call the model fails on is retried in halves, down to single texts, so that only the texts
    at fault fail (a batch of 64 with one of them takes 13 calls).

    Returns:
        `[(output or None, truncated, error or None)]`, one per text: the translation (or
        continuation) as UTF-8 `bytes` and the `truncated` flag, or None and the first line of
        the model's error.
    """
    import tensorflow as tf

    try:
        outputs = signature(**{command.input_name: tf.constant(texts, dtype=tf.string)})
    except tf.errors.OpError as error:
        if len(texts) > 1:
            half = len(texts) // 2
            return _call_text_signature(signature, texts[:half], command) + _call_text_signature(
                signature, texts[half:], command
            )
        return [(None, False, (error.message.strip() or type(error).__name__).splitlines()[0])]
    translations = outputs[command.output_name].numpy().tolist()
    return [
        (translation, truncated, None) for translation, truncated in zip(translations, outputs["truncated"].numpy())
    ]


def _translate(args):
    return _run_text_command(args, args.text, _TRANSLATE)


def _generate(args):
    return _run_text_command(args, args.prompt, _GENERATE)


def _run_text_command(args, arguments, command):
    """`translate` or `generate`: the texts of the arguments or of `--input`, one output line each."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

    from keras_transformer.export import MAX_TEXT_BYTES, SIGNATURE_KEY, latest_version_dir
    from keras_transformer.runs import RunError

    if arguments and args.input is not None:
        raise RunError(f"give the {command.arguments} as arguments or with --input, not both")
    if args.input not in (None, "-") and not Path(args.input).is_file():
        raise FileNotFoundError(f"--input: no such file: {args.input}")
    export_dir = latest_version_dir(args.model)
    loaded = tf.saved_model.load(str(export_dir))
    signature = loaded.signatures.get(SIGNATURE_KEY)
    if signature is None or command.input_name not in signature.structured_input_signature[1]:
        raise RunError(f"{export_dir} {command.needs}")

    with contextlib.ExitStack() as stack:
        if arguments:
            # os.fsencode gives back the bytes of an argument that is not valid UTF-8.
            texts, label, batch_size = map(os.fsencode, arguments), "text", _TRANSLATE_BATCH
        else:
            stream = sys.stdin.buffer if args.input in (None, "-") else stack.enter_context(open(args.input, "rb"))
            texts, label = _read_lines(stream, MAX_TEXT_BYTES), "line"
            batch_size = 1 if stream.isatty() else _TRANSLATE_BATCH  # a typed line is answered at once
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)  # the outputs are UTF-8 bytes: written as they are
        failed = number = 0
        while batch := list(itertools.islice(texts, batch_size)):
            for text, (translation, truncated, error) in zip(batch, _call_text_signature(signature, batch, command)):
                number += 1
                if error is not None:
                    failed += 1
                    print(f"error: {label} {number}: not {command.done}: {error}", file=sys.stderr)
                    translation = b""
                if error is None and not _is_utf8(text):
                    print(f"warning: {label} {number}: not valid UTF-8; bad bytes read as U+FFFD", file=sys.stderr)
                if error is None and (truncated or len(text) > MAX_TEXT_BYTES):
                    print(
                        f"warning: {label} {number}: longer than the model reads ({command.limit}, "
                        f"{MAX_TEXT_BYTES} bytes); only its beginning was {command.done}",
                        file=sys.stderr,
                    )
                if out is None:  # a text-only stdout, such as io.StringIO
                    sys.stdout.write(translation.decode("utf-8") + "\n")
                else:
                    out.write(translation + b"\n")
            (sys.stdout if out is None else out).flush()
    return 1 if failed else 0


def _is_utf8(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_COMMANDS = {"train": _train, "evaluate": _evaluate, "export": _export, "translate": _translate, "generate": _generate}
# What Ctrl-C leaves behind, per command. Only `train` has anything to continue.
_INTERRUPTED = {
    "train": "the run keeps its last checkpoint; continue it with the same command and --resume",
    "evaluate": "nothing was written (evaluate only reads the run); run the command again for the scores",
    # export/savedmodel.py writes a version to a staging folder, removes it on any exception and renames it
    # when complete.
    "export": "the export did not finish; no partial version is left (a version folder appears only once complete)",
    "translate": "nothing was written (translate only reads the model); run the command again",
    "generate": "nothing was written (generate only reads the model); run the command again",
}


def _interrupted_message(args):
    """What Ctrl-C left behind: `_INTERRUPTED`, unless `train` stopped before its run existed."""
    run_dir = getattr(args, "run_dir_resolved", None)
    if args.command == "train" and (run_dir is None or not (run_dir / "train_config.json").is_file()):
        return "stopped before the run directory was made; nothing to resume, run the command again"
    return _INTERRUPTED[args.command]


def main(argv=None):
    """Run the CLI on `argv` (default `sys.argv[1:]`); return the exit status."""
    args = _build_parser().parse_args(argv)
    try:
        from keras_transformer.data.parallel_text import CorpusError  # imports TensorFlow: Ctrl-C may come here
        from keras_transformer.runs import RunError

        try:
            return _COMMANDS[args.command](args)
        except (RunError, CorpusError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: {_interrupted_message(args)}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
