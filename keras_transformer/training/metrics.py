"""Metrics over the real target tokens: masked token accuracy and the count of target tokens.

Both ignore the padding positions (label 0), so `keras_transformer.training.packed` may give them
the real positions alone. `predicted_ids` is the argmax; `argmax_hits` whether it equals the labels,
which the accuracy counts.
"""

import keras
from keras import ops

from keras_transformer.data.special_tokens import PAD_ID


def predicted_ids(logits):
    """The highest-scoring id of each position: int32 `[B, T]` from logits `[B, T, V]`.

    `ops.argmax`, except under TensorFlow, where it is `tf.argmax` itself: Keras's TensorFlow
    `argmax` first moves every -0.0 of the logits just below 0.0 (four more passes over
    `[B, T, V]`, which at the small preset cost more than the argmax). The two differ only when
    the largest logit of a position is a zero that ties with a negative zero.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # TensorFlow only

        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(logits, axis=-1), "int32")


def argmax_hits(logits, labels):
    """Whether each position's argmax is its label: bool `[B, T]` from logits `[B, T, V]` and int labels `[B, T]`.

    Exactly `predicted_ids(logits) == labels`, ties included (the first of tied largest logits is
    the prediction). Under TensorFlow it is that; elsewhere it is computed without an argmax: the
    label's logit is the largest, and no id before the label has that largest logit. XLA runs an
    argmax as a reduction over (value, index) pairs, which on a CPU took 27 ms for 1,536 positions
    of 8,000 logits where this took 5.6 (JAX, 2 cores of a Zen 5).
    """
    labels = ops.cast(labels, "int32")
    if keras.backend.backend() == "tensorflow":
        return ops.equal(predicted_ids(logits), labels)
    best = ops.max(logits, axis=-1, keepdims=True)  # (B, T, 1)
    gold = ops.take_along_axis(logits, labels[..., None], axis=-1)  # (B, T, 1)
    before = ops.arange(ops.shape(logits)[-1], dtype="int32") < labels[..., None]  # (B, T, V)
    tied_before = ops.any(ops.logical_and(ops.equal(logits, best), before), axis=-1)
    return ops.logical_and(ops.greater_equal(gold[..., 0], best[..., 0]), ops.logical_not(tied_before))


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of real target tokens (label != 0) whose argmax prediction is right."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")
        weight = ops.cast(ops.not_equal(labels, PAD_ID), "float32")  # (B, T)
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        hits = ops.cast(argmax_hits(y_pred, labels), "float32")
        self.correct.assign_add(ops.sum(hits * weight))
        self.total.assign_add(ops.sum(weight))

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class TargetTokens(keras.metrics.Metric):
    """Number of real target tokens (label != 0) seen since the metric was reset.

    An epoch's token count, for throughput, exact whether batches are by sentences or by tokens.
    """

    def __init__(self, name="target_tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.count.assign_add(ops.sum(ops.cast(ops.not_equal(ops.cast(y_true, "int32"), PAD_ID), "float32")))

    def result(self):
        # A new tensor, not the variable itself: Keras keeps the training result while the
        # validation pass resets and refills this metric.
        return self.count * 1.0

    def reset_state(self):
        self.count.assign(0.0)
