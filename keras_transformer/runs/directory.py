"""What every task of a run and the job share: the run directory's file names, `RunError`, the model fields.

A run keeps everything in one directory (see `keras_transformer.runs`); these names say where,
`RUN_FILES` all of them: `clear_run` removes those for `train --overwrite`, `describe_run` says
why a new run is refused a folder that holds one.
`RUN_STATE` is what a resumed run reads back from it, `RESUMABLE_CHANGES` the settings that may
differ when it does. `TRANSLATION_MODEL_FIELDS` and `LANGUAGE_MODEL_FIELDS` are the fields of
`ModelConfig` and `LanguageModelConfig`: a task refuses a setting that only the other kind of
model has.
"""

import dataclasses
import shutil
from pathlib import Path

from keras_transformer.config import DECODING_FIELDS, LanguageModelConfig, ModelConfig

TRAIN_CONFIG_FILE = "train_config.json"
MODEL_CONFIG_FILE = "model_config.json"
MODEL_FILE = "model.keras"
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
LOGS_DIR = "logs"
# What a resumed run reads back from RUN_DIR: copied for workers other than the chief, so that
# every worker restores the chief's state.
RUN_STATE = (
    TRAIN_CONFIG_FILE,
    MODEL_CONFIG_FILE,
    "source_vocab.txt",
    "target_vocab.txt",
    "vocab.txt",
    CHECKPOINT_DIR,
)
# Everything a run writes into RUN_DIR, and so all that `clear_run` (`train --overwrite`) removes; a
# file being replaced is staged as ".staging-NAME" (`files.write_text_atomically`, the model), a
# vocabulary being written as ".vocab-*.tmp" (`data.vocabulary`).
RUN_FILES = (*RUN_STATE, MODEL_FILE, LOGS_DIR, SUMMARY_FILE)
WARMUP_SENTENCES = 3  # validation sentences replayed by TF Serving before it serves a version
# Settings that may change when a run is resumed; any other change would make the resumed
# run a different experiment.
# (The strategy may change: batches are global, so a run started on one machine can go on on several.)
RESUMABLE_CHANGES = frozenset(
    {
        "epochs",
        "run_dir",
        "export_dir",
        "model_name",
        *DECODING_FIELDS,
        "test_size",
        "strategy",
        "checkpoint_every_steps",
        "checkpoint_every_seconds",
    }
)

# Settings a new run settles from its model when they are unset (None): asked unset again when the
# run is resumed, they keep the settled value; asked set, they must equal it.
SETTLED_AT_START = frozenset({"joint_vocab"})


def changed_settings(asked, saved):
    """The train settings a resumed run is asked to change and cannot.

    Args:
        asked: dict of the `TrainConfig` asked for.
        saved: dict of the run's saved `TrainConfig`.

    Returns:
        sorted names whose values differ, but for `RESUMABLE_CHANGES` and `SETTLED_AT_START`
        asked unset.
    """
    return sorted(
        name
        for name, value in asked.items()
        if value != saved[name] and name not in RESUMABLE_CHANGES and not (value is None and name in SETTLED_AT_START)
    )


TRANSLATION_MODEL_FIELDS = frozenset(field.name for field in dataclasses.fields(ModelConfig))
LANGUAGE_MODEL_FIELDS = frozenset(field.name for field in dataclasses.fields(LanguageModelConfig))


class RunError(Exception):
    """A user-facing problem with a run directory (printed as one line by the CLI)."""


def describe_run(run_dir):
    """How a new run in `run_dir` is refused: which run is there and the three ways on (`RunError`'s text)."""
    run_dir = Path(run_dir)
    if (run_dir / SUMMARY_FILE).is_file():
        held, resume = "a finished run", "--resume to continue it (with more --epochs)"
    else:
        held, resume = "an interrupted run", "--resume to continue it"
    return (
        f"{run_dir} already holds {held}; pass {resume}, --run-dir DIR to train in another folder, "
        "or --overwrite to replace it"
    )


def _is_run_file(name):
    if name.startswith(".staging-"):
        name = name[len(".staging-") :]
    return name in RUN_FILES or (name.startswith(".vocab-") and name.endswith(".tmp"))


def clear_run(run_dir):
    """Remove the run in `run_dir`, for a new one in its place (`train --overwrite`): its own files only.

    A folder that does not exist or is empty holds nothing to remove. Anything else must be a run
    (it holds train_config.json) holding only `RUN_FILES` (and their staging files): nothing else is
    removed, and links are removed, never followed. train_config.json goes last, so that a folder
    half removed (the process killed) is still a run that `--overwrite` replaces.

    Args:
        run_dir: the run directory.

    Returns:
        Whether a run was removed (False: nothing was there).

    Raises:
        RunError: the folder is not a run directory, or holds files a run does not write.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        if run_dir.exists() or run_dir.is_symlink():
            raise RunError(f"--overwrite: {run_dir} is not a folder; choose another --run-dir")
        return False
    names = sorted(path.name for path in run_dir.iterdir())
    if not names:
        return False
    if not (run_dir / TRAIN_CONFIG_FILE).is_file():
        raise RunError(
            f"--overwrite replaces a run, and {run_dir} is not a run directory (no {TRAIN_CONFIG_FILE}, "
            f"{len(names)} other entr{'y' if len(names) == 1 else 'ies'}: {', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}); nothing was deleted: choose another --run-dir"
        )
    others = [name for name in names if not _is_run_file(name)]
    if others:
        raise RunError(
            f"--overwrite removes only a run's own files, and {run_dir} holds others too: "
            f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}; nothing was deleted: move them "
            "away or choose another --run-dir"
        )
    for name in sorted(names, key=lambda name: name == TRAIN_CONFIG_FILE):
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return True
