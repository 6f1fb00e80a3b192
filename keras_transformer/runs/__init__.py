"""A training run, end to end: corpus -> vocabularies -> tf.data -> `model.fit` -> evaluation -> export.

One job for every task (`TrainConfig.task`): a run directory, the precision, the strategy,
`model.fit` with periodic checkpoints and exact resume, the summary (`job`; its opening, the
precision and the run directory made or reopened, in `opening`). What differs by task
(the data, the model, its evaluation and its export) is a task object (the `tasks.Task`
protocol), looked up by name in a registry (`tasks.task_of`): `translation.TranslationTask` for
`translate`, `language.LanguageModelTask` for `lm` and `mlm`. A task is one module that
registers itself (`tasks.register_task`); importing this package imports every task module, so
every task is registered. What the job and the tasks share is in `directory`.

Everything is kept in one run directory so a run can be resumed or re-exported:

    RUN_DIR/train_config.json, model_config.json   the configs (rebuild the model from these)
    RUN_DIR/source_vocab.txt, target_vocab.txt     WordPiece vocabularies (cached; lm/mlm: vocab.txt)
    RUN_DIR/checkpoints/step-N/                    the training state after N steps, for `--resume`
    RUN_DIR/model.keras                            the trained model
    RUN_DIR/logs/                                  TensorBoard
    RUN_DIR/summary.json                           metrics, throughput, precision, machine, paths

Under `--strategy multi_worker` every worker runs `train`; only the chief writes RUN_DIR and the
export, the others write the same files into throwaway directories (see `distribute`).
"""

from keras_transformer.runs.directory import (
    CHECKPOINT_DIR,
    LANGUAGE_MODEL_FIELDS,
    MODEL_CONFIG_FILE,
    MODEL_FILE,
    RESUMABLE_CHANGES,
    RUN_STATE,
    SUMMARY_FILE,
    TRAIN_CONFIG_FILE,
    TRANSLATION_MODEL_FIELDS,
    WARMUP_SENTENCES,
    RunError,
)
from keras_transformer.runs.job import export_run, load_run, make_serving_module, train
from keras_transformer.runs.language import (
    VOCAB_FILE,
    LanguageModelTask,
    continue_texts,
    first_half,
    load_split,
    prompt_ids,
    sampler_settings,
    score_language_model,
)
from keras_transformer.runs.opening import prepare_run, settle_precision
from keras_transformer.runs.tasks import Task, register_task, registered_tasks, task_of
from keras_transformer.runs.translation import TranslationTask, make_translator
from keras_transformer.runs.translation import _tokenizers as _tokenizers

__all__ = [
    "CHECKPOINT_DIR",
    "LANGUAGE_MODEL_FIELDS",
    "MODEL_CONFIG_FILE",
    "MODEL_FILE",
    "RESUMABLE_CHANGES",
    "RUN_STATE",
    "SUMMARY_FILE",
    "TRAIN_CONFIG_FILE",
    "TRANSLATION_MODEL_FIELDS",
    "VOCAB_FILE",
    "WARMUP_SENTENCES",
    "LanguageModelTask",
    "RunError",
    "Task",
    "TranslationTask",
    "continue_texts",
    "export_run",
    "first_half",
    "load_run",
    "load_split",
    "make_serving_module",
    "make_translator",
    "prepare_run",
    "prompt_ids",
    "register_task",
    "registered_tasks",
    "sampler_settings",
    "score_language_model",
    "settle_precision",
    "task_of",
    "train",
]
