"""Adam's update of one weight as one TensorFlow kernel (TensorFlow only).

Keras's `Adam.update_step` is written with `keras.ops`: under TensorFlow that is about 40 graph
ops per weight (the bias corrections, the two moment updates, the step), each reading and
writing whole `[rows, columns]` tensors. `apply_adam` does the same update with TensorFlow's
`ResourceApplyAdam`, which reads the weight, its gradient and both moments once and writes them
once:

    alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
    m    += (g - m) * (1 - beta_1)
    v    += (g^2 - v) * (1 - beta_2)
    w    -= alpha * m / (sqrt(v) + epsilon)

at step `t` (the optimizer's iterations + 1): Keras's formula, term for term. The step's scalars
(the learning rate, `beta_1^t`, `beta_2^t`) are made once per update, not once per weight
(`shared_step_scalars`). A training step then has about 34 fewer graph ops per weight to trace;
what shrinks is the tracing (the first step of a run), the update's run time being a small share
of a step. tests/test_fused_adam.py checks the weights against a NumPy Adam and against Keras's.

`keras_transformer.training.optimizers.AveragingAdam.update_step` calls it under TensorFlow for
float32 weights without AMSGrad; elsewhere it runs Keras's update.
"""

import contextlib

import keras
import tensorflow as tf


def _handle(variable):
    """The resource handle of a Keras or TensorFlow variable (a replica's own inside an update)."""
    return (variable.value if isinstance(variable, keras.Variable) else variable).handle


def applies(optimizer, variable):
    """Whether `apply_adam` updates `variable` as Keras's `Adam.update_step` would."""
    return not optimizer.amsgrad and variable.dtype == "float32"


def step_scalars(optimizer, learning_rate):
    """The scalars of this step's update, the same for every weight: `ResourceApplyAdam` arguments."""
    step = tf.cast(optimizer.iterations + 1, tf.float32)
    beta_1 = tf.cast(optimizer.beta_1, tf.float32)
    beta_2 = tf.cast(optimizer.beta_2, tf.float32)
    return {
        "beta1_power": tf.pow(beta_1, step),
        "beta2_power": tf.pow(beta_2, step),
        "lr": tf.cast(learning_rate, tf.float32),
        "beta1": beta_1,
        "beta2": beta_2,
        "epsilon": tf.cast(optimizer.epsilon, tf.float32),
    }


@contextlib.contextmanager
def shared_step_scalars(optimizer, learning_rate):
    """Inside, `apply_adam` reuses one `step_scalars` for every weight of the update (in its graph).

    About ten graph ops per weight fewer to trace. Wraps the optimizer's update of all its
    weights (`_backend_update_step`); under `tf.distribute` every replica computes the same values.
    """
    optimizer._fused_adam_scalars = (tf.compat.v1.get_default_graph(), step_scalars(optimizer, learning_rate))
    try:
        yield
    finally:
        optimizer._fused_adam_scalars = None


def apply_adam(optimizer, gradient, variable, learning_rate):
    """One Adam step of `variable` in place, with the moments `optimizer` keeps for it.

    Args:
        optimizer: the `keras.optimizers.Adam` that owns the moments (built).
        gradient: the gradient of `variable` (a dense tensor or `tf.IndexedSlices`).
        variable: the float32 weight, a Keras variable or the `tf.Variable` Keras passes.
        learning_rate: this step's learning rate (a scalar).
    """
    index = optimizer._get_variable_index(variable)
    m, v = optimizer._momentums[index], optimizer._velocities[index]
    graph, scalars = getattr(optimizer, "_fused_adam_scalars", None) or (None, None)
    if graph is not tf.compat.v1.get_default_graph():  # outside `shared_step_scalars`, or in another graph
        scalars = step_scalars(optimizer, learning_rate)
    tf.raw_ops.ResourceApplyAdam(
        var=_handle(variable),
        m=_handle(m),
        v=_handle(v),
        grad=tf.convert_to_tensor(tf.cast(gradient, tf.float32)),  # sparse (an embedding's) made dense
        **scalars,
    )
