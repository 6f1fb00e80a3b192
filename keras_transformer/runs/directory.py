"""What every task of a run and the job share: the run directory's file names, `RunError`, the model fields.

A run keeps everything in one directory (see `keras_transformer.runs`); these names say where.
`RUN_STATE` is what a resumed run reads back from it, `RESUMABLE_CHANGES` the settings that may
differ when it does. `TRANSLATION_MODEL_FIELDS` and `LANGUAGE_MODEL_FIELDS` are the fields of
`ModelConfig` and `LanguageModelConfig`: a task refuses a setting that only the other kind of
model has.
"""

import dataclasses

from keras_transformer.config import DECODING_FIELDS, LanguageModelConfig, ModelConfig

TRAIN_CONFIG_FILE = "train_config.json"
MODEL_CONFIG_FILE = "model_config.json"
MODEL_FILE = "model.keras"
SUMMARY_FILE = "summary.json"
CHECKPOINT_DIR = "checkpoints"
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
