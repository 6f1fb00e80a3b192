"""Dropout from 16 random bits per element (TensorFlow only).

Keras's TensorFlow dropout draws one 32-bit Philox number per element, turns it into a float in
[0, 1) and keeps the element where it is `>= rate`; it then multiplies by `1 / (1 - rate)` and
selects, and its gradient selects and multiplies again. In a small Transformer's training step
these passes are one of the largest costs after the matmuls (the attention weights and the
feed-forward's inner activations are dropped as well as every sublayer's output).

`dropout` draws half as many 32-bit Philox numbers and reads each as two 16-bit numbers `u`,
keeping an element where `u >= round(rate * 65536)`. The mask is made once, as the element's
factor (`65536 / (65536 - threshold)` where kept, 0 where dropped), and the output and its
gradient are each one multiplication by it. The drop probability is `round(rate * 65536) /
65536` (0.1 becomes 0.100006) and the factor makes the expected output the input exactly, as
Keras's does for its own rate.

`layers.dropout.Dropout` calls it under TensorFlow for the rates where that rounding is small
(`applies`); tests/test_layers.py checks its statistics, gradient and seeding.
"""

import tensorflow as tf

# Each 32-bit random number gives two draws of this many values.
LEVELS = 1 << 16


def applies(rate):
    """Whether `dropout` keeps `rate` to within 1% of its drop and keep probabilities.

    That is for rates from 2^-10 to 1 - 2^-10, about 0.001 to 0.999: rounded to a multiple of
    1/65536, the rate and one minus it stay 64 multiples or more from zero.
    """
    return 64 <= rate * LEVELS <= LEVELS - 64


def threshold(rate):
    """The 16-bit draws below which an element is dropped, for a drop `rate` where `applies`: an int."""
    return round(rate * LEVELS)


def dropout(inputs, rate, seed):
    """`inputs` with each element dropped with probability `rate`, the kept ones scaled up.

    Args:
        inputs: float tensor of any shape.
        rate: float drop probability, one for which `applies(rate)`.
        seed: int tensor `[2]`, the stateless seed (the same seed gives the same mask).

    Returns:
        tensor of the shape and dtype of `inputs`.
    """
    inputs = tf.convert_to_tensor(inputs)
    cut = threshold(rate)
    size = tf.size(inputs)
    seed = tf.cast(tf.math.floormod(tf.cast(seed, tf.int64), tf.int32.max - 1), tf.int32)  # as Keras's TF dropout
    words = tf.random.stateless_uniform([(size + 1) // 2], seed=seed, minval=None, maxval=None, dtype=tf.uint32)
    draws = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]  # (size,)
    factor = tf.constant(LEVELS / (LEVELS - cut), inputs.dtype)
    mask = tf.where(draws >= tf.constant(cut, tf.uint16), factor, tf.zeros([], inputs.dtype))
    return inputs * tf.stop_gradient(tf.reshape(mask, tf.shape(inputs)))
