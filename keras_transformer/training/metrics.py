"""Metrics over the real target tokens: masked token accuracy and the count of target tokens.

Both ignore the padding positions (label 0), so `keras_transformer.training.packed` may give them
the real positions alone. `predicted_ids` is the argmax both the accuracy and its tests use.
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
        hits = ops.cast(ops.equal(predicted_ids(y_pred), labels), "float32")
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
