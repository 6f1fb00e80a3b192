"""Training on several devices or machines with `tf.distribute`.

A strategy chosen by name (the `--strategy` flag), which process is the chief, throwaway
directories for the other workers, and the adaptations Keras 3's `model.fit` needs under a
strategy.

Under `MultiWorkerMirroredStrategy` every worker runs the same program: the same model, the same
input pipeline (each worker keeps its own slice of every global batch) and the same saving,
evaluation and export calls (as TensorFlow's multi-worker guide advises: saving may run
collective ops, which wait for every worker). Only the chief's files are kept; the other workers
write theirs into temporary directories, removed at the end. The cluster is described by the
`TF_CONFIG` environment variable, e.g. for worker 1 of 2:

    {"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 1}}
"""

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

from keras_transformer.checks import check_choice
from keras_transformer.config import STRATEGIES

_TASK_TYPES = ("chief", "worker", "evaluator", "ps")


def tf_config():
    """The parsed `TF_CONFIG` environment variable, or None when it is unset or empty.

    Raises:
        ValueError: `TF_CONFIG` is not JSON of the form `{"cluster": {TYPE: [ADDRESS, ...]},
            "task": {"type": TYPE, "index": INDEX}}` with the task in the cluster.
    """
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}). Received: TF_CONFIG={text!r}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if (
        not isinstance(cluster, dict)
        or not cluster
        or not all(name in _TASK_TYPES and isinstance(hosts, list) and hosts for name, hosts in cluster.items())
    ):
        raise ValueError(
            'TF_CONFIG needs "cluster": a dict from task type (chief, worker, ...) to a non-empty list of '
            f'"host:port" addresses. Received: TF_CONFIG={text!r}'
        )
    if (
        not isinstance(task, dict)
        or task.get("type") not in cluster
        or not isinstance(task.get("index"), int)
        or not 0 <= task["index"] < len(cluster[task["type"]])
    ):
        raise ValueError(
            'TF_CONFIG needs "task": {"type": TYPE, "index": INDEX} naming one of the cluster\'s tasks. '
            f"Received: TF_CONFIG={text!r}"
        )
    return config


def is_chief():
    """Whether this process writes the run's files.

    The `chief` task of `TF_CONFIG` does, or worker 0 when the cluster has no chief; True without
    `TF_CONFIG` (a single process).

    Raises:
        ValueError: `TF_CONFIG` is malformed (see `tf_config`).
    """
    config = tf_config()
    if config is None:
        return True
    task_type, index = config["task"]["type"], config["task"]["index"]
    if "chief" in config["cluster"]:
        return task_type == "chief"
    return task_type == "worker" and index == 0


def make_strategy(name):
    """The `tf.distribute.Strategy` called `name`.

    The names:

    - "default": `tf.distribute.get_strategy()`, the no-op default strategy (one device);
    - "mirrored": `MirroredStrategy`, one replica per local GPU (the CPU when there is none);
    - "multi_worker": `MultiWorkerMirroredStrategy` over the cluster in `TF_CONFIG`; create it
      before any other TensorFlow work in the process;
    - "tpu": `TPUStrategy` on the TPU found by `TPUClusterResolver` (its `TPU_NAME` or a local
      TPU). Wired as the TensorFlow guide does it, but untested here: no TPU was available.

    Args:
        name: one of `STRATEGIES`.

    Returns:
        The strategy.

    Raises:
        ValueError: unknown `name`; "multi_worker" without a valid `TF_CONFIG`.
    """
    check_choice("strategy", name, STRATEGIES)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if tf_config() is None:
            raise ValueError(
                "--strategy multi_worker needs the TF_CONFIG environment variable describing the cluster, e.g. "
                '{"cluster": {"worker": ["host0:12345", "host1:12345"]}, "task": {"type": "worker", "index": 0}}'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver()  # "tpu"
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def describe(strategy):
    """One line naming the strategy, its replicas and, in a cluster, this worker's task."""
    public_names = (
        (tf.distribute.MultiWorkerMirroredStrategy, "MultiWorkerMirroredStrategy"),
        (tf.distribute.MirroredStrategy, "MirroredStrategy"),
        (tf.distribute.TPUStrategy, "TPUStrategy"),
    )
    name = next((name for kind, name in public_names if isinstance(strategy, kind)), "default strategy")
    text = f"{name}, {strategy.num_replicas_in_sync} replica(s) in sync"
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if task_type is not None:
        tasks = sum(len(hosts) for hosts in resolver.cluster_spec().as_dict().values())
        text += f"; this is {task_type} {resolver.task_id} of {tasks} tasks"
        text += "" if is_chief() else " (not the chief: its files go to throwaway directories)"
    return text


def adapt_keras_fit(model):
    """Make Keras 3.15's `model.fit` and `model.evaluate` right under a strategy with several replicas.

    `model` must have been built and compiled under the strategy's scope. Three gaps:

    1. Keras divides a compiled loss by the number of replicas (so that the sum of the replicas'
       gradients is the gradient of the global mean) only for its mean-like reductions. A loss
       with reduction "sum", like `MaskedLabelSmoothedLoss` (a mean over the batch's real tokens,
       computed by hand), is divided here; else the gradients and the logged loss would be
       `num_replicas` times too large.
    2. Under `MultiWorkerMirroredStrategy` (keras-team/keras#20585, open), Keras averages the
       first batch over the replicas with `strategy.reduce` before its first step, which fails on
       a structured batch ("Attempt to convert a value (PerReplica ...) to a Tensor"). Only the
       batch's structure, shapes and dtypes matter there, so this worker's own values serve.
    3. Also under `MultiWorkerMirroredStrategy`, Keras averages each step's logs over the
       replicas with `strategy.reduce("MEAN", value, axis=0)`, which fails on scalars ("Invalid
       reduction dimension 0 for input with 0 dimensions"); the train and test steps here return
       each value with shape `[1]`, which that reduction then averages as Keras means it to. (The
       metrics themselves are already global: their variables are summed over the replicas.)

    Overrides, on this instance only, the loss's `call`, the model's `train_step` and
    `test_step`, and Keras's private `_maybe_symbolic_build`. Does nothing with one replica.

    Args:
        model: a Keras model built and compiled under its strategy's scope.

    Returns:
        `model`.
    """
    strategy = model.distribute_strategy
    replicas = strategy.num_replicas_in_sync
    if replicas == 1:
        return model
    loss = model.loss
    if getattr(loss, "reduction", None) == "sum":
        loss_call = loss.call
        loss.call = lambda y_true, y_pred: loss_call(y_true, y_pred) / replicas
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return model
    keras_build, keras_train_step, keras_test_step = model._maybe_symbolic_build, model.train_step, model.test_step

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, batches in iterator:  # Keras's epoch iterator: (first step, last step, batches)
                data_batch = tf.nest.map_structure(
                    lambda value: strategy.experimental_local_results(value)[0], next(batches)
                )
                break
        return keras_build(data_batch=data_batch)

    def with_leading_axis(logs):
        return {name: tf.reshape(value, [1]) if value.shape.rank == 0 else value for name, value in logs.items()}

    model._maybe_symbolic_build = maybe_symbolic_build
    model.train_step = lambda data: with_leading_axis(keras_train_step(data))
    model.test_step = lambda data: with_leading_axis(keras_test_step(data))
    return model


def split_batches(dataset, num_replicas):
    """`dataset` of global batches made ready to be split over `num_replicas` replicas.

    Sets the DATA auto-shard policy: under a multi-worker strategy each worker runs the whole
    pipeline and keeps its own slice of every global batch. (The default, AUTO, tries to shard by
    input files first; a pipeline built from in-memory tensors has none.) With several replicas,
    also drops the batches of fewer than `num_replicas` rows, such as the last, partial batches
    of a finite dataset: they would leave a replica with an empty batch, which the model cannot
    take (TensorFlow's `Conv1D`, used by the feed-forward sublayers, rejects zero rows).
    """
    if num_replicas > 1:
        dataset = dataset.filter(lambda inputs, labels: tf.shape(labels)[0] >= num_replicas)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


@contextlib.contextmanager
def worker_directory(path, chief, copy=()):
    """The directory this worker writes `path`'s files into.

    On the chief, `path` itself. On any other worker, a new temporary directory, removed on exit,
    holding a copy of each name in `copy` (files or folders relative to `path`) that exists: the
    chief's saved state, so that a resumed run restores the same state on every worker without
    two workers ever writing the same file.

    Args:
        path: the directory the chief writes into.
        chief: whether this worker is the chief (see `is_chief`).
        copy: names to copy from `path` into the throwaway directory.

    Yields:
        The directory to write into: `path` unchanged on the chief, a `Path` on the others.
    """
    if chief:
        yield path
        return
    scratch = Path(tempfile.mkdtemp(prefix="keras_transformer_worker_"))
    try:
        for name in copy:
            source = Path(path) / name
            if source.is_dir():
                shutil.copytree(source, scratch / name)
            elif source.is_file():
                shutil.copy2(source, scratch / name)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
