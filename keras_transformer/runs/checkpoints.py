"""Training checkpoints that survive `kill -9`: written atomically, verified when read back.

A checkpoint is a folder `DIRECTORY/step-00001234/` holding everything a run needs to go on
exactly where it stopped:

    state.npz       every variable of the training state, in a fixed order: the model's weights,
                    the states of its random seed generators (dropout), and the optimizer's
                    variables (Adam's moments, the step counter that drives the learning-rate
                    schedule, the moving averages of the weights when they are kept)
    manifest.json   the step, each variable's path, shape and dtype, and the size and SHA-256
                    of `state.npz`

It is written into a hidden staging folder, flushed to disk, and renamed into place: a folder
named `step-*` is always complete. Reading checks the manifest, size and checksum before loading
anything, so a checkpoint damaged later (a truncated copy, a bad disk) is reported and passed
over for the one before it. The newest `keep` checkpoints are kept.

One NumPy archive rather than `Model.save_weights`: the same variables, and the seed generators,
which a weights file leaves out, in one write (docs/training.md gives its speed).

Backend-neutral: Keras and NumPy only.
"""

import json
import os
import re
import shutil
import time
from pathlib import Path

import keras
import numpy as np

from keras_transformer.files import fsync_path, sha256_of

STATE_FILE = "state.npz"
MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
_NAME = re.compile(r"^step-(\d+)$")
_STAGING_PREFIX = ".staging-"


class CheckpointError(Exception):
    """Checkpoints exist but none can be restored (each one's problem is in the message)."""


def _dtype(variable):
    return keras.backend.standardize_dtype(variable.dtype)


def _state_variables(model):
    """The variables of the training state, in an order fixed by the architecture.

    The model's variables (its weights and seed generator states) and the optimizer's; the
    optimizer is built first if it is not yet, so that its variables exist.
    """
    optimizer = model.optimizer
    if optimizer is None:
        return list(model.variables)
    if not optimizer.built:
        optimizer.build(model.trainable_variables)
    return [*model.variables, *optimizer.variables]


def checkpoint_steps(directory):
    """Steps of the complete checkpoints in `directory`, newest first (empty if there is none)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    steps = [int(match.group(1)) for match in map(_NAME.match, os.listdir(directory)) if match]
    return sorted(steps, reverse=True)


def checkpoint_path(directory, step):
    """The folder of the checkpoint of `step` in `directory`."""
    return Path(directory) / f"step-{step:08d}"


def save_checkpoint(model, directory, step, keep=2):
    """Write the training state of `model` after `step` optimizer steps, atomically.

    Args:
        model: a compiled Keras model whose optimizer is built.
        directory: the checkpoints' folder (made if missing).
        step: optimizer steps taken so far; names the checkpoint.
        keep: how many of the newest checkpoints to keep; older ones are removed once this one
            is in place.

    Returns:
        `Path` of the new checkpoint folder.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f"{_STAGING_PREFIX}{step:08d}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    variables = _state_variables(model)
    values = [keras.ops.convert_to_numpy(variable.value) for variable in variables]
    np.savez(staging / STATE_FILE, *values)
    fsync_path(staging / STATE_FILE)
    manifest = {
        "format": FORMAT_VERSION,
        "step": int(step),
        "file": {"bytes": (staging / STATE_FILE).stat().st_size, "sha256": sha256_of(staging / STATE_FILE)},
        "variables": [
            {"path": variable.path, "shape": list(value.shape), "dtype": _dtype(variable)}
            for variable, value in zip(variables, values)
        ],
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    fsync_path(staging / MANIFEST_FILE)
    fsync_path(staging)
    final = checkpoint_path(directory, step)
    if final.exists():  # the same step written again (e.g. by a resumed run): replace it
        shutil.rmtree(final)
    os.rename(staging, final)
    fsync_path(directory)
    for old in checkpoint_steps(directory)[keep:]:
        shutil.rmtree(checkpoint_path(directory, old), ignore_errors=True)
    return final


def _verified_manifest(folder):
    """The manifest of the checkpoint in `folder`, after checking the state file against it.

    Raises:
        ValueError: the state file is missing, of the wrong size or checksum, or the manifest is
            unreadable.
    """
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
        written = manifest["file"]
        step = int(manifest["step"])
    except FileNotFoundError:
        raise ValueError(f"{MANIFEST_FILE} is missing") from None
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise ValueError(f"{MANIFEST_FILE} is unreadable ({type(error).__name__}: {error})") from None
    if manifest.get("format") != FORMAT_VERSION:
        raise ValueError(f"unknown checkpoint format {manifest.get('format')!r}")
    if checkpoint_path(folder.parent, step).name != folder.name:
        raise ValueError(f"{MANIFEST_FILE} says step {step}, the folder another")
    path = folder / STATE_FILE
    if not path.is_file():
        raise ValueError(f"{STATE_FILE} is missing")
    if path.stat().st_size != written["bytes"]:
        raise ValueError(f"{STATE_FILE} has {path.stat().st_size} bytes, {written['bytes']} were written")
    if sha256_of(path) != written["sha256"]:
        raise ValueError(f"{STATE_FILE} does not match its checksum")
    return manifest


def _load(model, folder, manifest):
    """Assign the checkpoint's values to the model's variables, after checking they fit."""
    variables = _state_variables(model)
    saved = manifest["variables"]
    if len(saved) != len(variables):
        raise ValueError(f"it holds {len(saved)} variables, this model and optimizer have {len(variables)}")
    for index, (variable, entry) in enumerate(zip(variables, saved)):
        if list(variable.shape) != entry["shape"] or _dtype(variable) != entry["dtype"]:
            raise ValueError(
                f"variable {index} ({entry['path']}) is {entry['dtype']} {entry['shape']}, this model's "
                f"({variable.path}) is {_dtype(variable)} {list(variable.shape)}"
            )
    with np.load(folder / STATE_FILE) as values:
        for index, variable in enumerate(variables):
            variable.assign(values[f"arr_{index}"])


def restore_checkpoint(model, directory, log=print):
    """Load the newest checkpoint in `directory` that is intact into `model`.

    A damaged checkpoint (missing or truncated file, wrong checksum, unreadable manifest, another
    model's state) is reported through `log` and the one before it is tried.

    Args:
        model: the compiled Keras model the checkpoints were written from (same architecture,
            optimizer and dtype policy).
        directory: the checkpoints' folder.
        log: callable taking one line of text.

    Returns:
        The step of the restored checkpoint, or None when `directory` holds no checkpoint.

    Raises:
        CheckpointError: checkpoints exist but none is intact; the message lists why.
    """
    problems = []
    for step in checkpoint_steps(directory):
        folder = checkpoint_path(directory, step)
        try:
            manifest = _verified_manifest(folder)
            _load(model, folder, manifest)
        except (OSError, ValueError, KeyError, TypeError) as error:  # the last two: a malformed manifest
            problems.append(f"{folder.name}: {error}")
            log(f"Skipping the damaged checkpoint {folder}: {error}")
            continue
        return step
    if problems:
        raise CheckpointError(
            f"No intact checkpoint in {directory} ({'; '.join(problems)}). Remove the folder to train from the "
            "start, or start a new --run-dir"
        )
    return None


def remove_staging(directory):
    """Remove staging folders left by a process killed while writing a checkpoint."""
    directory = Path(directory)
    if directory.is_dir():
        for path in directory.iterdir():
            if path.name.startswith(_STAGING_PREFIX):
                shutil.rmtree(path, ignore_errors=True)


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Checkpoints the training state every N steps, every T seconds, and at each epoch's end.

    Steps count on from `step` (the steps already taken when `model.fit` starts), so a resumed run
    names its checkpoints by the run's total steps. Epoch ends are checkpointed before `model.fit`
    ends, so the last checkpoint holds the trained weights, not the moving averages `fit` may swap
    in when it returns.

    Args:
        directory: the checkpoints' folder.
        every_steps: checkpoint every this many steps; 0 = not by steps.
        every_seconds: checkpoint when this many seconds passed since the last one; 0 = not by time.
        keep: how many checkpoints to keep.
        step: optimizer steps taken before this `model.fit` call.
        log: callable taking one line of text, or None for silence.
        clock: callable returning seconds (default `time.monotonic`).
    """

    def __init__(self, directory, every_steps=0, every_seconds=0.0, keep=2, step=0, log=None, clock=time.monotonic):
        super().__init__()
        if every_steps < 0 or every_seconds < 0 or keep < 1:
            raise ValueError(
                "every_steps and every_seconds must be >= 0 and keep >= 1. Received: "
                f"every_steps={every_steps}, every_seconds={every_seconds}, keep={keep}"
            )
        self.directory = Path(directory)
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.keep = keep
        self.step = step
        self.log = log
        self.clock = clock
        self.saved_step = None
        self.seconds_writing = 0.0
        self.checkpoints_written = 0

    def on_train_begin(self, logs=None):
        remove_staging(self.directory)
        self._last_time = self.clock()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = self.step

    def on_train_batch_end(self, batch, logs=None):
        self.step = self._epoch_start + batch + 1  # `batch`: the epoch's last batch index run so far
        due = (self.every_steps and self.step % self.every_steps == 0) or (
            self.every_seconds and self.clock() - self._last_time >= self.every_seconds
        )
        if due:
            self._save()

    def on_epoch_end(self, epoch, logs=None):
        self._save()

    def _save(self):
        if self.step == self.saved_step:
            return
        started = time.perf_counter()
        path = save_checkpoint(self.model, self.directory, self.step, self.keep)
        self.seconds_writing += time.perf_counter() - started
        self._last_time = self.clock()
        self.checkpoints_written += 1
        self.saved_step = self.step
        if self.log:
            self.log(f"Checkpoint {path}")
