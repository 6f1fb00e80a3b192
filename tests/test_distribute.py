"""Tests of `keras_transformer.training.distribute` and of `runs.train` under tf.distribute strategies.

Strategy names and `TF_CONFIG` errors, who is the chief, throwaway directories for the other
workers, a `MirroredStrategy` run on this machine, and a real two-worker
`MultiWorkerMirroredStrategy` run: two processes on loopback, each with its own `TF_CONFIG`.
"""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY_MODEL, tiny_train_config

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.data.parallel_text import load_corpus
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.translation_batches import encode_pairs, make_dataset
from keras_transformer.models import build_transformer
from keras_transformer.runs.checkpoints import checkpoint_steps, restore_checkpoint
from keras_transformer.training import compile_transformer, distribute

REPO = Path(__file__).resolve().parents[1]
WORKER_TIMEOUT_S = 300  # a hang (e.g. a collective waiting for a dead peer) fails the test instead


def two_worker_config(index, ports):
    return {
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
        "task": {"type": "worker", "index": index},
    }


# ---------------------------------------------------------------------------
# TF_CONFIG, chief, strategies
# ---------------------------------------------------------------------------
def test_default_strategy_is_the_no_op_default(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    strategy = distribute.make_strategy("default")
    assert strategy is tf.distribute.get_strategy()
    assert strategy.num_replicas_in_sync == 1


def test_mirrored_strategy_uses_the_local_devices():
    strategy = distribute.make_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == max(1, len(tf.config.list_logical_devices("GPU")))


def test_unknown_strategy_raises_value_error():
    with pytest.raises(ValueError, match=r"`strategy` must be one of .*Received: strategy='parameter_server'"):
        distribute.make_strategy("parameter_server")


@pytest.mark.parametrize("value", [None, "", "  "])
def test_multi_worker_without_tf_config_raises_value_error(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(ValueError, match="multi_worker needs the TF_CONFIG environment variable"):
        distribute.make_strategy("multi_worker")


@pytest.mark.parametrize(
    "value, message",
    [
        ("{not json", "TF_CONFIG is not valid JSON"),
        ("[1, 2]", 'TF_CONFIG needs "cluster"'),
        ('{"task": {"type": "worker", "index": 0}}', 'TF_CONFIG needs "cluster"'),
        ('{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}', 'TF_CONFIG needs "cluster"'),
        ('{"cluster": {"workers": ["a:1"]}, "task": {"type": "worker", "index": 0}}', 'TF_CONFIG needs "cluster"'),
        ('{"cluster": {"worker": ["a:1"]}}', 'TF_CONFIG needs "task"'),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', 'TF_CONFIG needs "task"'),
        ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}}', 'TF_CONFIG needs "task"'),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}}', 'TF_CONFIG needs "task"'),
    ],
)
def test_malformed_tf_config_raises_value_error_naming_it(monkeypatch, value, message):
    monkeypatch.setenv("TF_CONFIG", value)
    for call in (distribute.is_chief, lambda: distribute.make_strategy("multi_worker")):
        with pytest.raises(ValueError, match=message):
            call()


def test_train_reports_a_bad_tf_config_as_a_run_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(runs.RunError, match="TF_CONFIG is not valid JSON"):
        runs.train(tiny_train_config(tmp_path, strategy="multi_worker"), dict(TINY_MODEL), log=lambda line: None)
    assert not (tmp_path / "run").exists()


def test_cli_reports_a_missing_tf_config_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert main(["train", "--strategy", "multi_worker", "--run-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --strategy multi_worker needs the TF_CONFIG environment variable describing the cluster, e.g. "
        '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}'
    ]


@pytest.mark.parametrize(
    "cluster, task, chief",
    [
        ({"worker": ["a:1", "b:1"]}, ("worker", 0), True),
        ({"worker": ["a:1", "b:1"]}, ("worker", 1), False),
        ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, ("chief", 0), True),
        ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, ("worker", 0), False),
        ({"worker": ["a:1"], "evaluator": ["e:1"]}, ("evaluator", 0), False),
    ],
)
def test_is_chief_follows_tf_config(monkeypatch, cluster, task, chief):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}}))
    assert distribute.is_chief() is chief


def test_without_tf_config_the_process_is_the_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribute.is_chief()


def test_split_batches_shards_by_data_and_drops_batches_too_small_to_split():
    dataset = tf.data.Dataset.from_tensor_slices(((np.arange(5),), np.arange(5))).batch(2)  # 2, 2, 1 rows
    one = distribute.split_batches(dataset, 1)
    two = distribute.split_batches(dataset, 2)
    for split in (one, two):
        assert split.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.DATA
    assert [len(labels) for _, labels in one] == [2, 2, 1]
    assert [len(labels) for _, labels in two] == [2, 2]


@pytest.mark.parametrize(
    "flags, message",
    [
        (dict(batch_size=1), "--batch-size 1 is too small for 2 replicas"),
        (dict(batch_tokens=30), "--batch-tokens 30 is too small for 2 replicas: .* use at least 48"),
    ],
)
def test_a_global_batch_smaller_than_the_replicas_is_a_run_error(tmp_path, flags, message):
    model = dict(max_source_len=24, max_target_len=14)
    for index, fits in enumerate([dict(batch_size=2), dict(batch_tokens=48)]):
        runs.prepare_run(tiny_train_config(tmp_path / str(index), **fits), model, replicas=2, log=lambda line: None)
    bad = tiny_train_config(tmp_path / "bad", **flags)
    with pytest.raises(runs.RunError, match=message):
        runs.prepare_run(bad, model, replicas=2, log=lambda line: None)
    assert not Path(bad.run_dir).exists()  # refused before the run directory is made


def test_worker_directory_is_the_real_one_for_the_chief_and_a_removed_copy_for_the_others(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "backup").mkdir(parents=True)
    (run_dir / "backup" / "latest.weights.h5").write_text("state")
    (run_dir / "train_config.json").write_text("{}")

    with distribute.worker_directory(str(run_dir), chief=True, copy=("backup",)) as directory:
        assert directory == str(run_dir)

    with distribute.worker_directory(run_dir, chief=False, copy=("backup", "train_config.json", "absent")) as scratch:
        assert scratch != run_dir and not scratch.is_relative_to(run_dir)
        assert (scratch / "backup" / "latest.weights.h5").read_text() == "state"
        assert (scratch / "train_config.json").read_text() == "{}"
        assert not (scratch / "absent").exists()
        (scratch / "backup" / "latest.weights.h5").write_text("this worker's own state")
    assert not scratch.exists()
    assert (run_dir / "backup" / "latest.weights.h5").read_text() == "state"  # the chief's is untouched


# ---------------------------------------------------------------------------
# Training under a strategy
# ---------------------------------------------------------------------------
class InterruptAfterFirstEpoch(keras.callbacks.Callback):
    """Stops `model.fit` at the end of the first epoch (raises `KeyboardInterrupt`), leaving a run to resume."""

    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


@pytest.mark.slow
def test_a_run_started_on_one_device_resumes_under_mirrored_strategy(tmp_path):
    train_config = tiny_train_config(tmp_path, beam_size=1)
    with pytest.raises(KeyboardInterrupt):
        runs.train(
            train_config,
            dict(TINY_MODEL),
            log=lambda line: None,
            verbose=0,
            extra_callbacks=[InterruptAfterFirstEpoch()],
        )

    lines = []
    mirrored = dataclasses.replace(train_config, strategy="mirrored")
    summary = runs.train(mirrored, resume=True, log=lines.append, verbose=0)
    assert "Strategy: MirroredStrategy, 1 replica(s) in sync" in lines
    assert summary["replicas"] == 1 and summary["train_config"]["strategy"] == "mirrored"
    assert summary["epochs_this_session"] == train_config.epochs - 1
    assert np.isfinite(summary["final_metrics"]["loss"]) and np.isfinite(summary["final_metrics"]["val_loss"])
    model = keras.models.load_model(summary["model_path"])
    assert int(model.optimizer.iterations.numpy()) == train_config.epochs * train_config.steps_per_epoch
    assert Path(summary["export_path"]).is_dir()


def worker_env():
    """Environment of the test's worker processes: quiet, CPU only, the project importable."""
    return {
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
    }


WORKER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import keras
    import numpy as np
    from conftest import TINY_MODEL, tiny_train_config

    from keras_transformer import runs

    root, out, index = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    train_config = tiny_train_config(root, strategy="multi_worker", epochs=2, steps_per_epoch=3, beam_size=1)


    class KeepResults(keras.callbacks.Callback):
        # Keeps every worker's final weights.
        def on_train_end(self, logs=None):
            np.savez(out / f"worker{index}_weights.npz", *self.model.get_weights())


    summary = runs.train(train_config, dict(TINY_MODEL), log=print, verbose=0, extra_callbacks=[KeepResults()])
    (out / f"worker{index}_summary.json").write_text(json.dumps(summary))
    """
)


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def run_workers(root, out, num_workers=2):
    """Start `num_workers` worker processes of one cluster and wait for all of them.

    Kill them all when one fails or the time is up. Returns each worker's output.
    """
    script = root / "worker.py"
    script.write_text(WORKER_SCRIPT)
    ports = free_ports(num_workers)
    workers = []
    for index in range(num_workers):
        temporary = root / f"tmp{index}"
        temporary.mkdir()
        env = {
            **os.environ,
            **worker_env(),
            "TF_CONFIG": json.dumps(two_worker_config(index, ports)),
            "TMPDIR": str(temporary),  # where a worker's throwaway directories go
        }
        log = open(root / f"worker{index}.log", "w")
        process = subprocess.Popen(
            [sys.executable, str(script), str(root), str(out), str(index)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        workers.append((process, log))
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    try:
        while any(process.poll() is None for process, _ in workers):
            failed = any(process.poll() not in (None, 0) for process, _ in workers)
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        for process, log in workers:
            if process.poll() is None:
                process.kill()
            process.wait()
            log.close()
    outputs = [(root / f"worker{index}.log").read_text() for index in range(num_workers)]
    for index, (process, _) in enumerate(workers):
        assert process.returncode == 0, (
            f"worker {index} exited with {process.returncode} (timeout {WORKER_TIMEOUT_S} s):\n"
            + "\n".join(f"--- worker {i} ---\n{output[-4000:]}" for i, output in enumerate(outputs))
        )
    return outputs


def validation_batches(run_dir, replicas):
    """A run's validation batches, as `runs.train` feeds them to `replicas` replicas."""
    train_config = TrainConfig.load(run_dir / runs.TRAIN_CONFIG_FILE)
    model_config = ModelConfig.load(run_dir / runs.MODEL_CONFIG_FILE)
    text = load_corpus(train_config, "validation")
    pairs = encode_pairs(
        text.sources,
        text.targets,
        SubwordTokenizer(str(run_dir / "source_vocab.txt"), normalize_typing=train_config.normalizes_source),
        SubwordTokenizer(str(run_dir / "target_vocab.txt")),
        model_config.max_source_len,
        model_config.max_target_len,
    )
    return distribute.split_batches(make_dataset(pairs, train_config.batch_size), replicas)


def weights(path):
    with np.load(path) as arrays:
        return [arrays[f"arr_{i}"] for i in range(len(arrays.files))]


@pytest.mark.slow
def test_two_workers_train_in_sync_and_only_the_chief_writes(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    outputs = run_workers(tmp_path, out)
    for index, output in enumerate(outputs):
        assert "Strategy: MultiWorkerMirroredStrategy, 2 replica(s) in sync" in output
        assert f"this is worker {index} of 2 tasks" in output
    assert "not the chief" in outputs[1] and "not the chief" not in outputs[0]

    # All-reduced gradients: both workers end with the very same weights ...
    chief_weights, other_weights = weights(out / "worker0_weights.npz"), weights(out / "worker1_weights.npz")
    assert len(chief_weights) == len(other_weights) > 0
    for chief_array, other_array in zip(chief_weights, other_weights):
        np.testing.assert_array_equal(chief_array, other_array)
    # ... and, between them, having seen every validation pair once: the metrics are summed over
    # the replicas, so the count equals the split's (twice it if both workers had read every
    # batch whole). The loss is the mean over real tokens as on one replica (Keras alone would
    # log twice it, see `distribute.adapt_keras_fit`), up to averaging per half batch.
    summaries = [json.loads((out / f"worker{index}_summary.json").read_text()) for index in range(2)]
    train_config = tiny_train_config(tmp_path)
    run_dir, export_dir = Path(train_config.run_dir), Path(train_config.export_dir)
    validation = validation_batches(run_dir, replicas=2)
    model = keras.models.load_model(run_dir / runs.MODEL_FILE)
    expected = model.evaluate(validation, steps=len(list(validation)), verbose=0, return_dict=True)
    for summary in summaries:
        metrics = summary["final_metrics"]
        assert summary["replicas"] == 2 and metrics == summaries[0]["final_metrics"]
        assert metrics["val_target_tokens"] == sum(int(np.sum(labels.numpy() != 0)) for _, labels in validation)
        assert metrics["val_target_tokens"] == expected["target_tokens"]
        assert metrics["val_loss"] == pytest.approx(expected["loss"], rel=0.05)
        assert metrics["val_accuracy"] == pytest.approx(expected["accuracy"], abs=1e-3)
    assert summaries[0]["test"] == summaries[1]["test"]

    # Only the chief wrote the run directory and the export; the other worker's throwaway
    # directories are gone.
    chief_summary = json.loads((run_dir / runs.SUMMARY_FILE).read_text())
    assert chief_summary["run_dir"] == str(run_dir) and chief_summary["replicas"] == 2
    assert sorted(path.name for path in (export_dir / "dates").iterdir()) == ["1"]
    assert len(list((run_dir / "logs" / "train").iterdir())) == 1  # one TensorBoard writer
    final_step = train_config.epochs * train_config.steps_per_epoch
    assert checkpoint_steps(run_dir / runs.CHECKPOINT_DIR)[0] == final_step  # kept for --resume --epochs N
    assert list((tmp_path / "tmp1").iterdir()) == []

    # The chief's saved model and its last checkpoint restore the trained weights.
    for restored, trained in zip(model.get_weights(), chief_weights, strict=True):
        np.testing.assert_array_equal(restored, trained)
    model_config = ModelConfig.load(run_dir / runs.MODEL_CONFIG_FILE)
    fresh = compile_transformer(
        build_transformer(model_config), model_config, TrainConfig.load(run_dir / "train_config.json")
    )
    assert restore_checkpoint(fresh, run_dir / runs.CHECKPOINT_DIR) == final_step
    for restored, trained in zip(fresh.get_weights(), chief_weights, strict=True):
        np.testing.assert_array_equal(restored, trained)
    assert int(fresh.optimizer.iterations.numpy()) == final_step
