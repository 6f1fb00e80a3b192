"""Shared fixtures: one tiny training run, made once per test session and reused read-only."""

import pytest

from keras_transformer import runs
from keras_transformer.config import TrainConfig

TINY_MODEL = {"max_source_len": 24, "max_target_len": 14}


def tiny_train_config(root, **overrides):
    """A `TrainConfig` that trains the tiny preset for a few steps on a small built-in corpus."""
    values = dict(
        preset="tiny",
        train_size=300,
        source_vocab_size=120,
        target_vocab_size=40,
        epochs=2,
        steps_per_epoch=3,
        batch_size=16,
        warmup_steps=10,
        run_dir=str(root / "run"),
        export_dir=str(root / "saved_models"),
        model_name="dates",
    )
    values.update(overrides)
    return TrainConfig(**values).validate()


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """`(train_config, summary)` of a finished tiny run (trained, evaluated, exported)."""
    root = tmp_path_factory.mktemp("trained")
    train_config = tiny_train_config(root)
    summary = runs.train(train_config, dict(TINY_MODEL), log=lambda line: None, verbose=0)
    return train_config, summary
