"""Batch normalisation between a linear layer and its activation, where the vision papers put it.

SKNet, CBAM's reference code and the Residual Attention Network follow every convolution (and
SKNet its fuse layer) by batch normalisation (Ioffe and Szegedy 2015), then the activation:

    y = activation(gamma * (z - mu) / sqrt(sigma^2 + eps) + beta)      z = layer(x), without bias

`mu` and `sigma^2` are the batch's statistics over every axis but the last in training, their
moving averages (`MOMENTUM`) in inference. The linear layer drops its bias: `beta` takes its place.

`linear_unit` builds either form, so that a layer with `batch_norm=False` keeps exactly the
weights (and weight names) it had before the option existed.
"""

import keras

# The moving averages' momentum: PyTorch's default (0.1 there, counted the other way), in which the
# papers' reference code is written. Keras's 0.99 averages over about 100 steps, too slowly for a few
# hundred steps of training: the averages still lag the batch statistics, and inference reads them.
MOMENTUM = 0.9


class Normalized(keras.layers.Layer):
    """`activation(BatchNormalization(layer(x)))`: one linear layer, normalised, then its activation.

    Made by `linear_unit(..., batch_norm=True)` inside the vision layers' `build`, never on its own
    in a saved model's config (its owner rebuilds it).

    Args:
        layer: a Keras layer without bias or activation (a `Conv2D` or `Dense`).
        activation: the activation after the normalisation (a name, a callable or None).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: float tensor, the linear layer's input.
        training: bool or None; batch statistics in training, moving averages otherwise.

    Returns:
        float tensor of the linear layer's output shape.
    """

    def __init__(self, layer, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer
        self.activation = keras.activations.get(activation)
        self.norm = keras.layers.BatchNormalization(momentum=MOMENTUM, dtype=self.dtype_policy, name="batch_norm")

    def build(self, input_shape):
        self.layer.build(input_shape)
        self.norm.build(self.layer.compute_output_shape(input_shape))

    def call(self, inputs, training=None):
        return self.activation(self.norm(self.layer(inputs), training=training))

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)


def linear_unit(make, activation, batch_norm, input_shape, name, dtype=None, bias=True):
    """A built linear layer with its activation: `make(...)` alone, or `Normalized` around it.

    Args:
        make: callable `make(use_bias=..., activation=..., name=...)` -> a Keras layer (a
            `functools.partial` of `keras.layers.Conv2D` or `Dense` with its other arguments).
        activation: the activation after the layer (or after its normalisation).
        batch_norm: bool; False: `make(use_bias=bias, activation=activation, name=name)`; True:
            the layer without bias or activation, then batch normalisation, then the activation.
        input_shape: the shape to build it for.
        name: str, the unit's name.
        dtype: the `Normalized` wrapper's dtype policy (the owner's).
        bias: bool, whether the layer without normalisation has a bias (with it, never).

    Returns:
        The built layer.
    """
    if batch_norm:
        unit = Normalized(make(use_bias=False, activation=None, name="linear"), activation, dtype=dtype, name=name)
    else:
        unit = make(use_bias=bias, activation=activation, name=name)
    unit.build(input_shape)
    return unit
