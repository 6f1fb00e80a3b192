"""Dropout, the tutorial's `tf.layers.dropout`, with cheaper random bits under TensorFlow."""

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose TensorFlow training pass costs fewer passes over the inputs.

    In training each element is zeroed with probability `rate` and the others are scaled by
    about `1 / (1 - rate)`, so the expected output is the input (Srivastava et al., 2014; paper
    section 5.4). Under TensorFlow, without a `noise_shape`, the mask comes from 16 random bits
    per element rather than a float (see `keras_transformer.layers.fast_dropout`): the drop probability
    is `rate` rounded to a multiple of 1/65536, for rates from about 0.001 to 0.999. Elsewhere
    (other rates, other backends, inference) this is Keras's layer. Its arguments and config
    are Keras's: `rate`, `noise_shape`, `seed`.

    Call arguments:
        inputs: float tensor of any shape, e.g. `[batch, time, d_model]`.
        training: bool; dropout applies only when true.

    Returns:
        tensor of the shape and dtype of `inputs`.
    """

    def call(self, inputs, training=False):
        if training and self.noise_shape is None and keras.backend.backend() == "tensorflow":
            from keras_transformer.layers import fast_dropout  # TensorFlow only

            if fast_dropout.applies(self.rate):
                return fast_dropout.dropout(inputs, self.rate, self.seed_generator.next())
        return super().call(inputs, training=training)
