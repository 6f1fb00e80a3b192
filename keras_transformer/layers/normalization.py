"""Layer normalization, the tutorial's `normalize`."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class LayerNorm(keras.layers.Layer):
    """Layer normalization over the last axis: the tutorial's `normalize(inputs, epsilon=1e-8)`.

    `outputs = gamma * (inputs - mean) / sqrt(variance + epsilon) + beta`, with mean and
    variance taken over the last axis, `beta` initialised to zeros and `gamma` to ones, both of
    shape `[C]` (Ba et al., 2016; paper section 3.1 "LayerNorm(x + Sublayer(x))").

    Args:
        epsilon: small float added to the variance. The tutorial's `1e-8` is the default (the
            paper does not give one; Keras' `LayerNormalization` uses `1e-3`).

    Call arguments:
        inputs: float tensor `[..., C]`.

    Returns:
        float tensor of the same shape.

    Note: the normalization of an all-zero (padding) row is `beta`, not zero. The sublayers of
    this package zero padding rows again after normalizing (see `keras_transformer.masks`).

    Example:
    >>> LayerNorm()(np.ones((2, 3, 4))).shape
    (2, 3, 4)
    """

    def __init__(self, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        if not epsilon > 0:
            raise ValueError(f"`epsilon` must be positive. Received: epsilon={epsilon}")
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, input_shape):
        channels = input_shape[-1]
        self.beta = self.add_weight(name="beta", shape=(channels,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(channels,), initializer="ones")

    def call(self, inputs):
        # Statistics in float32: under float16, epsilon=1e-8 would round to 0 and an all-zero
        # (padding) row would normalize to 0 / 0 = NaN.
        values = ops.cast(inputs, "float32")
        mean, variance = ops.moments(values, axes=[-1], keepdims=True)  # (..., 1) each
        scale = ops.cast(self.gamma, "float32") * ops.rsqrt(variance + self.epsilon)  # (..., C)
        outputs = (values - mean) * scale + ops.cast(self.beta, "float32")
        return ops.cast(outputs, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"epsilon": self.epsilon})
        return config
