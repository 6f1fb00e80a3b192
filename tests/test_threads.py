"""Tests of `keras_transformer.training.threads`: one training tower per core on a CPU.

TensorFlow's threads are fixed once it runs an op and hold for the whole process, so
`configure_cpu_threads` setting them is checked in fresh processes (where it sets nothing, here);
`towers` reads the settings, checked here through the environment variables it falls back on.
"""

import json
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from keras_transformer.config import TrainConfig

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow's threads")

REPO = Path(__file__).resolve().parents[1]

# Runs `configure_cpu_threads` first thing in a process that sees CORES cores, then a TensorFlow op.
CONFIGURE_SCRIPT = """
import json, sys
from keras_transformer.training import threads
threads.available_cores = lambda: int(sys.argv[1])
import tensorflow as tf
if sys.argv[2] == "started":
    tf.constant(1.0) + 1.0
towers = threads.configure_cpu_threads()
total = float(tf.reduce_sum(tf.ones([64, 64]) @ tf.ones([64, 64])))
print(json.dumps({"towers": towers, "total": total, "intra": tf.config.threading.get_intra_op_parallelism_threads(),
                  "inter": tf.config.threading.get_inter_op_parallelism_threads(), "settings": threads.settings()}))
"""


def configured(cores, started=False, **environment):
    """What `configure_cpu_threads` did in a fresh process seeing `cores` cores (and TensorFlow started first)."""
    import os

    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    }
    env.update(environment, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    arguments = [sys.executable, "-c", CONFIGURE_SCRIPT, str(cores), "started" if started else "fresh"]
    process = subprocess.run(arguments, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_configure_gives_one_tower_per_core_and_single_threaded_ops():
    result = configured(4)
    settings = {"intra_op": 1, "inter_op": 4, "towers": 4}
    assert result == {"towers": 4, "total": 64.0**3, "intra": 1, "inter": 4, "settings": settings}


def test_configure_leaves_a_started_tensorflow_alone():
    result = configured(2, started=True)  # its threads are fixed once it ran an op
    settings = {"intra_op": 0, "inter_op": 0, "towers": 1}
    assert result == {"towers": 1, "total": 64.0**3, "intra": 0, "inter": 0, "settings": settings}


@pytest.mark.parametrize(
    "cores, environment",
    [
        (1, {}),  # nothing to share out
        (9, {}),  # more cores than measured: TensorFlow's defaults
        (2, {"TF_NUM_INTEROP_THREADS": "3"}),  # the user's settings stand
    ],
)
def test_configure_leaves_tensorflow_alone_where_it_does_not_apply(monkeypatch, cores, environment):
    # In this process: where it does not apply, it returns before setting anything.
    import tensorflow as tf

    from keras_transformer.training import threads

    monkeypatch.setattr(threads, "available_cores", lambda: cores)
    for variable in threads.THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    set_calls = []
    monkeypatch.setattr(tf.config.threading, "set_intra_op_parallelism_threads", set_calls.append)
    monkeypatch.setattr(tf.config.threading, "set_inter_op_parallelism_threads", set_calls.append)
    assert threads.configure_cpu_threads() == 1 and not set_calls


@pytest.mark.parametrize(
    "intra, inter, towers",
    [(None, None, 1), ("2", "2", 1), ("1", None, 2), ("1", "1", 1), ("1", "2", 2), ("1", "8", 2)],
)
def test_towers_one_per_inter_op_thread_where_ops_run_on_one_core(monkeypatch, intra, inter, towers):
    from keras_transformer.training import threads

    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    for variable, value in zip(threads.THREAD_VARIABLES, (intra, inter)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    assert threads.towers() == towers
    assert threads.settings() == {"intra_op": int(intra or 0), "inter_op": int(inter or 0), "towers": towers}
    # A run whose step has no towers: the language models', XLA's.
    for run, split in ((TrainConfig(), True), (TrainConfig(task="lm"), False), (TrainConfig(jit_compile=True), False)):
        assert threads.trains_in_towers(run) == split
        assert threads.settings(run)["towers"] == (towers if split else 1)
