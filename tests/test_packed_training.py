"""Tests of `keras_transformer.training.packed`: the training step at real target positions only.

It must train exactly as Keras's own step does (the same losses, metrics and weights, step
after step, to float rounding), in every precision, with dropout, weight averaging and
padding; and it must leave the model to Keras's step where it would not be the same.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import V_S, V_T, ids, pad, tiny_config, to_numpy

from keras_transformer.config import TrainConfig
from keras_transformer.models import Transformer, build_transformer
from keras_transformer.training import (
    MaskedAccuracy,
    MaskedLabelSmoothedLoss,
    TargetTokens,
    compile_transformer,
    dtype_policy,
    packed,
    threads,
)

# Batches of 4, 4 and 3 sentences (Keras's loss tracker averages over sentences); one target is empty.
SOURCE_LENGTHS = [(3, 9, 5, 1), (7, 2, 9, 4), (9, 6, 3)]
TARGET_LENGTHS = [(2, 8, 5, 1), (6, 3, 8, 2), (0, 7, 4)]
STEPS = len(SOURCE_LENGTHS)


def batches(extra_padding=0):
    """`STEPS` batches `((source_ids, target_in_ids), target_out_ids)`, padded."""
    rng = np.random.default_rng(0)
    made = []
    for source_lengths, target_lengths in zip(SOURCE_LENGTHS, TARGET_LENGTHS):
        source = pad(ids(source_lengths, 9, V_S, rng), extra_padding)
        target_in = pad(ids(target_lengths, 8, V_T, rng, start=True), extra_padding)
        target_out = pad(ids(target_lengths, 8, V_T, rng), extra_padding)
        made.append(((source, target_in), target_out))
    return made


def fitted(pack, precision="float32", data=None, dropout_rate=0.1, ema_momentum=0.0, embedding_sharing="none"):
    """A seeded tiny model, one block a side, compiled and fitted one step per batch of `data`.

    One block, as the step's packing does not depend on the depth, and `fit` traces the model:
    the smaller, the quicker.

    Compiled with `compile_transformer`'s loss and metrics, and plain gradient descent (with
    weight averaging at `ema_momentum`): its steps are the gradients scaled, so weights that
    agree mean gradients that agree (Adam's would turn rounding noise in a gradient that is
    zero in exact arithmetic, as the key projection's bias's is, into full-size steps).

    Returns:
        `(model, history)`.
    """
    keras.utils.set_random_seed(0)
    with dtype_policy(precision):
        # One table for both sides holds both vocabularies' ids.
        sizes = {"source_vocab_size": V_S, "target_vocab_size": V_S} if embedding_sharing == "all" else {}
        model = build_transformer(
            tiny_config(num_blocks=1, dropout_rate=dropout_rate, embedding_sharing=embedding_sharing, **sizes)
        )
    optimizer = keras.optimizers.SGD(0.5, use_ema=ema_momentum > 0, ema_momentum=ema_momentum or 0.99)
    model.compile(optimizer, MaskedLabelSmoothedLoss(0.1), metrics=[MaskedAccuracy(), TargetTokens()])
    optimizer.build(model.trainable_variables)  # as compile_transformer does: left to fit, the step is traced twice
    packed.attach(model)  # as compile_transformer does: a plain compile leaves the model Keras's step
    model.pack_targets = pack
    data = batches() if data is None else data

    def stream():
        yield from data

    history = model.fit(stream(), epochs=1, steps_per_epoch=len(data), shuffle=False, verbose=0)
    return model, history.history


@pytest.fixture
def packed_steps(monkeypatch):
    """The number of times `packed.train_step` is traced or run."""
    calls = []
    step = packed.train_step

    def counted(model, data):
        calls.append(1)
        return step(model, data)

    monkeypatch.setattr(packed, "train_step", counted)
    return calls


@pytest.mark.parametrize(
    "precision, settings",
    [
        ("float32", {}),
        # Shared tables ride along with other settings: each case fits two models, a suite's worth of time.
        ("float32", {"ema_momentum": 0.5, "embedding_sharing": "decoder"}),
        ("mixed_bfloat16", {"embedding_sharing": "all"}),
        ("mixed_float16", {}),
    ],
)
def test_packed_step_trains_as_keras_step(packed_steps, precision, settings):  # mixed_float16: loss scaling
    keras_model, keras_history = fitted(False, precision, **settings)
    assert not packed_steps
    model, history = fitted(True, precision, **settings)
    assert packed_steps, "the packed step did not run"
    # Same loss, accuracy and token count; same weights (the moving averages where kept) after every step.
    for name in ("loss", "accuracy", "target_tokens"):
        np.testing.assert_allclose(history[name], keras_history[name], rtol=1e-5)
    assert history["target_tokens"] == [float(sum(map(sum, TARGET_LENGTHS)))]
    tolerance = 1e-5 if precision == "float32" else 2e-3
    for got, want in zip(model.weights, keras_model.weights):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=tolerance, atol=tolerance, err_msg=got.path)


@pytest.fixture(scope="module")
def keras_step_without_dropout():
    """`(weights as arrays, history)` of Keras's step without dropout, the reference of every tower count."""
    keras_model, keras_history = fitted(False, dropout_rate=0.0)
    return [to_numpy(weight) for weight in keras_model.weights], keras_history


@pytest.mark.parametrize("towers", [2, 5])  # 5: batches of 4 and 3 sentences leave towers empty
def test_packed_step_in_towers_trains_as_keras_step(packed_steps, monkeypatch, towers, keras_step_without_dropout):
    # Without dropout: each tower draws its own masks.
    keras_weights, keras_history = keras_step_without_dropout
    split = []
    monkeypatch.setattr(threads, "towers", lambda: split.append(towers) or towers)
    model, history = fitted(True, dropout_rate=0.0)
    assert packed_steps and split, "the packed step did not split its batches"
    for name in ("loss", "accuracy", "target_tokens"):
        np.testing.assert_allclose(history[name], keras_history[name], rtol=1e-5)
    for got, want in zip(model.weights, keras_weights, strict=True):
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-5, atol=1e-5, err_msg=got.path)


def test_towers_draw_their_own_dropout_masks(monkeypatch):
    # Two towers of the same sentences: with dropout, their losses differ (the masks do).
    model = build_transformer(tiny_config(dropout_rate=0.1))
    model.compile(
        "sgd", MaskedLabelSmoothedLoss(), metrics=[MaskedAccuracy()], run_eagerly=True
    )  # the step runs as Python
    packed.attach(model)
    losses = []
    project = packed.logits_and_loss
    monkeypatch.setattr(threads, "towers", lambda: 2)
    monkeypatch.setattr(packed, "logits_and_loss", lambda *args: (made := project(*args), losses.append(made[1]))[0])
    (source, target_in), target_out = batches()[0]
    x = (np.concatenate([source, source]), np.concatenate([target_in, target_in]))
    model.fit(x, np.concatenate([target_out, target_out]), batch_size=8, epochs=1, shuffle=False, verbose=0)
    first, second = (to_numpy(loss) for loss in losses)
    assert first.shape == second.shape == (sum(TARGET_LENGTHS[0]),) and not np.allclose(first, second)


def test_split_rows_splits_in_order_as_evenly_as_can_be():
    import tensorflow as tf

    rows = tf.reshape(tf.range(10), (5, 2))
    parts = packed.split_rows(3, rows, rows[:, :1])
    assert [to_numpy(part[0]).tolist() for part in parts] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9]]]
    assert [to_numpy(part[1]).ravel().tolist() for part in parts] == [[0, 2], [4, 6], [8]]
    assert [tuple(to_numpy(part[0]).shape) for part in packed.split_rows(3, rows[:1])] == [(1, 2), (0, 2), (0, 2)]
    assert packed.split_rows(1, rows)[0][0] is rows


def test_packed_step_is_blind_to_extra_padding(packed_steps):
    # Without dropout: its random masks are drawn over the padded shape.
    _, history = fitted(True, dropout_rate=0.0)
    _, padded_history = fitted(True, data=batches(extra_padding=3), dropout_rate=0.0)
    assert len(packed_steps) == 2
    for name in ("loss", "accuracy", "target_tokens"):
        np.testing.assert_allclose(padded_history[name], history[name], rtol=1e-5)


def test_packed_step_projects_only_the_real_target_positions(packed_steps, monkeypatch):
    model_config = tiny_config()
    model = build_transformer(model_config)
    metrics = [MaskedAccuracy(), TargetTokens()]
    model.compile("sgd", MaskedLabelSmoothedLoss(), metrics=metrics, run_eagerly=True)  # the step runs as Python
    packed.attach(model)
    projected = []
    project = packed.logits_and_loss
    monkeypatch.setattr(
        packed,
        "logits_and_loss",
        lambda states, *args: projected.append(tuple(states.shape)) or project(states, *args),
    )
    (x, y) = batches()[0]
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert packed_steps and projected == [(sum(TARGET_LENGTHS[0]), model_config.d_model)]


@pytest.mark.parametrize("with_bias", [True, False])
def test_logits_and_loss_give_the_smoothed_loss_and_its_gradients(with_bias):
    """Against automatic differentiation of the plain formula over the logits (labels repeat)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    n, d, v, epsilon = 7, 5, 11, 0.1
    hidden = tf.constant(rng.normal(size=(n, d)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(d, v)).astype("float32"))
    bias = tf.Variable(rng.normal(size=v).astype("float32")) if with_bias else None
    labels = tf.constant([3, 3, 0, 10, 5, 3, -1], tf.int64)  # -1 is id 10, as in the model's loss
    upstream = tf.constant(rng.normal(size=n).astype("float32"))
    weights = [hidden, kernel] + ([bias] if with_bias else [])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(hidden)
        logits, loss = packed.logits_and_loss(hidden, kernel, bias, labels, epsilon)
        plain = tf.matmul(hidden, kernel) + (bias if with_bias else 0.0)
        log_p = tf.nn.log_softmax(plain)
        targets = (1 - epsilon) * tf.one_hot(labels % v, v) + epsilon / v
        expected = -tf.reduce_sum(targets * log_p, axis=-1)
        fused_total, plain_total = tf.reduce_sum(loss * upstream), tf.reduce_sum(expected * upstream)
    np.testing.assert_allclose(logits.numpy(), plain.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    for got, want in zip(tape.gradient(fused_total, weights), tape.gradient(plain_total, weights)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_logits_and_loss_refuse_a_label_outside_the_vocabulary():
    import tensorflow as tf

    hidden, kernel = tf.ones([2, 3]), tf.ones([3, 5])
    with pytest.raises(tf.errors.InvalidArgumentError):
        packed.logits_and_loss(hidden, kernel, None, tf.constant([1, 5]), 0.1)


def compiled_tiny(**compile_arguments):
    """A tiny model, one block a side, compiled by `compile_transformer` (then by `compile_arguments`)."""
    model_config = tiny_config(num_blocks=1)
    model = compile_transformer(build_transformer(model_config), model_config, TrainConfig())
    if compile_arguments:
        model.compile(**{"optimizer": "adam", "loss": MaskedLabelSmoothedLoss(), **compile_arguments})
    return model


def test_packing_applies_to_the_model_as_compile_transformer_compiles_it():
    (x, y) = batches()[0]
    assert packed.applies(compiled_tiny(), (x, y))
    assert packed.applies(compiled_tiny(metrics=[]), (x, y))


@pytest.mark.parametrize(
    "compile_arguments, sample_weight",
    [
        ({"jit_compile": True}, False),  # XLA: a packed batch's shape is known only at run time
        ({"metrics": ["sparse_categorical_accuracy"]}, False),  # it would count padding positions
        ({"weighted_metrics": ["sparse_categorical_accuracy"]}, False),
        ({"loss": "sparse_categorical_crossentropy"}, False),  # its value includes padding positions
        ({}, True),  # sample weights are given per position
    ],
)
def test_packing_does_not_apply_where_it_would_change_the_step(compile_arguments, sample_weight):
    model = compiled_tiny(**compile_arguments)
    (x, y) = batches()[0]
    assert not packed.applies(model, (x, y, np.ones(y.shape, "float32")) if sample_weight else (x, y))


def test_keras_step_trains_where_packing_does_not_apply(packed_steps):
    model = compiled_tiny()
    (x, y) = batches()[0]
    model.fit(x, y, sample_weight=np.ones(y.shape, "float32"), epochs=1, verbose=0)
    assert not packed_steps


def test_compile_transformer_attaches_the_packed_step_and_a_plain_compile_does_not(packed_steps):
    assert Transformer.packed_training is None  # no import sets it on the class
    assert compiled_tiny().packed_training is packed
    plain = build_transformer(tiny_config(num_blocks=1))
    plain.compile("sgd", MaskedLabelSmoothedLoss(), metrics=[MaskedAccuracy(), TargetTokens()])
    assert plain.packed_training is None
    (x, y) = batches()[0]
    plain.fit(x, y, batch_size=4, epochs=1, verbose=0)  # Keras's step: it was never given the packed one
    assert not packed_steps
    other = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert packed.attach(other) is other and not hasattr(other, "packed_training")  # only a Transformer's


# In a fresh process that never imports `training.packed`, a Transformer trains with Keras's step;
# one compiled by `compile_transformer` (which imports it itself) trains with the packed step.
FRESH_PROCESS_SCRIPT = """
import sys
import keras
import numpy as np
from keras_transformer.models import Transformer, build_transformer
assert not any(name.startswith("keras_transformer.training") for name in sys.modules), "models imported training"
from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.training import MaskedAccuracy, MaskedLabelSmoothedLoss, TargetTokens, compile_transformer
assert "keras_transformer.training.packed" not in sys.modules, "importing training imported packed"

steps = []
keras_step = keras.Model.train_step
keras.Model.train_step = lambda self, data: steps.append("keras") or keras_step(self, data)
config = ModelConfig(source_vocab_size=20, target_vocab_size=20, d_model=8, num_heads=2, d_ff=16, num_blocks=1,
                     dropout_rate=0.0, max_source_len=12, max_target_len=12).validate()
rng = np.random.default_rng(0)
x = (rng.integers(1, 20, (4, 6)).astype("int32"), rng.integers(1, 20, (4, 5)).astype("int32"))
y = rng.integers(1, 20, (4, 5)).astype("int32")

model = build_transformer(config)
model.compile("sgd", MaskedLabelSmoothedLoss(), metrics=[MaskedAccuracy(), TargetTokens()])
model.fit(x, y, batch_size=4, epochs=1, verbose=0)
assert model.packed_training is None and steps and set(steps) == {"keras"}, steps
assert "keras_transformer.training.packed" not in sys.modules, "fit imported packed"

model = compile_transformer(build_transformer(config), config, TrainConfig())
packed = sys.modules["keras_transformer.training.packed"]
assert model.packed_training is packed and Transformer.packed_training is None
packed_step = packed.train_step
packed.train_step = lambda model, data: steps.append("packed") or packed_step(model, data)
del steps[:]
model.fit(x, y, batch_size=4, epochs=1, verbose=0)
assert steps and set(steps) == {"packed"}, steps
print("OK")
"""


def test_a_fresh_process_trains_with_keras_step_unless_compile_transformer_attaches_the_packed_one():
    root = Path(__file__).resolve().parents[1]
    process = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_SCRIPT], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 0, process.stderr[-4000:]
    assert process.stdout.strip().splitlines()[-1] == "OK"


# Two replicas on two logical CPUs of one process: each packs its own half of the batch. Run in a
# process of its own, as the devices must be set before TensorFlow starts.
TWO_REPLICAS_SCRIPT = """
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np
import test_packed_training as t
from keras_transformer.training import packed

calls = []
step = packed.train_step
packed.train_step = lambda model, data: calls.append(1) or step(model, data)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
results = {}
for pack in (True, False):
    with strategy.scope():
        model, history = t.fitted(pack, data=t.batches())
    results[pack] = (history, [w.numpy() for w in model.weights])
    results[str(pack) + "_calls"] = len(calls)
difference = max(float(np.abs(a - b).max()) for a, b in zip(results[True][1], results[False][1]))
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "packed": results[True][0],
                  "keras": results[False][0], "calls": results["True_calls"], "weights": difference}))
"""


def test_packed_step_trains_as_keras_step_on_two_replicas(tmp_path):
    tests = str(Path(__file__).resolve().parent)
    script = tmp_path / "two_replicas.py"
    script.write_text(TWO_REPLICAS_SCRIPT)
    root = str(Path(__file__).resolve().parents[1])
    # The tests, then the repository's own package, on the script's import path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, root])}
    process = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-4000:]
    results = json.loads(process.stdout.strip().splitlines()[-1])
    assert results["replicas"] == 2 and results["calls"] > 0
    for name in ("loss", "accuracy", "target_tokens"):
        np.testing.assert_allclose(results["packed"][name], results["keras"][name], rtol=1e-5)
    assert results["weights"] < 1e-5
