"""Functional Keras models assembled from `keras_transformer.layers`.

`translation`: the encoder-decoder Transformer of "Attention Is All You Need".
`lookup`: a one-layer soft or hard attention reader of the key-value lookup task.
"""

from keras_transformer.models.lookup import KeyValueLookup
from keras_transformer.models.translation import TransformerLayers, attention_weights, build_transformer, decode, encode

__all__ = ["KeyValueLookup", "TransformerLayers", "attention_weights", "build_transformer", "decode", "encode"]
