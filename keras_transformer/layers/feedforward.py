"""Position-wise feed-forward sublayer, the tutorial's `feedforward` (paper section 3.3)."""

import keras
from keras import ops

from keras_transformer.checks import check_ints, check_rate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.normalization import LayerNorm
from keras_transformer.masks import sign_mask, zero_padding_rows


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """Two position-wise linear maps with a relu between, residual connection and LayerNorm.

    The tutorial's `feedforward(inputs, num_units=[2048, 512])`, paper section 3.3:
    `FFN(x) = max(0, x W_1 + b_1) W_2 + b_2`, written, as in the tutorial, as two `Conv1D` with
    `kernel_size=1` ("two convolutions with kernel size 1", in the paper's words), followed by
    `LayerNorm(x + dropout(FFN(x)))`. The two `Conv1D` layers hold the weights (kernels `[1, D, F]`
    and `[1, F, D]`); each is computed as the matmul it equals, the faster kernel.

    The function exists in two versions. The document's code applies dropout (rate 0.2) after
    each of the two convolutions and has its final `normalize` commented out (residual, no
    LayerNorm); Kyubyong's repository has no dropout and applies `normalize`. The defaults here
    are the paper's: dropout on `FFN(x)` only (residual dropout, section 5.4), then LayerNorm.
    `FeedForward(num_units, dropout_rate=0.2, inner_dropout_rate=0.2, normalize=False)` is the
    document's code; `FeedForward(num_units)` is Kyubyong's repository.

    Deviation: LayerNorm follows the residual connection by default (the paper; Kyubyong's
    repository); the document's code has it commented out. `normalize=False` reproduces it.
    Deviation: no dropout after the inner (relu) convolution by default (the paper); the
    document's code has one. `inner_dropout_rate=0.2` reproduces it.
    Deviation: outputs at padding positions are set to exactly zero (the document's code leaves
    a non-zero `FFN(0)` there, Kyubyong's repository `LayerNorm(FFN(0))`), so that sign masks
    stay right in every later layer. `zero_padding=False` reproduces both.

    Args:
        num_units: pair of ints `(F, D)`: inner width and output width. The output width must
            equal the input width (residual connection).
        dropout_rate: float in [0, 1), dropout on `FFN(x)`, the second convolution's output.
        inner_dropout_rate: float in [0, 1), dropout on `max(0, x W_1 + b_1)`, the first
            convolution's output.
        normalize: bool, apply LayerNorm after the residual connection (False: the document's
            code). No LayerNorm weights are created when False.
        epsilon: LayerNorm epsilon.
        zero_padding: bool, set the outputs at padding positions to zero (default); False
            leaves what the tutorial code leaves there.

    Call arguments:
        inputs: float tensor `[B, T, D]`.
        training: bool, whether dropout is active.
        mask: optional bool tensor `[B, T]`, True at real positions. Defaults to the Keras mask
            of `inputs`, else to the document's sign mask of `inputs`. Unused without
            `zero_padding`.

    Returns:
        float tensor `[B, T, D]`, zero at padding positions (with `zero_padding`).

    Example:
    >>> FeedForward(num_units=(32, 8))(np.random.rand(2, 5, 8)).shape
    (2, 5, 8)
    >>> document = FeedForward((32, 8), dropout_rate=0.2, inner_dropout_rate=0.2, normalize=False)
    """

    def __init__(
        self,
        num_units=(2048, 512),
        dropout_rate=0.0,
        inner_dropout_rate=0.0,
        normalize=True,
        epsilon=1e-8,
        zero_padding=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        num_units = check_ints("num_units", num_units, 1, length=2)
        check_rate("dropout_rate", dropout_rate)
        check_rate("inner_dropout_rate", inner_dropout_rate)
        self.num_units = num_units
        self.dropout_rate = dropout_rate
        self.inner_dropout_rate = inner_dropout_rate
        self.normalize = normalize
        self.epsilon = epsilon
        self.zero_padding = zero_padding
        self.supports_masking = True

    def build(self, input_shape):
        inner_width, output_width = self.num_units
        if input_shape[-1] != output_width:
            raise ValueError(
                "`num_units[1]` must equal the input width for the residual connection. "
                f"Received: num_units={self.num_units}, input width={input_shape[-1]}"
            )
        self.inner_conv = keras.layers.Conv1D(
            inner_width, kernel_size=1, activation="relu", dtype=self.dtype_policy, name="inner_conv"
        )
        self.inner_conv.build(input_shape)
        self.inner_dropout = Dropout(self.inner_dropout_rate, dtype=self.dtype_policy, name="inner_dropout")
        self.outer_conv = keras.layers.Conv1D(output_width, kernel_size=1, dtype=self.dtype_policy, name="outer_conv")
        self.outer_conv.build(tuple(input_shape[:-1]) + (inner_width,))
        self.output_dropout = Dropout(self.dropout_rate, dtype=self.dtype_policy, name="output_dropout")
        if self.normalize:
            self.layer_norm = LayerNorm(epsilon=self.epsilon, dtype=self.dtype_policy, name="layer_norm")
            self.layer_norm.build(input_shape)

    def call(self, inputs, training=None, mask=None):
        hidden = self.inner_dropout(_position_wise(self.inner_conv, inputs), training=training)  # (B, T, F)
        outputs = self.output_dropout(_position_wise(self.outer_conv, hidden), training=training)  # (B, T, D)
        outputs = outputs + inputs  # residual connection
        if self.normalize:
            outputs = self.layer_norm(outputs)
        if not self.zero_padding:
            return outputs
        return zero_padding_rows(outputs, sign_mask(inputs) if mask is None else mask)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_units": list(self.num_units),
                "dropout_rate": self.dropout_rate,
                "inner_dropout_rate": self.inner_dropout_rate,
                "normalize": self.normalize,
                "epsilon": self.epsilon,
                "zero_padding": self.zero_padding,
            }
        )
        return config


def _position_wise(conv, inputs):
    """`conv(inputs)` for a kernel-1 `Conv1D` and `[B, T, C]` inputs, computed as the matmul it equals.

    That is `activation(x W + b)` over the `[B * T, C]` positions, with the convolution's own
    kernel `[1, C, F]` and bias. TensorFlow's oneDNN convolution is the slower kernel for the
    same numbers: at the small preset one feed-forward sublayer's forward and backward pass took
    4.5 ms as convolutions against 3.2 ms as matmuls on the CPU, and at a single position (cached
    decoding) a convolution costs about 200 us per call (it re-lays out the kernel every call),
    ten times the matmul.
    """
    leading = ops.shape(inputs)[:-1]  # (B, T)
    outputs = ops.matmul(ops.reshape(inputs, (-1, inputs.shape[-1])), conv.kernel[0]) + conv.bias  # (B * T, F)
    return ops.reshape(conv.activation(outputs), (*leading, conv.filters))
