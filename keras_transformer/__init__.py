"""keras-transformer: the classic TF1 Transformer tutorial as Keras 3 layers.

"Attention Is All You Need" (Vaswani et al., 2017, https://arxiv.org/abs/1706.03762),
ported from the TF1 tutorial code (`multihead_attention`, `normalize`, `feedforward`,
`embedding`, `positional_encoding`) to Keras 3 `Layer` subclasses written with `keras.ops`.

Shape letters used in every docstring and shape comment:

    B  batch size
    S  source length (tokens)
    T  target length (tokens)
    D  d_model, the width of every residual stream
    H  number of attention heads
    K  head width, D // H
    F  d_ff, the inner width of the feed-forward sublayer
    V  vocabulary size

Masks follow one convention everywhere: True (or 1) means "a real token, may be attended to".
"""

__version__ = "0.1.0"
