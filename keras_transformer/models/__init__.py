"""Functional Keras models assembled from `keras_transformer.layers`.

`translation`: the encoder-decoder Transformer of "Attention Is All You Need".
`lookup`: a one-layer soft or hard attention reader of the key-value lookup task.
`language`: decoder-only (GPT-style) and encoder-only (BERT-style) language models.
`ctranslate2_spec`: a trained translation model as CTranslate2's Transformer (optional extra).
"""

from keras_transformer.models.ctranslate2_spec import UnsupportedModelError, conversion_problems, transformer_spec
from keras_transformer.models.language import (
    LanguageModelLayers,
    build_decoder_only,
    build_encoder_only,
    build_language_model,
)
from keras_transformer.models.lookup import KeyValueLookup
from keras_transformer.models.translation import (
    Transformer,
    TransformerLayers,
    attention_weights,
    build_transformer,
    decode,
    decoder_states,
    encode,
)

__all__ = [
    "KeyValueLookup",
    "LanguageModelLayers",
    "Transformer",
    "TransformerLayers",
    "UnsupportedModelError",
    "attention_weights",
    "build_decoder_only",
    "build_encoder_only",
    "build_language_model",
    "build_transformer",
    "conversion_problems",
    "decode",
    "decoder_states",
    "encode",
    "transformer_spec",
]
