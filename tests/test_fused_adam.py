"""`AveragingAdam`'s Adam update under TensorFlow: one fused kernel per weight, Keras's formula.

Checked against a NumPy Adam and against `keras.optimizers.Adam` itself, step after step, for
dense and sparse (embedding) gradients, eagerly, in a graph and under XLA; weights it does not
fuse (AMSGrad, float16 weights) are left to Keras's update.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.training import AveragingAdam, fused_adam

SHAPES = [(5, 3), (3,)]
STEPS = 4
SETTINGS = dict(learning_rate=0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-7)


def numpy_adam(weights, gradients, learning_rate, beta_1, beta_2, epsilon):
    """The weights after Adam's steps with `gradients[t][i]`, as Keras and the paper write it."""
    weights = [w.astype("float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, step_gradients in enumerate(gradients, start=1):
        alpha = learning_rate * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)
        for i, g in enumerate(step_gradients):
            m[i] += (g - m[i]) * (1 - beta_1)
            v[i] += (g * g - v[i]) * (1 - beta_2)
            weights[i] -= alpha * m[i] / (np.sqrt(v[i]) + epsilon)
    return weights


def start_and_gradients(seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    weights = [rng.normal(size=shape).astype(dtype) for shape in SHAPES]
    gradients = [[rng.normal(size=shape).astype(dtype) for shape in SHAPES] for _ in range(STEPS)]
    return weights, gradients


def trained(optimizer, weights, gradients, mode="eager", sparse_rows=None):
    """`weights` after `optimizer` applied `gradients` one step at a time, run as `mode`.

    With `sparse_rows`, the first weight's gradients come as `tf.IndexedSlices` of those rows
    (the others' rows are zero), as an embedding table's do.
    """
    variables = [keras.Variable(w) for w in weights]
    optimizer.build(variables)

    def step(step_gradients):
        if sparse_rows is not None:
            rows = tf.constant(sparse_rows)
            dense = step_gradients[0]
            step_gradients = [tf.IndexedSlices(tf.gather(dense, rows), rows, tf.shape(dense)), *step_gradients[1:]]
        optimizer.apply(step_gradients, variables)

    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    for step_gradients in gradients:
        step([tf.constant(g) for g in step_gradients])
    return [v.numpy() for v in variables]


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_fused_update_is_adams_formula_and_keras_adams_result(mode, monkeypatch):
    weights, gradients = start_and_gradients()
    applied = []
    apply_adam = fused_adam.apply_adam
    monkeypatch.setattr(fused_adam, "apply_adam", lambda *args: applied.append(1) or apply_adam(*args))

    fused = trained(AveragingAdam(**SETTINGS), weights, gradients, mode)
    assert applied, "the fused kernel did not run"
    for got, want in zip(fused, numpy_adam(weights, gradients, **SETTINGS), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(fused, trained(keras.optimizers.Adam(**SETTINGS), weights, gradients, mode), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_sparse_gradients_update_as_their_dense_form():
    weights, gradients = start_and_gradients(seed=1)
    rows = [0, 3, 3]  # a repeated row: its slices add up, as an embedding's gradient does
    dense = [[np.zeros_like(g[0]), g[1]] for g in gradients]
    for step_gradients, dense_gradients in zip(gradients, dense):
        np.add.at(dense_gradients[0], rows, step_gradients[0][rows])

    fused = trained(AveragingAdam(**SETTINGS), weights, gradients, "graph", sparse_rows=rows)
    for got, want in zip(fused, numpy_adam(weights, dense, **SETTINGS), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["amsgrad", "float16"])
def test_weights_it_does_not_fuse_get_keras_adams_update(kind, monkeypatch):
    dtype = "float16" if kind == "float16" else "float32"
    weights, gradients = start_and_gradients(seed=2, dtype=dtype)
    settings = {**SETTINGS, "amsgrad": kind == "amsgrad"}
    monkeypatch.setattr(fused_adam, "apply_adam", lambda *args: pytest.fail("fused a weight it should not"))
    got = trained(AveragingAdam(**settings), weights, gradients, "graph")
    want = trained(keras.optimizers.Adam(**settings), weights, gradients, "graph")
    for got_weight, want_weight in zip(got, want, strict=True):
        np.testing.assert_array_equal(got_weight, want_weight)
