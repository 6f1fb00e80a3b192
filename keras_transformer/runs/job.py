"""The job of a run, the same for every task: run directory, precision, strategy, `model.fit`, checkpoints, summary.

`train` is the whole job: settle the run directory and the configs (`opening.prepare_run`), the dtype
policy (`opening.settle_precision`) and the `tf.distribute` strategy, build and compile the model, train
it with `model.fit` under periodic checkpoints and exact resume, evaluate it on the test split,
export it, and write `summary.json`. What differs by task (the data, the model, its evaluation
and its export) it asks of the run's task object (`runs.tasks.task_of`, the `runs.tasks.Task`
protocol); the job names no task.

Under `--strategy multi_worker` every worker runs `train`; only the chief writes RUN_DIR and the
export, the others write the same files into throwaway directories (see `distribute`).
"""

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.config import TrainConfig
from keras_transformer.files import write_text_atomically
from keras_transformer.precision import cpu_info, visible_accelerators
from keras_transformer.runs.checkpoints import CheckpointError, PeriodicCheckpoint, checkpoint_path, restore_checkpoint
from keras_transformer.runs.directory import (
    CHECKPOINT_DIR,
    MODEL_CONFIG_FILE,
    MODEL_FILE,
    RUN_STATE,
    SUMMARY_FILE,
    TRAIN_CONFIG_FILE,
    RunError,
)
from keras_transformer.runs.opening import prepare_run, settle_precision
from keras_transformer.runs.tasks import task_of
from keras_transformer.training import (
    base_optimizer,
    compile_transformer,
    dtype_policy,
    finalize_after_fit,
    threads,
    training_weights_kept,
)
from keras_transformer.training.distribute import (
    adapt_keras_fit,
    describe,
    is_chief,
    make_strategy,
    split_batches,
    worker_directory,
)


class _EpochTimer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def train(
    train_config,
    model_overrides=None,
    resume=False,
    log=print,
    extra_callbacks=(),
    verbose="auto",
    export=True,
    overwrite=False,
):
    """Train, evaluate on the test split, export, and write `summary.json`.

    The model is built and trained under the `tf.distribute` strategy `train_config.strategy`.
    `batch_size` (or `batch_tokens`) is the global batch of one step, split across all replicas.
    Every worker of a multi-worker cluster calls `train` and does the same work; only the chief
    (see `distribute.is_chief`) writes `RUN_DIR` and the export, the others write into throwaway
    directories (holding a copy of the chief's saved state when resuming).

    Args:
        train_config: `TrainConfig`.
        model_overrides: dict of fields of the task's model config overriding the preset.
        resume: continue the interrupted run in `train_config.run_dir`.
        log: function receiving progress lines.
        extra_callbacks: more Keras callbacks for `model.fit`.
        verbose: `model.fit` verbosity ("auto": a progress bar).
        export: False skips the export (a study that needs only the scores); the summary's
            `export_path` is then None.
        overwrite: replace the run that `train_config.run_dir` holds (`prepare_run`).

    Returns:
        The summary dict (also written to `RUN_DIR/summary.json`; on a worker other than the
        chief, its paths point into the removed throwaway directories).
    """
    started = time.perf_counter()
    try:
        # First: MultiWorkerMirroredStrategy must exist before any other TensorFlow work.
        strategy = make_strategy(train_config.strategy)
        chief = train_config.strategy != "multi_worker" or is_chief()
    except ValueError as error:
        raise RunError(str(error)) from None
    if resume and not chief and not (Path(train_config.run_dir) / TRAIN_CONFIG_FILE).is_file():
        raise RunError(
            f"Nothing to resume: no {TRAIN_CONFIG_FILE} in {train_config.run_dir}. Every worker resumes from the "
            "chief's run directory: put it on storage that every worker can read"
        )
    with (
        worker_directory(train_config.run_dir, chief, copy=RUN_STATE if resume else ()) as run_dir,
        worker_directory(train_config.export_dir, chief) as export_dir,
    ):
        train_config = dataclasses.replace(train_config, run_dir=str(run_dir), export_dir=str(export_dir))
        return _train(
            train_config,
            strategy,
            model_overrides,
            resume,
            log,
            extra_callbacks=extra_callbacks,
            verbose=verbose,
            started=started,
            export=export,
            overwrite=overwrite,
        )


def _train(train_config, strategy, model_overrides, resume, log, extra_callbacks, verbose, started, export, overwrite):
    replicas = strategy.num_replicas_in_sync
    machine = {"cpu_count": os.cpu_count(), "cpu": cpu_info(), "accelerators": visible_accelerators()}
    machine["tensorflow_threads"] = threads.settings(train_config)  # and the packed step's towers
    precision = settle_precision(train_config, resume, machine["cpu"], machine["accelerators"])
    train_config, model_config = prepare_run(
        train_config, model_overrides, resume, log, replicas, precision, overwrite=overwrite
    )
    task = task_of(train_config)
    run_dir = Path(train_config.run_dir)
    keras.utils.set_random_seed(train_config.seed)
    data = task.read_and_encode(train_config, model_config, log)
    model, start_step = _compiled_model(task, model_config, train_config, strategy, resume, log)
    log(f"Strategy: {describe(strategy)}")
    log(
        f"Model: {model.count_params():,} parameters ({train_config.preset} preset, {train_config.precision}"
        f"{', XLA' if train_config.jit_compile else ''})"
    )
    timer = _EpochTimer()
    checkpoints = PeriodicCheckpoint(
        run_dir / CHECKPOINT_DIR,
        every_steps=train_config.checkpoint_every_steps,
        every_seconds=train_config.checkpoint_every_seconds,
        step=start_step,
    )
    history = _fit(
        model,
        task,
        data,
        train_config,
        replicas,
        start_step,
        callbacks=[checkpoints, *_callbacks(task, model, model_config, train_config, data, timer, extra_callbacks)],
        verbose=verbose,
    )
    _save_model(model, run_dir / MODEL_FILE)
    summary = _training_summary(task, model, model_config, train_config, data, history, timer, replicas)
    summary.update(precision=precision.to_dict(), machine=machine)
    summary["checkpoints"] = {
        "directory": str(run_dir / CHECKPOINT_DIR),
        "resumed_from_step": start_step,
        "written_this_session": checkpoints.checkpoints_written,
        "seconds_writing_this_session": round(checkpoints.seconds_writing, 2),
    }
    module = task.serving_module(model, model_config, task.tokenizers(data), run_dir, train_config)
    summary["test"] = task.evaluate(module, train_config, log)
    export_path = export_run(module, train_config) if export else None
    if export:
        log(f"Exported the model to {export_path}")
    summary.update(
        run_dir=str(run_dir),
        model_path=str(run_dir / MODEL_FILE),
        export_path=export_path and str(export_path),
        total_seconds=round(time.perf_counter() - started, 1),
    )
    write_text_atomically(run_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    log(f"Summary written to {run_dir / SUMMARY_FILE}")
    return summary


def _compiled_model(task, model_config, train_config, strategy, resume, log):
    """The task's model, built and compiled under `strategy` and the run's dtype policy; restored on resume.

    Args:
        task: the run's task (`runs.tasks.Task`).
        model_config: the task's model config.
        train_config: the run's `TrainConfig`.
        strategy: the `tf.distribute.Strategy` to build the model under.
        resume: whether to restore the newest intact checkpoint of the run directory.
        log: callable taking one line of progress text.

    Returns:
        `(model, start_step)`: the compiled model and the steps it has already trained.
    """
    with strategy.scope(), dtype_policy(train_config.precision):
        model = compile_transformer(task.build_model(model_config), model_config, train_config)
        adapt_keras_fit(model)
        start_step = _restore(model, Path(train_config.run_dir), resume, log)
        # The checkpoint holds the cooldown's end step of the run that wrote it; a run resumed with
        # more epochs cools down to its own last step.
        base_optimizer(model.optimizer).set_cooldown_end_step(train_config.epochs * train_config.steps_per_epoch)
    return model, start_step


def _train_batches(task, data, train_config, replicas, skip=0):
    """The training batches for `model.fit`, from batch number `skip` of the run's stream on.

    Batches are global: under a strategy each replica takes its slice of every batch. The stream
    (`task.train_dataset`) repeats (one iterator for a whole `fit`) and is the same for a given
    seed, so skipping the batches a checkpoint has seen continues exactly where it left off.
    """
    return split_batches(task.train_dataset(data, train_config), replicas).skip(skip)


def _validation_batches(task, data, train_config, replicas):
    """`(validation batches, validation steps)`: one finite pass of `task.validation_dataset`, counted once."""
    validation_data = split_batches(task.validation_dataset(data, train_config), replicas)
    validation_steps = sum(1 for _ in validation_data)
    # A known cardinality makes Keras start every validation pass from a fresh iterator (under a
    # strategy, Keras 3.15 otherwise reads the exhausted one of the last pass and stops).
    return validation_data.apply(tf.data.experimental.assert_cardinality(validation_steps)), validation_steps


def _restore(model, run_dir, resume, log):
    """Steps already trained: those of the newest intact checkpoint when resuming, else 0."""
    if not resume:
        return 0
    directory = Path(run_dir) / CHECKPOINT_DIR
    try:
        step = restore_checkpoint(model, directory, log)
    except CheckpointError as error:
        raise RunError(str(error)) from None
    if step is None:
        log("No checkpoint was written before the run stopped: training from the first step")
        return 0
    log(f"Restored the training state after {step} steps from {checkpoint_path(directory, step)}")
    return step


def _fit(model, task, data, train_config, replicas, start_step, callbacks, verbose):
    """`model.fit` from step `start_step` to the end of the last epoch.

    A run resumed in the middle of an epoch first finishes that epoch (a `fit` of its remaining
    steps), then trains the remaining epochs; each `fit` reads the batch stream from where the
    steps before it stopped. The result equals one uninterrupted `fit`: only the last call ends
    by swapping in the weights' moving averages (when kept).

    Returns:
        The history, each metric's list holding one value per epoch trained by this call.

    Raises:
        RunError: the run has already taken more steps than `epochs * steps_per_epoch`.
    """
    steps_per_epoch, epochs = train_config.steps_per_epoch, train_config.epochs
    if start_step > epochs * steps_per_epoch:
        raise RunError(
            f"The run has already trained {start_step} steps, more than --epochs {epochs} x --steps-per-epoch "
            f"{steps_per_epoch}; resume with more epochs"
        )
    epoch, taken = divmod(start_step, steps_per_epoch)
    segments = []  # (initial_epoch, epochs, steps_per_epoch) of each fit call
    if taken:
        segments.append((epoch, epoch + 1, steps_per_epoch - taken))
        epoch += 1
    if epoch < epochs:
        segments.append((epoch, epochs, steps_per_epoch))
    validation_data, validation_steps = _validation_batches(task, data, train_config, replicas)
    history, position = {}, start_step
    for index, (first, last, steps) in enumerate(segments):
        with training_weights_kept(model) if index < len(segments) - 1 else contextlib.nullcontext():
            fitted = model.fit(
                _train_batches(task, data, train_config, replicas, skip=position),
                initial_epoch=first,
                epochs=last,
                steps_per_epoch=steps,
                validation_data=validation_data,
                validation_steps=validation_steps,
                shuffle=False,  # the dataset shuffles itself
                callbacks=callbacks,
                verbose=verbose,
            )
        for name, values in fitted.history.items():
            history.setdefault(name, []).extend(values)
        position += (last - first) * steps
        if model.stop_training:  # a callback ended training early
            break
    if not segments:  # resumed after the last step: end as `fit` would have
        finalize_after_fit(model)
    return history


def _save_model(model, path):
    """`model.save` to `path` through a staging file: a reader sees the old file or the new one."""
    staging = path.with_name(f".staging-{path.name}")
    model.save(staging)
    os.replace(staging, path)


def _callbacks(task, model, model_config, train_config, data, timer, extra_callbacks):
    """The task's callbacks (translation's optional validation BLEU), TensorBoard, the epoch timer, extras."""
    run_dir = Path(train_config.run_dir)
    # The task's first, before TensorBoard, which then logs their scores with the epoch's other metrics.
    callbacks = task.callbacks(model, model_config, train_config, data)
    return [*callbacks, keras.callbacks.TensorBoard(str(run_dir / "logs")), timer, *extra_callbacks]


def _training_summary(task, model, model_config, train_config, data, history, timer, replicas):
    """The summary of `model.fit`: configs, sizes, time and throughput of this call, last metrics.

    On resume, time and throughput count only the epochs trained by this call.
    """
    train_seconds = sum(timer.seconds)
    summary = {
        "model_config": model_config.to_dict(),
        "train_config": train_config.to_dict(),
        "parameters": int(model.count_params()),
        "replicas": replicas,
        **task.data_summary(data),
        "epochs_this_session": len(timer.seconds),
        "train_seconds_this_session": round(train_seconds, 1),
        "final_metrics": {k: round(float(v[-1]), 4) for k, v in history.items()} if history else {},
    }
    if timer.seconds:
        # Real target tokens per epoch, counted by the `target_tokens` metric (over all replicas).
        tokens = np.array(history["target_tokens"][-len(timer.seconds) :])
        summary["target_tokens_per_second"] = round(float(tokens.sum()) / train_seconds)
        summary["target_tokens_per_second_median_epoch"] = round(float(np.median(tokens / np.array(timer.seconds))))
    return summary


def load_run(run_dir):
    """`(train_config, model_config, model, module)` of a finished run.

    `module` is what the run exports: a `Translator`, or for `lm` an `export.TextGenerator`, for
    `mlm` an `export.MaskFiller` (see `make_serving_module`).
    """
    run_dir = Path(run_dir)
    for name in (TRAIN_CONFIG_FILE, MODEL_CONFIG_FILE, MODEL_FILE):
        if not (run_dir / name).is_file():
            raise RunError(f"{run_dir} is not a finished run: {name} is missing")
    train_config = TrainConfig.load(run_dir / TRAIN_CONFIG_FILE)
    task = task_of(train_config)
    model_config = task.config_class.load(run_dir / MODEL_CONFIG_FILE)
    model = keras.models.load_model(run_dir / MODEL_FILE)
    tokenizers = task.load_tokenizers(run_dir, train_config)
    module = task.serving_module(model, model_config, tokenizers, run_dir, train_config)
    return train_config, model_config, model, module


def make_serving_module(model, model_config, tokenizers, run_dir, train_config):
    """What a run exports, with the run's decoding settings: see `load_run`.

    Args:
        model: the run's trained model.
        model_config: its config.
        tokenizers: the run's tokenizers: `(source, target)` for translation, `(tokenizer,)` for
            a language model.
        run_dir: the run directory (its model_config.json is an asset of the export).
        train_config: the run's `TrainConfig` (beam size and length penalty, or the sampler).

    Returns:
        The `tf.Module` to export.
    """
    return task_of(train_config).serving_module(model, model_config, tokenizers, run_dir, train_config)


def export_run(translator, train_config, export_dir=None, ids_only=False, export_format="savedmodel"):
    """Export a run's serving module (text, or `ids_only`) with warm-up requests made of a few validation texts.

    The ids-only model is named `MODEL_NAME_ids`. With `export_format="ctranslate2"`, a translation
    run's weights go to the CTranslate2 engine's export instead, `MODEL_NAME_ctranslate2`
    (`export.ctranslate2_export.export_ctranslate2`), decoding with the translator's beam size.

    Args:
        translator: the run's `Translator` (or, for a language model, its module of `load_run`).
        train_config: the run's `TrainConfig`: task, validation corpus, model name, export root.
        export_dir: export root; `train_config.export_dir` when None.
        ids_only: export the ids-in, ids-out model instead of the text one.
        export_format: `"savedmodel"` or `"ctranslate2"`.

    Returns:
        `Path` of the new version folder.

    Raises:
        RunError: a CTranslate2 export of a language model, or of a model the engine cannot run.
    """
    if export_format == "ctranslate2":
        return _export_ctranslate2(translator, train_config, export_dir)
    return task_of(train_config).export(translator, train_config, export_dir, ids_only)


def _export_ctranslate2(translator, train_config, export_dir):
    from keras_transformer.export.ctranslate2_export import export_ctranslate2
    from keras_transformer.models import UnsupportedModelError

    if train_config.task != "translate":
        raise RunError(
            f"a CTranslate2 export is of a translation run; {train_config.run_dir} is a --task {train_config.task} run"
        )
    try:
        return export_ctranslate2(
            translator.model,
            translator.model_config,
            translator.source_tokenizer,
            translator.target_tokenizer,
            Path(train_config.run_dir) / MODEL_CONFIG_FILE,
            export_dir or train_config.export_dir,
            train_config.model_name,
            translator.beam_size,
        )
    except (UnsupportedModelError, ImportError) as error:
        raise RunError(str(error)) from None
