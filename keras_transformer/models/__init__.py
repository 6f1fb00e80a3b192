"""Functional Keras models assembled from `keras_transformer.layers`.

`translation`: the encoder-decoder Transformer of "Attention Is All You Need".
"""

from keras_transformer.models.translation import TransformerLayers, attention_weights, build_transformer, decode, encode

__all__ = ["TransformerLayers", "attention_weights", "build_transformer", "decode", "encode"]
