"""Token embeddings and positional encodings (paper sections 3.4 and 3.5).

They are the tutorial's `embedding` and `positional_encoding`.
"""

import math

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int
from keras_transformer.config import POSITIONAL_FREQUENCIES as FREQUENCIES
from keras_transformer.masks import sign_mask, zero_padding_rows


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenEmbedding(keras.layers.Layer):
    """Token embedding with a constant zero padding row, scaled by `sqrt(D)`.

    The tutorial's `embedding(inputs, vocab_size, num_units, zero_pad=True, scale=True)`: id 0
    is padding and always embeds to the zero vector (so the tutorial's sign masks can find it);
    outputs are multiplied by `sqrt(D)` (paper section 3.4).

    Deviation: weights start from `N(0, D^-1/2)`, so that scaled embeddings have unit variance
    like the positional encodings they are added to; the tutorial uses Xavier initialization.

    Extension: called with `reverse=True` on hidden states, the layer is a language model's
    output layer with the same `[V, D]` table (weight tying, paper section 3.4: "we share the same
    weight matrix between the two embedding layers and the pre-softmax linear transformation"):
    `logits = hidden E^T`, unscaled, in float32. The table is then one variable, updated by both
    uses; a functional model calls the one layer twice.

    Args:
        vocab_size: int V, number of token ids.
        d_model: int D, embedding width.
        scale: bool, multiply the outputs by `sqrt(D)`.
        mask_zero: bool, attach a Keras mask (`ids != 0`) to the outputs, which the layers of
            this package then use instead of sign masks.

    Call arguments:
        token_ids: int tensor `[B, T]`, 0 = padding; with `reverse`, float tensor `[B, T, D]`.
        reverse: bool, compute logits from hidden states instead of embedding token ids.

    Returns:
        float tensor `[B, T, D]`, exactly zero at padding; with `reverse`, float32 logits
        `[B, T, V]`.
    """

    def __init__(self, vocab_size, d_model, scale=True, mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        check_int("vocab_size", vocab_size, 1)
        check_int("d_model", d_model, 1)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        self.mask_zero = mask_zero

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
            # Gather float32 rows, then cast them: under mixed precision an autocast variable
            # would cast the whole [V, D] table to the compute dtype at every step.
            autocast=False,
        )

    def call(self, token_ids, reverse=False):
        if reverse:
            hidden = ops.cast(token_ids, "float32")  # (B, T, D)
            return ops.matmul(hidden, ops.transpose(self.embeddings))  # (B, T, V)
        token_ids = ops.cast(token_ids, "int32")
        # The table is read through a multiply, whose gradient is dense: on TensorFlow a gather's
        # gradient has one row per token (`tf.IndexedSlices`), and Keras's Adam squares those rows
        # one by one, so a token seen twice in a batch got `g1^2 + g2^2` as its second moment
        # instead of Adam's `(g1 + g2)^2` (as on JAX and PyTorch). Adam updates the whole table
        # densely anyway.
        table = self.embeddings * 1.0  # (V, D)
        outputs = ops.cast(ops.take(table, token_ids, axis=0), self.compute_dtype)  # (B, T, D)
        # Padding embeds to exactly zero, and row 0 of the table gets no gradient; one multiply
        # applies the mask and the scale.
        factor = ops.cast(ops.not_equal(token_ids, 0), self.compute_dtype)  # (B, T)
        if self.scale:
            factor = factor * math.sqrt(self.d_model)
        return outputs * factor[..., None]

    def compute_mask(self, token_ids, mask=None):
        # Keras passes no call arguments here: float inputs are hidden states (`reverse`), no mask.
        reversed_call = keras.backend.is_float_dtype(keras.backend.standardize_dtype(token_ids.dtype))
        return ops.not_equal(token_ids, 0) if self.mask_zero and not reversed_call else None

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def compute_output_spec(self, token_ids, reverse=False):
        if reverse:
            return keras.KerasTensor(tuple(token_ids.shape[:-1]) + (self.vocab_size,), dtype="float32")
        return keras.KerasTensor(self.compute_output_shape(token_ids.shape), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "scale": self.scale,
                "mask_zero": self.mask_zero,
            }
        )
        return config


def sinusoidal_encoding(length, depth, dtype="float32", start=0, frequencies="paper"):
    """The paper's positional encodings (section 3.5) as a `[length, depth]` tensor.

    The rows are positions `start .. start + length - 1`:
    `PE(pos, 2i) = sin(pos / 10000^(2i / depth))`, `PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))`.

    Deviation: the tutorial code computes `pos / 10000^(2j / depth)` at column `j`, with the
    column index itself (not `2 * (j // 2)`), so its sine and cosine of a pair have different
    frequencies;
    `frequencies="tutorial"` reproduces it, the default follows the paper.

    Args:
        length: int, number of positions (rows).
        depth: int, width of an encoding (columns), the model width D.
        dtype: dtype of the result; the encodings are computed in float32.
        start: int, position of the first row.
        frequencies: `"paper"` (a pair of columns shares a frequency) or `"tutorial"` (each
            column its own).

    Returns:
        float tensor `[length, depth]`.
    """
    check_choice("frequencies", frequencies, FREQUENCIES)
    positions = ops.cast(ops.arange(length) + start, "float32")[:, None]  # (T, 1)
    columns = ops.arange(depth)  # (D,)
    # 2i for columns 2i and 2i + 1 (the paper); 2j for column j (the tutorial code)
    exponent = 2 * columns if frequencies == "tutorial" else (columns // 2) * 2
    angles = positions / ops.power(10000.0, ops.cast(exponent, "float32") / depth)[None, :]  # (T, D)
    encoding = ops.where(ops.equal(columns % 2, 0)[None, :], ops.sin(angles), ops.cos(angles))
    return ops.cast(encoding, dtype)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Adds positional encodings to embeddings, at real (non-padding) positions only.

    The tutorial's `positional_encoding` (paper section 3.5): sinusoidal by default, learned
    position embeddings (the tutorial's `embedding` of positions) with `learned=True`.

    Deviation: the tutorial adds encodings at every position, which makes padding vectors
    non-zero and silently breaks its own sign masks (reported as issue 33 on Kyubyong's GitHub repository).
    Here padding positions get no encoding and stay exactly zero, as in the current `train.py` of
    that repository, which multiplies the sum by the embedding's sign mask; every variant does so.

    Args:
        learned: bool, learn a `[max_length, D]` table instead of the fixed sinusoids.
        max_length: int, longest sequence; required when `learned`, unused otherwise
            (sinusoids are computed for any length).
        frequencies: the sinusoids' frequencies, `"paper"` or `"tutorial"` (see
            `sinusoidal_encoding`); unused when `learned`.

    Call arguments:
        inputs: float tensor `[B, T, D]` (scaled token embeddings).
        mask: optional bool tensor `[B, T]`, True at real positions. Defaults to the Keras mask
            of `inputs`, else to the sign mask of `inputs`.
        start: int or int scalar tensor, the position of `inputs[:, 0]` (incremental decoding
            feeds one token at a time, at position `start`).

    Returns:
        float tensor `[B, T, D]`.
    """

    def __init__(self, learned=False, max_length=None, frequencies="paper", **kwargs):
        super().__init__(**kwargs)
        check_choice("frequencies", frequencies, FREQUENCIES)
        if learned:
            check_int("max_length", max_length, 1)
        self.learned = learned
        self.max_length = max_length
        self.frequencies = frequencies
        self.supports_masking = True

    def build(self, input_shape):
        if self.learned:
            self.position_embeddings = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, input_shape[-1]),
                initializer=keras.initializers.RandomNormal(stddev=0.02),
                autocast=False,  # gather float32 rows, then cast (see TokenEmbedding)
            )

    def call(self, inputs, mask=None, start=0):
        mask = sign_mask(inputs) if mask is None else mask
        length, depth = ops.shape(inputs)[1], ops.shape(inputs)[2]
        if self.learned and isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"Sequence of {length} positions is longer than the learned table. Received: "
                f"length={length}, max_length={self.max_length}"
            )
        if self.learned:
            table = ops.take(self.position_embeddings, ops.arange(length) + start, axis=0)  # (T, D)
            encoding = ops.cast(table, self.compute_dtype)
        else:
            encoding = sinusoidal_encoding(length, depth, self.compute_dtype, start, self.frequencies)  # (T, D)
        batch = ops.shape(inputs)[0]
        encoding = ops.broadcast_to(encoding[None, :, :], (batch, length, depth))  # (B, T, D)
        return inputs + zero_padding_rows(encoding, mask)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"learned": self.learned, "max_length": self.max_length, "frequencies": self.frequencies})
        return config
