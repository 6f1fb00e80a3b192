"""Keras 3 layers porting the tutorial's functions; see each class for the mapping."""

from keras_transformer.layers.attention import MultiheadAttention
from keras_transformer.layers.blocks import DecoderBlock, DecoderOnlyBlock, EncoderBlock
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.embedding import PositionalEncoding, TokenEmbedding, sinusoidal_encoding
from keras_transformer.layers.feedforward import FeedForward
from keras_transformer.layers.normalization import LayerNorm
from keras_transformer.layers.scoring import AttentionScore
from keras_transformer.layers.single_head import Attention

__all__ = [
    "Attention",
    "AttentionScore",
    "DecoderBlock",
    "DecoderOnlyBlock",
    "Dropout",
    "EncoderBlock",
    "FeedForward",
    "LayerNorm",
    "MultiheadAttention",
    "PositionalEncoding",
    "TokenEmbedding",
    "sinusoidal_encoding",
]
