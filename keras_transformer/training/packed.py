"""The Transformer's training step at the real target positions only (TensorFlow).

A translation batch is padded to its longest target, and the loss masks the padding out: the
logits there, the loss over them and both their gradients are work whose result is thrown
away. With targets of `T/2 .. T` tokens that is a quarter of the `[B, T, V]` logits, and at a
small model's size the output projection and the loss over a large vocabulary are about half of
a training step. `train_step` runs the encoder and the decoder's blocks as the model does,
gathers the decoder's states at the real target positions (`[N, D]`, N = the batch's real
target tokens), projects only those to logits `[N, V]` and computes the loss and the metrics
from them; the projection and the loss are differentiated as one (`logits_and_loss`), which
saves passes over `[N, V]` in the backward pass. Where TensorFlow runs each op on one core of a
CPU (`threads.towers`), the batch is split by sentences into one tower per core, each encoded,
decoded and scored on its own; the tape sums their gradients. Everything else is Keras's TensorFlow step:
the loss tracker, loss scaling (`mixed_float16`), `tf.distribute` (each replica packs its own
batch), the optimizer (with weight averaging). The loss, the gradients and the metrics are those
of Keras's step on the full logits, to float rounding (tests/test_packed_training.py).

The model does not import this module, and importing it changes nothing: `attach(model)` gives
one `Transformer` the packed step, and `compile_transformer` attaches it to the model it compiles
(under TensorFlow). A model it is not attached to trains with Keras's step. On a model it is
attached to, `Transformer.train_step` calls `train_step` (looked up on this module at every
trace) when `applies`: TensorFlow without XLA (a packed batch has a shape known only at run
time), batches `((source_ids, target_in_ids), target_out_ids)` without sample weights, and a
model compiled as `compile_transformer` compiles it (the masked label-smoothed loss, whose value
ignores padding, and only metrics that ignore padding), by `compile_transformer` or by a plain
`model.compile` followed by `attach`.
"""

import sys

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.data.special_tokens import PAD_ID
from keras_transformer.models.translation import Transformer, TransformerLayers, decoder_states, encode
from keras_transformer.training import threads
from keras_transformer.training.losses import MaskedLabelSmoothedLoss, smoothed_cross_entropy_forward
from keras_transformer.training.metrics import MaskedAccuracy, TargetTokens

# Metrics whose value at a padding position is nothing, so they may be given the real positions only.
PADDING_BLIND_METRICS = (MaskedAccuracy, TargetTokens)


def attach(model):
    """Give `model` the packed training step: `Transformer.train_step` then takes it where it `applies`.

    The model's `packed_training` becomes this module itself, so its `applies` and `train_step`
    are looked up when a step is traced (a test may replace them). `compile_transformer` calls
    this; a model compiled by a plain `model.compile` trains with Keras's step until it is given
    the packed one here.

    Args:
        model: a `Transformer`; any other model is returned unchanged (its step never asks).

    Returns:
        `model`.
    """
    if isinstance(model, Transformer):
        model.packed_training = sys.modules[__name__]
    return model


def _compiled(model):
    """What `compile` was given, as given (`get_compile_config` would serialize it, which needs eager mode)."""
    return getattr(getattr(model, "_compile_config", None), "config", {})


def applies(model, data):
    """Whether `train_step` gives `model` the same step as Keras's, on `data`.

    Only under the TensorFlow backend (this module is TensorFlow code), without XLA, for the loss
    and metrics and batches the module's docstring names.

    Args:
        model: a compiled `Transformer`.
        data: one batch as `model.fit` passes it to `train_step`.

    Returns:
        bool.
    """
    if keras.backend.backend() != "tensorflow":
        return False
    compiled = _compiled(model)
    if model.jit_compile or not isinstance(compiled.get("loss"), MaskedLabelSmoothedLoss):
        return False
    metrics = compiled.get("metrics") or []
    if compiled.get("weighted_metrics") or compiled.get("loss_weights") is not None:
        return False
    if not isinstance(metrics, (list, tuple)) or not all(isinstance(m, PADDING_BLIND_METRICS) for m in metrics):
        return False
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    return sample_weight is None and y is not None and isinstance(x, (list, tuple)) and len(x) == 2


def _replicas():
    return tf.distribute.get_strategy().num_replicas_in_sync


def logits_and_loss(hidden, kernel, bias, labels, epsilon):
    """The logits of packed decoder states and their label-smoothed loss, differentiated together.

    The loss is `training.losses.smoothed_cross_entropy` of `logits = hidden @ kernel + bias`, but its
    gradient reaches `hidden`, `kernel` and `bias` without the `[N, V]` gradient of the logits.
    That gradient is `a - c * one_hot(y) - d` with `a = softmax * upstream` (one pass over the
    exponentials the forward pass made), `c = (1 - eps) * upstream` and `d = eps / V *
    upstream`, one value per position. The matmuls of the backward pass take `a` alone, and the
    gold and constant terms are added to their results directly: `c` at the gold columns (a
    gather of N kernel columns, a segment sum into N columns of the kernel's gradient) and `d`
    through the kernel's row sums and the states' column sums. That leaves out two passes over
    `[N, V]` and the copy of a scatter, and the mean logit of the loss comes from
    `hidden @ mean(kernel)`, not a pass over the logits.

    Args:
        hidden: float tensor `[N, D]`, the decoder states at the real target positions.
        kernel: float32 `[D, V]`.
        bias: float32 `[V]`, or None for logits without one.
        labels: int `[N]`, the target ids: in [0, V), an id >= V raises; negative ones count from the end.
        epsilon: float label smoothing in [0, 1).

    Returns:
        `(logits, loss)`: float32 `[N, V]`, which carry no gradient (for the metrics), and float32
        `[N]`, the loss of each position.
    """
    made = []  # the forward pass's logits, for the caller
    labels = tf.cast(labels, tf.int32)  # the forward pass's gather raises for an id >= V
    gold_ids = labels % tf.shape(kernel)[1]  # negative ids wrap, as in `smoothed_cross_entropy`

    @tf.custom_gradient
    def loss_of(hidden, kernel, *bias):
        # The kernel transposed once, [V, D]: oneDNN's forward matmul reads it faster that way, and
        # the gold columns become a gather of rows. (Grappler folds the transpose back into the
        # states' gradient's matmul, whose speed is then unchanged.)
        kernel_rows = tf.transpose(kernel)  # (V, D)
        logits = tf.matmul(hidden, kernel_rows, transpose_b=True)  # (N, V)
        kernel_mean = tf.reduce_mean(kernel, axis=1)  # (D,): the mean logit's weights; times V, the row sums
        mean_logit = tf.linalg.matvec(hidden, kernel_mean)  # (N,)
        if bias:
            logits = tf.nn.bias_add(logits, bias[0])
            mean_logit = mean_logit + tf.reduce_mean(bias[0])
        loss, exponentials, total = smoothed_cross_entropy_forward(labels, logits, epsilon, mean_logit)
        made.append(logits)

        def gradient(upstream):
            with tf.name_scope("gradient_tape/logits_and_loss"):  # named as the tape names gradients
                return _loss_gradients(
                    upstream, hidden, kernel_rows, kernel_mean, exponentials, total, gold_ids, epsilon, bool(bias)
                )

        return loss, gradient

    weights = [tf.convert_to_tensor(kernel)] + ([] if bias is None else [tf.convert_to_tensor(bias)])
    loss = loss_of(tf.cast(hidden, tf.float32), *weights)
    return tf.stop_gradient(made[0]), loss


def _loss_gradients(upstream, hidden, kernel_rows, kernel_mean, exponentials, total, gold_ids, epsilon, with_bias):
    """The gradients of `logits_and_loss`'s loss, without the `[N, V]` gradient of the logits.

    The logits' gradient `a - c * one_hot(y) - d` (see `logits_and_loss`) is taken through the
    matmuls term by term: the softmax term `a` through both matmuls, the gold term `c` at the gold
    columns, the constant term `d` through the kernel's row sums and the states' column sums.

    Args:
        upstream: float32 `[N]`, the gradient of each position's loss.
        hidden: float32 `[N, D]`, the decoder states at the real target positions.
        kernel_rows: float32 `[V, D]`, the kernel transposed.
        kernel_mean: float32 `[D]`, the kernel's mean over V.
        exponentials: float32 `[N, V]`, the forward pass's `exp(logits - max)`.
        total: float32 `[N, 1]`, their sums over V.
        gold_ids: int32 `[N]`, the target ids, in [0, V).
        epsilon: float label smoothing in [0, 1).
        with_bias: whether the logits have a bias, whose gradient is then returned too.

    Returns:
        `(d_hidden, d_kernel)`, float32 `[N, D]` and `[D, V]`, and after them `d_bias` `[V]` when
        `with_bias`.
    """
    vocab_size = tf.shape(kernel_rows)[0]
    spread = exponentials * (upstream[:, None] / total)  # (N, V): the softmax term
    gold = upstream * (1.0 - epsilon)  # (N,)
    uniform = upstream * (epsilon / tf.cast(vocab_size, tf.float32))  # (N,)
    gold_columns = tf.gather(kernel_rows, gold_ids)  # (N, D): the kernel's gold columns
    d_hidden = (
        tf.matmul(spread, kernel_rows)
        - gold[:, None] * gold_columns
        - (upstream * epsilon)[:, None] * kernel_mean[None, :]  # uniform * the kernel's row sums
    )
    at_gold = tf.math.unsorted_segment_sum(hidden * gold[:, None], gold_ids, vocab_size)  # (V, D)
    d_kernel = (
        tf.matmul(hidden, spread, transpose_a=True)
        - tf.transpose(at_gold)
        - tf.linalg.matvec(hidden, uniform, transpose_a=True)[:, None]
    )
    if not with_bias:
        return d_hidden, d_kernel
    d_bias = (
        tf.reduce_sum(spread, axis=0)
        - tf.math.unsorted_segment_sum(gold, gold_ids, vocab_size)
        - tf.reduce_sum(uniform)
    )
    return d_hidden, d_kernel, d_bias


def train_step(model, data):
    """One training step on the real target positions: Keras's TensorFlow `train_step`, packed.

    Args:
        model: a compiled `Transformer` for which `applies(model, data)`.
        data: `((source_ids, target_in_ids), target_out_ids)`, int `[B, S]`, `[B, T]`, `[B, T]`.

    Returns:
        The metrics' results, as Keras's step returns them.
    """
    x, labels, _ = keras.utils.unpack_x_y_sample_weight(data)
    source_ids, target_in_ids = (ops.cast(ids, "int32") for ids in x)
    layers = TransformerLayers.from_model(model)
    epsilon = _compiled(model)["loss"].label_smoothing
    towers = []  # (real labels [N_i], logits [N_i, V]) of each tower
    with tf.GradientTape() as tape:
        kernel, bias = layers.logits_weights()
        per_token = []
        # One tower per inter-op thread where ops run single-threaded on a CPU (`threads.towers`),
        # else one: independent chains of ops until the tape sums their gradients.
        for tower_source, tower_target_in, tower_labels in split_rows(
            threads.towers(), source_ids, target_in_ids, labels
        ):
            memory, source_mask = encode(layers, tower_source, training=True)
            states = decoder_states(layers, tower_target_in, memory, source_mask, training=True)  # (B_i, T, D)
            real = tf.not_equal(tower_labels, PAD_ID)  # (B_i, T)
            real_labels = tf.boolean_mask(tower_labels, real)  # (N_i,)
            with tf.name_scope("logits_and_loss"):  # names the ops in a profile
                logits, loss = logits_and_loss(tf.boolean_mask(states, real), kernel, bias, real_labels, epsilon)
            towers.append((real_labels, logits))  # (N_i,), (N_i, V)
            per_token.append(loss)  # (N_i,)
        per_token = tf.concat(per_token, axis=0)  # (N,)
        # What `model.compute_loss` gives for these labels, all real: the mean over the positions
        # (a loss reduced by "sum" is not scaled for the replicas), plus the model's own losses.
        loss = tf.reduce_sum(per_token) / tf.maximum(tf.cast(tf.size(per_token), tf.float32), 1.0)
        loss = tf.add_n([loss] + [tf.reduce_sum(tf.cast(extra, tf.float32)) for extra in model.losses])
        # As Keras's step: the tracker records the loss unscaled by the replicas, per sentence.
        model._loss_tracker.update_state(loss * _replicas(), sample_weight=tf.shape(labels)[0])
        loss = model.optimizer.scale_loss(loss)
    weights = model.trainable_weights
    model.optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
    with tf.name_scope("metrics"):
        for real_labels, logits in towers:  # each tower's positions added to the metrics' counts
            results = model.compute_metrics(x, real_labels[None], logits[None], sample_weight=None)  # (1, N_i[, V])
        return results


def split_rows(count, *tensors):
    """Each of `tensors` (the same number of rows B) in `count` parts along its rows, in order.

    The parts are as equal as can be, the first ones a row larger (a part is empty where B <
    `count`).

    Args:
        count: int >= 1.
        *tensors: tensors `[B, ...]`.

    Returns:
        A list of `count` tuples, one part of each tensor.
    """
    if count == 1:
        return [tensors]
    rows = tf.shape(tensors[0])[0]
    sizes = tf.stack([(rows + count - 1 - i) // count for i in range(count)])  # (count,), summing to B
    return list(zip(*(tf.split(tensor, sizes, num=count) for tensor in tensors)))
