"""`translate` and `generate`: texts through a loaded text export, one output line per input.

Texts come from the arguments, a file or stdin (a typed line is answered at once); a text the
model fails on costs only itself, and bad bytes, over-long texts and failures are reported on
stderr, line by line. An export of another task (a language model given to `translate`) is
refused with one line that says which task it is of, as its `model_config.json` records it.
"""

import contextlib
import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

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

    task: str  # the task (`TrainConfig.task`) of the exports it reads
    input_name: str  # the text signature's input
    output_name: str  # its text output
    arguments: str  # the positional arguments' name in messages
    done: str  # what happens to a text, in messages
    limit: str  # how much of a text the model reads
    needs: str  # what it needs, in the errors about an export that does not suit it
    missing: str  # the error when the export has no such signature


_TRANSLATE = _TextCommand(
    "translate",
    "text",
    "translation",
    "sentences",
    "translated",
    "max_source_len tokens",
    "translate needs a translation export",
    "takes no text (an ids-only export?); translate needs the text export",
)
_GENERATE = _TextCommand(
    "lm",
    "prompt",
    "continuation",
    "prompts",
    "continued",
    "max_length - 2 pieces",
    "generate needs the text export of a --task lm run",
    "takes no prompt (an ids-only export, or not of a --task lm run?); generate needs the text export of a "
    "--task lm run",
)
# What an export of each task holds, in the error about an export of another task.
_TASK_MODELS = {"translate": "a translation model", "lm": "a language model", "mlm": "a masked language model"}


def _export_task(version_dir):
    """The task of the run that wrote an export, as the `model_config.json` among its assets records it.

    A language model's config names its kind, a decoder for `lm` or an encoder for `mlm`
    (`runs.language.KINDS`); a translation model's config has source and target vocabularies.

    Args:
        version_dir: an export's version folder (holding `saved_model.pb`).

    Returns:
        "translate", "lm" or "mlm"; None where the export records no task (no readable
        `assets/model_config.json`: not an export of this project).
    """
    from keras_transformer.runs import MODEL_CONFIG_FILE
    from keras_transformer.runs.language import KINDS

    try:
        config = json.loads((Path(version_dir) / "assets" / MODEL_CONFIG_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    if "kind" in config:
        return {kind: task for task, kind in KINDS.items()}.get(config["kind"])
    return "translate" if "source_vocab_size" in config else None


def _check_task(model, version_dir, command):
    """Raise `RunError` where the export at `--model` is of another task than `command`'s.

    Args:
        model: the `--model` path given.
        version_dir: the export's version folder that is read (`model` itself, or its newest version).
        command: `_TRANSLATE` or `_GENERATE`.
    """
    from keras_transformer.runs import RunError

    task = _export_task(version_dir)
    if task is None or task == command.task:
        return
    version = "" if Path(version_dir) == Path(model) else f", version {Path(version_dir).name}"  # the newest
    raise RunError(f"{model} holds {_TASK_MODELS.get(task, 'a model')} (task {task}{version}); {command.needs}")


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

    from keras_transformer.export.ctranslate2_export import EngineError

    try:
        outputs = signature(**{command.input_name: tf.constant(texts, dtype=tf.string)})
    except (tf.errors.OpError, EngineError) as error:
        if len(texts) > 1:
            half = len(texts) // 2
            return _call_text_signature(signature, texts[:half], command) + _call_text_signature(
                signature, texts[half:], command
            )
        message = error.message if isinstance(error, tf.errors.OpError) else str(error)
        return [(None, False, (message.strip() or type(error).__name__).splitlines()[0])]
    translations = outputs[command.output_name].numpy().tolist()
    return [
        (translation, truncated, None) for translation, truncated in zip(translations, outputs["truncated"].numpy())
    ]


def _say_skipped(version_dir, problems):
    """The warning line of a damaged export version passed over for an older one."""
    version_dir = Path(version_dir)
    message = f"skipped version {version_dir.name} of {version_dir.parent}, damaged: {'; '.join(problems)}"
    print(f"warning: {message}", file=sys.stderr)


def translate(args):
    """`keras-transformer translate`: the sentences of the arguments or of `--input`; the exit status."""
    return _run_text_command(args, args.text, _TRANSLATE)


def generate(args):
    """`keras-transformer generate`: continue the prompts of the arguments or of `--input`; the exit status."""
    return _run_text_command(args, args.prompt, _GENERATE)


def _run_text_command(args, arguments, command):
    """`translate` or `generate`: the texts of the arguments or of `--input`, one output line each."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

    from keras_transformer.export import MAX_TEXT_BYTES, SIGNATURE_KEY, latest_version_dir
    from keras_transformer.export.ctranslate2_export import CTranslate2Translator, is_ctranslate2_export
    from keras_transformer.runs import RunError

    if arguments and args.input is not None:
        raise RunError(f"give the {command.arguments} as arguments or with --input, not both")
    if args.input not in (None, "-") and not Path(args.input).is_file():
        raise FileNotFoundError(f"--input: no such file: {args.input}")
    if is_ctranslate2_export(args.model):  # a translation export for the CTranslate2 engine
        export_dir = latest_version_dir(args.model, on_skip=_say_skipped, export_format="ctranslate2")
        _check_task(args.model, export_dir, command)
        signature = CTranslate2Translator(export_dir, intra_threads=0).text_signature
    else:
        export_dir = latest_version_dir(args.model, on_skip=_say_skipped)
        _check_task(args.model, export_dir, command)  # before loading it: a wrong model is refused at once
        loaded = tf.saved_model.load(str(export_dir))
        signature = loaded.signatures.get(SIGNATURE_KEY)
        if signature is None or command.input_name not in signature.structured_input_signature[1]:
            raise RunError(f"{export_dir} {command.missing}")

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
