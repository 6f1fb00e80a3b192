"""The Transformer's training step at the real target positions only (TensorFlow).

A translation batch is padded to its longest target, and the loss masks the padding out: the
logits there, the loss over them and both their gradients are work whose result is thrown
away. With targets of `T/2 .. T` tokens that is a quarter of the `[B, T, V]` logits, and at a
small model's size the output projection and the loss over a large vocabulary are about half of
a training step. `train_step` runs the encoder and the decoder's blocks as the model does,
gathers the decoder's states at the real target positions (`[N, D]`, N = the batch's real
target tokens), projects only those to logits `[N, V]` and computes the loss and the metrics
from them. Everything else is Keras's TensorFlow step: the loss tracker, loss scaling
(`mixed_float16`), `tf.distribute` (each replica packs its own batch), the optimizer (with
weight averaging). The loss, the gradients and the metrics are those of Keras's step on the full
logits, to float rounding (tests/test_packed_training.py).

`Transformer.train_step` calls it when `applies`: TensorFlow without XLA (a packed batch has a
shape known only at run time), batches `((source_ids, target_in_ids), target_out_ids)` without
sample weights, and a model compiled as `training.compile_transformer` compiles it (the masked
label-smoothed loss, whose value ignores padding, and only metrics that ignore padding).
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.models.translation import TransformerLayers, decoder_states, encode
from keras_transformer.special_tokens import PAD_ID
from keras_transformer.training import MaskedAccuracy, MaskedLabelSmoothedLoss, TargetTokens

# Metrics whose value at a padding position is nothing, so they may be given the real positions only.
PADDING_BLIND_METRICS = (MaskedAccuracy, TargetTokens)


def applies(model, data):
    """Whether `train_step` gives `model` the same step as Keras's, on `data`.

    Args:
        model: a compiled `Transformer`.
        data: one batch as `model.fit` passes it to `train_step`.

    Returns:
        bool.
    """
    # What `compile` was given, as given (`get_compile_config` would serialize it, which needs eager mode).
    compiled = getattr(getattr(model, "_compile_config", None), "config", {})
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
    real = tf.not_equal(labels, PAD_ID)  # (B, T)
    packed_labels = tf.expand_dims(tf.boolean_mask(labels, real), 0)  # (1, N)
    with tf.GradientTape() as tape:
        memory, source_mask = encode(layers, source_ids, training=True)
        states = decoder_states(layers, target_in_ids, memory, source_mask, training=True)  # (B, T, D)
        # `expand_dims`, not `[None]`: the gradient of a strided slice is a copy of all [N, V] of it.
        logits = tf.expand_dims(layers.logits(tf.boolean_mask(states, real)), 0)  # (1, N, V) float32
        loss = model.compute_loss(x=x, y=packed_labels, y_pred=logits, training=True)
        # As Keras's step: the tracker records the loss unscaled by the replicas, per sentence.
        model._loss_tracker.update_state(loss * _replicas(), sample_weight=tf.shape(labels)[0])
        loss = model.optimizer.scale_loss(loss)
    weights = model.trainable_weights
    model.optimizer.apply_gradients(zip(tape.gradient(loss, weights), weights))
    return model.compute_metrics(x, packed_labels, logits, sample_weight=None)
