"""Opening a run: its dtype policy settled, its run directory created or reopened, its configs saved.

`settle_precision` chooses the policy once, at the run's start, and keeps it on resume;
`prepare_run` makes a new run directory (refusing one that holds a run, unless `overwrite`) or
reopens one to resume, with only `RESUMABLE_CHANGES` allowed. `job.train` calls both first.
"""

import dataclasses
from pathlib import Path

from keras_transformer.config import TrainConfig
from keras_transformer.precision import AUTO, PrecisionChoice, choose_precision, cpu_info, visible_accelerators
from keras_transformer.runs.directory import (
    MODEL_CONFIG_FILE,
    RESUMABLE_CHANGES,
    TRAIN_CONFIG_FILE,
    RunError,
    changed_settings,
    clear_run,
    describe_run,
)
from keras_transformer.runs.tasks import task_of


def settle_precision(train_config, resume=False, cpu=None, accelerators=None):
    """The dtype policy of a run, chosen once, at its start.

    A new run resolves `train_config.precision` for this machine (`precision.choose_precision`:
    "auto" is mixed_bfloat16 where bfloat16 is native, float32 elsewhere), and `prepare_run`
    saves the chosen policy in train_config.json. A resumed run keeps that policy, when asked
    for "auto" (the default) as when asked for the policy itself, also on a machine where auto
    would choose differently: a change of compute dtype in the middle would make it another
    experiment than the run that was never interrupted. The reason then says so, and what auto
    would choose here; a kept half precision that this machine does not compute natively comes
    with a warning. Any other policy on resume is left for `prepare_run` to refuse.

    Args:
        train_config: the `TrainConfig` asked for.
        resume: whether the run in `train_config.run_dir` is being resumed.
        cpu: a `precision.cpu_info()` result; read from the machine when `None`.
        accelerators: a `precision.visible_accelerators()` result; asked of the backend when `None`.

    Returns:
        A `precision.PrecisionChoice`.
    """
    cpu = cpu_info() if cpu is None else cpu
    accelerators = visible_accelerators() if accelerators is None else accelerators
    requested = train_config.precision
    saved_path = Path(train_config.run_dir) / TRAIN_CONFIG_FILE
    saved = TrainConfig.load(saved_path).precision if resume and saved_path.is_file() else AUTO
    if saved == AUTO or requested not in (AUTO, saved):
        return choose_precision(requested, cpu, accelerators)
    here = choose_precision(saved, cpu, accelerators)
    auto = choose_precision(AUTO, cpu, accelerators)
    reason = f"the run's, kept on resume; auto would choose {auto.policy} here: {auto.reason}"
    return PrecisionChoice(requested, saved, reason, here.warning)


def prepare_run(
    train_config, model_overrides=None, resume=False, log=print, replicas=1, precision=None, overwrite=False
):
    """Create or reopen the run directory and settle the configs, the precision among them.

    A new run refuses a directory that holds a run (`describe_run` says how on), unless
    `overwrite`: the old run's files are then removed (`clear_run`), once the new configs are
    settled, so that a mistaken setting leaves the old run in place.

    The precision chosen, and why, is logged (and a warning when it is slow on this machine);
    train_config.json holds the policy, never "auto".

    Args:
        train_config: `TrainConfig` (on resume, only `RESUMABLE_CHANGES` may differ from the
            saved one, and the saved one is used otherwise).
        model_overrides: dict of fields of the task's model config that override the preset
            (`ModelConfig`'s for translation, `LanguageModelConfig`'s for `lm` / `mlm`; on resume,
            only the values the run already has are accepted).
        resume: continue the run saved in `train_config.run_dir`.
        log: callable taking one line of progress text (default `print`).
        replicas: replicas in sync; the global batch must give each at least one pair (checked
            before a new run directory is made).
        precision: the run's `PrecisionChoice`, from `settle_precision`; settled here when `None`.
        overwrite: replace the run in `train_config.run_dir`, if any, by a new one (not with `resume`).

    Returns:
        `(train_config, model_config)`, the latter without vocabulary sizes until the
        vocabularies exist.

    Raises:
        RunError: a run in the way (no `resume` or `overwrite`), nothing to resume, a change a
            resumed run cannot make, a folder `overwrite` does not replace, or invalid settings.
    """
    if resume and overwrite:
        raise RunError("--resume continues the run in --run-dir and --overwrite replaces it: pass one of them")
    if precision is None:
        precision = settle_precision(train_config, resume)
    train_config = dataclasses.replace(train_config, precision=precision.policy)
    run_dir = Path(train_config.run_dir)
    saved_train = run_dir / TRAIN_CONFIG_FILE
    if resume:
        train_config, model_config = _reopen_run(train_config, model_overrides or {}, replicas)
        log(f"Resuming the run in {run_dir}")
        _log_precision(precision, log)
        return train_config, model_config
    if saved_train.is_file() and not overwrite:
        raise RunError(describe_run(run_dir))
    task = task_of(train_config)
    model_config = task.model_config(train_config.preset, model_overrides or {})
    task.check_global_batch(train_config, model_config, replicas)
    train_config = task.settle_new_run(train_config, model_config)
    if overwrite and clear_run(run_dir):
        log(f"--overwrite: removed the old run in {run_dir}")
    run_dir.mkdir(parents=True, exist_ok=True)
    # Both configs at once (the vocabulary sizes are filled in later): a run killed from here on
    # can be resumed.
    model_config.save(run_dir / MODEL_CONFIG_FILE)
    train_config.save(saved_train)
    _log_precision(precision, log)
    return train_config, model_config


def _reopen_run(train_config, model_overrides, replicas):
    """The configs of the run saved in `train_config.run_dir`, with the changes a resumed run may make.

    Args:
        train_config: the `TrainConfig` asked for, its precision settled; only `RESUMABLE_CHANGES`
            may differ from the saved one.
        model_overrides: dict of model config fields asked for; only the values the run already
            has are accepted.
        replicas: replicas in sync; the global batch must give each at least one pair.

    Returns:
        `(train_config, model_config)`: the saved configs, the train config with the resumable
        changes applied.

    Raises:
        RunError: nothing to resume, or a change that a resumed run cannot make.
    """
    run_dir = Path(train_config.run_dir)
    saved_train = run_dir / TRAIN_CONFIG_FILE
    if not saved_train.is_file():
        raise RunError(f"Nothing to resume: no {TRAIN_CONFIG_FILE} in {run_dir}")
    saved = TrainConfig.load(saved_train)
    if saved.precision == AUTO:  # saved unsettled (e.g. a config written by hand): settled now, no change
        saved = dataclasses.replace(saved, precision=train_config.precision)
    saved_values = saved.to_dict()
    changed = changed_settings(train_config.to_dict(), saved_values)
    task = task_of(saved)
    model_config = task.config_class.load(run_dir / MODEL_CONFIG_FILE)
    saved_model = model_config.to_dict()
    # The same model flags as the run's (the same command again) are no change.
    changed += sorted(name for name, value in model_overrides.items() if saved_model.get(name) != value)
    if changed:
        raise RunError(f"Cannot change {', '.join(changed)} when resuming {run_dir}; start a new --run-dir instead")
    train_config = TrainConfig.from_dict(
        {**saved.to_dict(), **{name: getattr(train_config, name) for name in RESUMABLE_CHANGES}}
    )
    task.check_global_batch(train_config, model_config, replicas)
    return train_config, model_config


def _log_precision(precision, log):
    log(f"Precision: {precision.describe()}")
    if precision.warning:
        log(precision.warning)
