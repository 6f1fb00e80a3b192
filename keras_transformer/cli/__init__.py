"""The `keras-transformer` command line: `train`, `evaluate`, `translate`, `export`, `generate`.

Flags of `train` are generated from the fields of `TrainConfig`, `ModelConfig` and
`LanguageModelConfig` (for `--task lm|mlm`), with their help texts (`parser`); `--config
FILE.json` loads settings and explicit flags override it. `translate` and `generate` stream texts
through a text export (`text`). User errors (bad values, missing files, an existing run) print one
`error:` line and exit with status 2; Ctrl-C says what it left behind and exits with 130.
TensorFlow's start-up notices are kept off the terminal unless KERAS_TRANSFORMER_VERBOSE=1
(`startup`).
"""

import os
import sys
from pathlib import Path

from keras_transformer.cli import startup
from keras_transformer.cli.parser import build_parser, load_config_file, split_by_config
from keras_transformer.cli.text import generate, translate
from keras_transformer.config import DECODING_FIELDS, TrainConfig
from keras_transformer.config.train import default_run_dir


def _train(args):
    from keras_transformer import runs

    train_values, model_values = load_config_file(args.config) if args.config else ({}, {})
    train_flags, model_flags = split_by_config(vars(args))
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
    saved = Path(explicit.get("run_dir") or default_run_dir(explicit.get("task"))) / runs.TRAIN_CONFIG_FILE
    base = TrainConfig.load(saved).to_dict() if args.resume and saved.is_file() else {}
    try:
        train_config = TrainConfig(**{**base, **explicit}).validate()
    except ValueError as error:
        raise runs.RunError(str(error)) from None
    args.run_dir_resolved = Path(train_config.run_dir)  # for the Ctrl-C message
    if args.own_process:
        _configure_cpu_threads(train_config)
    summary = runs.train(train_config, model_overrides, resume=args.resume, overwrite=args.overwrite)
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

    if args.format == "ctranslate2" and args.ids_only:
        raise runs.RunError("--ids-only is a SavedModel export; a CTranslate2 export always takes token strings")
    train_config, translator = _load_run_for_decoding(args)
    path = runs.export_run(translator, train_config, args.export_dir, ids_only=args.ids_only, export_format=args.format)
    print(f"Exported to {path}")
    return 0


_COMMANDS = {"train": _train, "evaluate": _evaluate, "export": _export, "translate": translate, "generate": generate}
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


def _configure_cpu_threads(train_config):
    """One training tower per core where the packed step runs them; says so when it does.

    That is under TensorFlow, for a run that trains with the packed step (`trains_in_towers`), on a
    CPU (`training.threads.configure_cpu_threads` says where else it does not apply).
    """
    import keras

    if keras.backend.backend() != "tensorflow":
        return
    from keras_transformer.training import threads

    if not threads.trains_in_towers(train_config):
        return
    towers = threads.configure_cpu_threads()
    if towers > 1:
        print(f"CPU training: {towers} towers, one per core, each op on one core")


def run():
    """The `keras-transformer` script: `main` on the process's arguments, as the whole process."""
    return main(own_process=True)


def _interrupted_message(args):
    """What Ctrl-C left behind: `_INTERRUPTED`, unless `train` stopped before its run existed."""
    run_dir = getattr(args, "run_dir_resolved", None)
    if args.command == "train" and (run_dir is None or not (run_dir / "train_config.json").is_file()):
        return "stopped before the run directory was made; nothing to resume, run the command again"
    return _INTERRUPTED[args.command]


def main(argv=None, own_process=False):
    """Run the CLI on `argv` (default `sys.argv[1:]`); return the exit status.

    `own_process`: the CLI is the whole process (`python train.py`, the `keras-transformer`
    script): `train` may then set TensorFlow's process-wide CPU threads for one training tower
    per core (`training.threads.configure_cpu_threads`) before TensorFlow starts.

    TensorFlow is imported after the arguments are read (`--help` does not import it), its
    start-up notices dropped unless KERAS_TRANSFORMER_VERBOSE=1 (`startup.start_tensorflow`).
    """
    args = build_parser().parse_args(argv)
    args.own_process = own_process
    try:
        startup.start_tensorflow()  # before anything imports TensorFlow: its start-up notices kept quiet
        from keras_transformer.data.parallel_text import CorpusError  # imports TensorFlow: Ctrl-C may come here
        from keras_transformer.export import DamagedExportError
        from keras_transformer.runs import RunError

        try:
            return _COMMANDS[args.command](args)
        except (RunError, CorpusError, FileNotFoundError, DamagedExportError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: {_interrupted_message(args)}", file=sys.stderr)
        return 130
