"""Attention score functions `s(x, q)`: how well a key `x` matches a query `q`.

Attention reads its input as a memory addressed by content: every key `x_i` gets a score
`s(x_i, q)` against the query `q`, the scores become the attention distribution
`alpha_i = softmax_i(s(x_i, q))`, and the output is the average of the values weighted by it.
Only the score function differs between the classic attention mechanisms, so it is one layer,
`AttentionScore`, shared by the single-head `keras_transformer.layers.Attention` (one head) and by
`keras_transformer.layers.MultiheadAttention` (on each head's projected queries and keys).

The score functions (per head; `x` a key of width K, `q` a query of width K_q):

    additive     v^T tanh(W x + U q)         Bahdanau et al. 2015, https://arxiv.org/abs/1409.0473
    dot          x^T q                       Luong et al. 2015 ("dot"), https://arxiv.org/abs/1508.04025
    scaled_dot   x^T q / sqrt(K)             Vaswani et al. 2017, https://arxiv.org/abs/1706.03762
    bilinear     x^T W q                     Luong et al. 2015 ("general")
    cosine       g cos(x, q)                 cosine similarity times a scale g (see `AttentionScore`)
"""

import math

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.config import ATTENTION_SCORES as SCORES
from keras_transformer.masks import MASKED_SCORE

# Scores that compare the query and the key coordinate by coordinate: their widths must agree.
EQUAL_WIDTH_SCORES = ("dot", "scaled_dot", "cosine")
# The score's name before it was `attention_score` in the layers as in the configs and the CLI.
LEGACY_SCORE_KEY = "score"

# A vector shorter than this (e.g. an all-zero padding key) is not divided by its norm.
_NORM_EPSILON = 1e-12


def with_attention_score(config):
    """A layer's config as saved before the rename: its `"score"` becomes `"attention_score"`.

    The layers that take the score (`AttentionScore`, `Attention`, `MultiheadAttention`,
    `KeyValueLookup`) load their configs through this, so `.keras` files and `get_config` dicts
    saved when the argument was `score` still load.

    Args:
        config: dict, a layer's config.

    Returns:
        The config (a copy, where it carried the old key) with the score under `"attention_score"`.
    """
    if LEGACY_SCORE_KEY not in config:
        return config
    config = dict(config)
    score = config.pop(LEGACY_SCORE_KEY)
    config.setdefault("attention_score", score)
    return config


def _uniform(variance):
    """Uniform initializer on `[-limit, limit]` with the given variance (`limit = sqrt(3 variance)`)."""
    limit = math.sqrt(3.0 * variance)
    return keras.initializers.RandomUniform(-limit, limit)


# Under TensorFlow, a single query (cached decoding: `T_q == 1` in the static shape) gets its dot
# products, softmax and weighted sum from elementwise ops, in float32: TensorFlow's oneDNN batched
# matmul and softmax kernels cost about 45 us per call on the CPU at those sizes, most of a
# decoding step, against a few us each for the elementwise ops. The math is the same; other
# shapes, and the other backends, use the matmuls: under XLA the elementwise products and their
# reductions were the slower (JAX on a CPU, cached greedy decoding of one sentence: 8.8 ms with
# them, 6.4 without; keras-hub's 6.2 to 6.5).


def _one_query_elementwise(tensor):
    """Whether `[B, H, T_q, ...]` takes the elementwise single-query path: `T_q == 1` under TensorFlow."""
    return tensor.shape[2] == 1 and keras.backend.backend() == "tensorflow"


def dot_products(queries, keys):
    """Each query's dot product with every key, per head: `[B, H, T_q, K] x [B, H, T_k, K] -> [B, H, T_q, T_k]`.

    Float32 for a single query under TensorFlow, else the inputs' dtype.
    """
    if _one_query_elementwise(queries):
        products = ops.cast(queries, "float32") * ops.cast(keys, "float32")  # (B, H, T_k, K)
        return ops.expand_dims(ops.sum(products, axis=-1), 2)  # (B, H, 1, T_k)
    return ops.matmul(queries, ops.transpose(keys, (0, 1, 3, 2)))


def softmax_over_keys(scores):
    """Softmax over the last axis of float32 scores `[B, H, T_q, T_k]`: the attention weights."""
    if not _one_query_elementwise(scores):
        return ops.softmax(scores, axis=-1)
    exponentials = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
    return exponentials / ops.sum(exponentials, axis=-1, keepdims=True)


def weighted_sum(weights, values):
    """`weights @ values`: `[B, H, T_q, T_k] x [B, H, T_k, K] -> [B, H, T_q, K]`, in the values' dtype."""
    if not _one_query_elementwise(weights):
        return ops.matmul(weights, values)
    products = ops.cast(ops.squeeze(weights, 2), "float32")[..., None] * ops.cast(values, "float32")  # (B, H, T_k, K)
    return ops.cast(ops.expand_dims(ops.sum(products, axis=2), 2), values.dtype)


def _unit_vectors(x):
    """`x / max(|x|, 1e-12)` along the last axis, in float32 (an all-zero vector stays zero)."""
    x = ops.cast(x, "float32")
    squared_norm = ops.sum(ops.square(x), axis=-1, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared_norm, _NORM_EPSILON**2))


@keras.saving.register_keras_serializable(package="keras_transformer")
class AttentionScore(keras.layers.Layer):
    """Attention scores `s(x_j, q_i)` of every query against every key, per head, in float32.

    For head `h`, query `q = queries[b, h, i]` (width K_q) and key `x = keys[b, h, j]` (width K),
    `scores[b, h, i, j]` is, by `attention_score`:

        "additive"    v_h^T tanh(W_h x + U_h q)     W_h [K, A], U_h [K_q, A], v_h [A]
        "dot"         x^T q
        "scaled_dot"  x^T q / sqrt(K)
        "bilinear"    x^T W_h q                     W_h [K, K_q]
        "cosine"      g_h x^T q / (|x| |q|)         g_h a scalar, learned by default

    - additive: Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align
      and Translate" (https://arxiv.org/abs/1409.0473), the score of a one-hidden-layer network
      of width A (`attention_width`). No biases, as in the paper.
    - dot and bilinear: Luong et al. 2015, "Effective Approaches to Attention-based Neural
      Machine Translation" (https://arxiv.org/abs/1508.04025), "dot" and "general".
    - scaled_dot: Vaswani et al. 2017, "Attention Is All You Need", section 3.2.1: dot products
      grow like sqrt(K) with the width, which would push the softmax into saturation.
    - cosine: cosine similarities lie in [-1, 1], too flat for a softmax to pick out a key, so
      they are multiplied by a per-head scale (inverse temperature) `g_h`, initialized to
      `cosine_scale` and learned (`learn_cosine_scale=False` keeps it fixed, no weight), as in
      query-key normalization (Henry et al. 2020, https://arxiv.org/abs/2010.04245) and Swin
      Transformer V2's scaled cosine attention (Liu et al. 2022, https://arxiv.org/abs/2111.09883,
      initial scale 10). An all-zero vector (padding) has cosine 0 with everything.

    Initialization, per head: W, U Glorot uniform with the fans of one head's kernel (K and A,
    K_q and A), v Glorot uniform as a `Dense(1)` kernel (fans A and 1); the bilinear W uniform
    with variance `1 / (K K_q)`, so that for unit-variance inputs the bilinear scores start with
    the variance of the scaled dot products (1).

    "dot", "scaled_dot" and "bilinear" multiply in the compute dtype and cast the products to
    float32 (as `MultiheadAttention` always has); "cosine" normalizes and multiplies in float32;
    "additive" computes `tanh` in the compute dtype and casts its weighted sum. So masked scores
    (`-2^32 + 1`) never overflow under mixed precision. "scaled_dot" (the default) and "dot"
    create no weights.

    Args:
        attention_score: one of `"scaled_dot"` (default), `"dot"`, `"additive"`, `"bilinear"`,
            `"cosine"`; a config's `attention_score` (`--attention-score`).
        attention_width: int A, the hidden width of the additive score; None (default) for the
            key width K. Used only by `"additive"`.
        cosine_scale: float > 0, the scale `g` of the cosine score (its initial value when
            learned). Used only by `"cosine"`.
        learn_cosine_scale: bool, whether `g` is a trainable weight, one per head (True), or the
            constant `cosine_scale`. Used only by `"cosine"`.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        queries: float tensor `[B, H, T_q, K_q]`.
        keys: float tensor `[B, H, T_k, K]`.
        allowed: optional bool tensor broadcastable to `[B, H, T_q, T_k]`, True where query `i`
            may attend to key `j`; elsewhere the score is the tutorial's `-2^32 + 1`, whose
            softmax weight is exactly 0.

    Returns:
        float32 tensor `[B, H, T_q, T_k]`.

    Raises:
        ValueError: an unknown `attention_score`, a bad `attention_width` or `cosine_scale` (at
            construction), or queries and keys of different widths for `"dot"`, `"scaled_dot"`
            or `"cosine"`, or of different head counts (when built).

    Example:
    >>> scores = AttentionScore("additive")
    >>> queries, keys = np.ones((2, 4, 3, 8), "float32"), np.ones((2, 4, 5, 6), "float32")
    >>> tuple(scores(queries, keys).shape)
    (2, 4, 3, 5)
    """

    def __init__(
        self, attention_score="scaled_dot", attention_width=None, cosine_scale=10.0, learn_cosine_scale=True, **kwargs
    ):
        super().__init__(**kwargs)
        check_choice("attention_score", attention_score, SCORES)
        if attention_width is not None:
            check_int("attention_width", attention_width, 1)
        check_number("cosine_scale", cosine_scale, greater_than=0)
        self.attention_score = attention_score
        self.attention_width = attention_width
        self.cosine_scale = float(cosine_scale)
        self.learn_cosine_scale = bool(learn_cosine_scale)
        self._key_width = None  # K, known in `build`

    def build(self, queries_shape, keys_shape):
        heads, query_width, key_width = queries_shape[1], queries_shape[-1], keys_shape[-1]
        if heads is None or query_width is None or key_width is None:
            raise ValueError(
                "The head count and the widths of the queries and keys must be known. "
                f"Received: queries_shape={queries_shape}, keys_shape={keys_shape}"
            )
        if keys_shape[1] != heads:
            raise ValueError(
                f"Queries and keys must have as many heads. Received: queries_shape={queries_shape}, "
                f"keys_shape={keys_shape}"
            )
        if self.attention_score in EQUAL_WIDTH_SCORES and query_width != key_width:
            raise ValueError(
                f"The {self.attention_score!r} score needs queries and keys of the same width. "
                f"Received: query width={query_width}, key width={key_width}"
            )
        self._key_width = key_width
        if self.attention_score == "additive":
            width = self.attention_width or key_width
            self.key_kernel = self.add_weight(
                shape=(heads, key_width, width),
                initializer=_uniform(2.0 / (key_width + width)),
                name="key_kernel",
            )  # W
            self.query_kernel = self.add_weight(
                shape=(heads, query_width, width),
                initializer=_uniform(2.0 / (query_width + width)),
                name="query_kernel",
            )  # U
            self.score_vector = self.add_weight(
                shape=(heads, width), initializer=_uniform(2.0 / (width + 1)), name="score_vector"
            )  # v
        elif self.attention_score == "bilinear":
            self.kernel = self.add_weight(
                shape=(heads, key_width, query_width),
                initializer=_uniform(1.0 / (key_width * query_width)),
                name="kernel",
            )  # W
        elif self.attention_score == "cosine" and self.learn_cosine_scale:
            self.scale = self.add_weight(
                shape=(heads,), initializer=keras.initializers.Constant(self.cosine_scale), name="scale"
            )  # g

    def call(self, queries, keys, allowed=None):
        if self.attention_score in ("dot", "scaled_dot"):
            scores = ops.cast(dot_products(queries, keys), "float32")  # (B, H, T_q, T_k)
            if self.attention_score == "scaled_dot":
                scores = scores / math.sqrt(self._key_width)
        elif self.attention_score == "bilinear":
            transformed = ops.einsum("bhqj,hkj->bhqk", queries, self.kernel)  # W q: (B, H, T_q, K)
            scores = ops.cast(dot_products(transformed, keys), "float32")
        elif self.attention_score == "additive":
            key_features = ops.einsum("bhtk,hka->bhta", keys, self.key_kernel)  # W x: (B, H, T_k, A)
            query_features = ops.einsum("bhqj,hja->bhqa", queries, self.query_kernel)  # U q: (B, H, T_q, A)
            hidden = ops.tanh(key_features[:, :, None, :, :] + query_features[:, :, :, None, :])  # (B, H, T_q, T_k, A)
            scores = ops.cast(ops.einsum("bhqta,ha->bhqt", hidden, self.score_vector), "float32")
        else:  # cosine
            scores = dot_products(_unit_vectors(queries), _unit_vectors(keys))
            if self.learn_cosine_scale:
                scores = scores * ops.reshape(ops.cast(self.scale, "float32"), (-1, 1, 1))  # g_h per head
            else:
                scores = scores * self.cosine_scale
        if allowed is not None:
            scores = ops.where(allowed, scores, MASKED_SCORE)
        return scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention_score": self.attention_score,
                "attention_width": self.attention_width,
                "cosine_scale": self.cosine_scale,
                "learn_cosine_scale": self.learn_cosine_scale,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_attention_score(config))
