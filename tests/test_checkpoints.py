"""Checkpoints: the whole training state comes back, damage is detected, writes are atomic."""

import json

import keras
import numpy as np
import pytest
from conftest import tiny_config

from keras_transformer.config import TrainConfig
from keras_transformer.models import build_transformer
from keras_transformer.runs.checkpoints import (
    MANIFEST_FILE,
    STATE_FILE,
    CheckpointError,
    PeriodicCheckpoint,
    checkpoint_path,
    checkpoint_steps,
    restore_checkpoint,
    save_checkpoint,
)
from keras_transformer.training import compile_transformer


def _model(seed):
    """A compiled tiny model (one block a side) with dropout and moving averages, its optimizer built."""
    keras.utils.set_random_seed(seed)
    config = tiny_config(dropout_rate=0.1, num_blocks=1)  # the first `fit` traces it: the smaller, the quicker
    model = compile_transformer(build_transformer(config), config, TrainConfig(ema_momentum=0.9))
    model.optimizer.build(model.trainable_variables)
    return model


def _batches(steps, config=tiny_config()):
    """`(inputs, labels)` arrays of `steps` batches of 4 pairs."""
    rng = np.random.default_rng(0)
    source = rng.integers(1, config.source_vocab_size, (4 * steps, 7))
    target = rng.integers(1, config.target_vocab_size, (4 * steps, 6))
    return (source, target), target


@pytest.fixture(scope="module")
def model():
    """A model to train and checkpoint (shared: each test saves the state it compares)."""
    return _model(seed=1)


@pytest.fixture(scope="module")
def other():
    """A model of the same architecture built from other seeds, to restore into."""
    return _model(seed=2)


def _fit(model, steps, epochs=1, callbacks=()):
    inputs, labels = _batches(steps)
    model.fit(inputs, labels, epochs=epochs, batch_size=4, shuffle=False, verbose=0, callbacks=list(callbacks))


def _state(model):
    """Every variable of the training state, by position: weights, optimizer, seed generators."""
    return [keras.ops.convert_to_numpy(v) for v in [*model.weights, *model.optimizer.variables, *model.variables]]


def test_a_restored_model_trains_on_exactly_as_the_saved_one(tmp_path, model, other):
    trained, restored = model, other  # other initial weights and dropout seeds
    _fit(trained, 3)
    save_checkpoint(trained, tmp_path, step=3)
    assert restore_checkpoint(restored, tmp_path, log=lambda line: None) == 3
    for a, b in zip(_state(restored), _state(trained), strict=True):
        np.testing.assert_array_equal(a, b)

    # The same next steps: same dropout masks, same Adam moments, same schedule step.
    _fit(trained, 2)
    _fit(restored, 2)
    for a, b in zip(_state(restored), _state(trained), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_newest_checkpoints_are_kept_and_staging_folders_are_not_checkpoints(tmp_path, model):
    for step in (2, 4, 6):
        save_checkpoint(model, tmp_path, step, keep=2)
    (tmp_path / ".staging-00000008-123").mkdir()  # what a process killed mid-write leaves
    (tmp_path / ".staging-00000008-123" / STATE_FILE).write_bytes(b"half")
    assert checkpoint_steps(tmp_path) == [6, 4]
    assert sorted(path.name for path in checkpoint_path(tmp_path, 6).iterdir()) == [MANIFEST_FILE, STATE_FILE]
    assert checkpoint_steps(tmp_path / "absent") == []


def _damage_by_truncation(folder):
    state = folder / STATE_FILE
    state.write_bytes(state.read_bytes()[:1000])


def _damage_by_flipping_a_byte(folder):
    state = folder / STATE_FILE
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))


def _damage_the_manifest(folder):
    (folder / MANIFEST_FILE).write_text('{"format": 1, "step": ')


def _lose_the_state_file(folder):
    (folder / STATE_FILE).unlink()


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_damage_by_truncation, "state.npz has 1000 bytes"),
        (_damage_by_flipping_a_byte, "state.npz does not match its checksum"),
        (_damage_the_manifest, "manifest.json is unreadable"),
        (_lose_the_state_file, "state.npz is missing"),
    ],
)
def test_a_damaged_checkpoint_is_reported_and_the_previous_one_restored(tmp_path, damage, reason, model, other):
    save_checkpoint(model, tmp_path, step=2)
    expected = _state(model)
    _fit(model, 1)
    save_checkpoint(model, tmp_path, step=3)
    damage(checkpoint_path(tmp_path, 3))

    lines = []
    assert restore_checkpoint(other, tmp_path, log=lines.append) == 2
    assert len(lines) == 1 and lines[0].startswith(
        f"Skipping the damaged checkpoint {checkpoint_path(tmp_path, 3)}: {reason}"
    )
    for a, b in zip(_state(other), expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_when_every_checkpoint_is_damaged_the_run_stops_with_one_clear_error(tmp_path, model, other):
    for step in (2, 4):
        save_checkpoint(model, tmp_path, step)
        _damage_by_truncation(checkpoint_path(tmp_path, step))
    with pytest.raises(CheckpointError, match=r"No intact checkpoint in .*step-00000004: .*step-00000002: "):
        restore_checkpoint(other, tmp_path, log=lambda line: None)


def test_no_checkpoint_restores_nothing(tmp_path, other):
    assert restore_checkpoint(other, tmp_path / "none", log=lambda line: None) is None


def test_a_checkpoint_of_another_model_is_refused(tmp_path, model):
    save_checkpoint(model, tmp_path, step=1)
    keras.utils.set_random_seed(0)
    config = tiny_config()  # no dropout: no seed generators
    other = compile_transformer(build_transformer(config), config, TrainConfig(ema_momentum=0.9))
    with pytest.raises(CheckpointError, match=r"step-00000001: it holds \d+ variables, this model and optimizer have"):
        restore_checkpoint(other, tmp_path, log=lambda line: None)


def test_the_manifest_records_sizes_and_checksums(tmp_path, model):
    folder = save_checkpoint(model, tmp_path, step=7)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["step"] == 7 and folder.name == "step-00000007"
    assert manifest["file"]["bytes"] == (folder / STATE_FILE).stat().st_size
    assert len(manifest["file"]["sha256"]) == 64
    paths = [entry["path"] for entry in manifest["variables"]]
    assert any("seed_generator_state" in path for path in paths)  # dropout's random state
    assert any(path.endswith("iteration") or "iterations" in path for path in paths)  # the schedule's step


class _Clock(keras.callbacks.Callback):
    """A clock that each training step moves on by `step_seconds` (after the checkpoint callback)."""

    def __init__(self, step_seconds):
        super().__init__()
        self.now, self.step_seconds = 0.0, step_seconds

    def __call__(self):
        return self.now

    def on_train_batch_end(self, batch, logs=None):
        self.now += self.step_seconds


@pytest.mark.parametrize(
    "every_steps, every_seconds, steps, epochs, expected",
    [
        (2, 0, 3, 2, [6, 4, 3, 2]),  # every 2 steps, and each epoch's end (3, 6)
        (0, 0, 3, 2, [6, 3]),  # epoch ends only
        (0, 1.0, 5, 1, [5, 3]),  # every second: a step takes 0.6 s
        (4, 1.0, 5, 1, [5, 4, 3]),  # both: 3 by time, 4 by steps
    ],
)
def test_periodic_checkpoints_by_steps_time_and_epoch(
    tmp_path, model, every_steps, every_seconds, steps, epochs, expected
):
    clock = _Clock(step_seconds=0.6)
    callback = PeriodicCheckpoint(tmp_path, every_steps=every_steps, every_seconds=every_seconds, keep=10, clock=clock)
    _fit(model, steps, epochs, callbacks=[callback, clock])
    assert checkpoint_steps(tmp_path) == expected
    assert callback.checkpoints_written == len(expected)


def test_steps_count_on_from_a_resumed_step(tmp_path, model):
    callback = PeriodicCheckpoint(tmp_path, every_steps=2, step=10)
    _fit(model, 3, callbacks=[callback])
    assert checkpoint_steps(tmp_path) == [13, 12]


def test_bad_periods_are_refused():
    with pytest.raises(ValueError, match="every_steps=-1"):
        PeriodicCheckpoint("x", every_steps=-1)
