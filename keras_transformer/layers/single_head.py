"""Single-head attention without projections: attention as content-based addressing."""

import keras
from keras import ops

from keras_transformer.layers.hard_attention import check_hard_attention, hard_weights
from keras_transformer.layers.reinforce import entropy
from keras_transformer.layers.scoring import AttentionScore, with_attention_score
from keras_transformer.masks import attention_masks, zero_padding_rows


@keras.saving.register_keras_serializable(package="keras_transformer")
class Attention(keras.layers.Layer):
    """Attention as addressing: a query reads a weighted average of its input, in three steps.

    The input is a set of keys `X = [x_1, ..., x_N]` (rows of `keys`), each a memory slot; a query
    `q` (a row of `queries`) reads from it:

        1. input                  X = keys, and V = values (plain mode: V = X)
        2. attention distribution alpha_i = softmax_i(s(x_i, q))
        3. weighted average       context = sum_i alpha_i v_i

    `s` is the score function `attention_score` (`keras_transformer.layers.AttentionScore`, one head):
    "scaled_dot" `x^T q / sqrt(K)` (Vaswani et al. 2017), "dot" `x^T q` and "bilinear"
    `x^T W q` (Luong et al. 2015), "additive" `v^T tanh(W x + U q)` (Bahdanau et al. 2015), or
    "cosine" `g cos(x, q)`. The layer has no query, key or value projections: its only weights
    are the score function's ("scaled_dot" and "dot": none). It is the soft addressing of
    neural machine translation's attention, one head of `MultiheadAttention` without the
    projections, residual connection and LayerNorm.

    In plain mode (`values=None`) the keys are also the values: `context = sum_i alpha_i x_i`. In
    key-value mode, `keys` address and `values` (as many positions, any width) are read.

    Masks, as in `MultiheadAttention`: padding keys get weight exactly 0, and the context is
    exactly 0 at padding queries. They are, in order of precedence, the `queries_mask` /
    `keys_mask` arguments, the Keras masks of `queries` / `keys` (e.g. from a `mask_zero`
    embedding), and otherwise the sign masks of `queries` / `keys`: an all-zero vector is
    padding (`keras_transformer.masks.sign_mask`). With `causality`, query `i` only sees keys
    `0..i`. Scores and softmax are float32 whatever the compute dtype.

    Soft or hard (`keras_transformer.layers.hard_attention`): by default (`hard=None`) the
    context is the weighted average above. Hard attention reads exactly one value, `v_z`:
    `hard="argmax"` takes the highest-scoring allowed key, `hard="sample"` samples
    `z ~ Categorical(alpha)` when called with `training=True` and takes the argmax otherwise.
    The weights are then one-hot. No gradient reaches the score function through the choice
    except with `estimator="gumbel"` (straight-through Gumbel-softmax, when sampling); with
    `estimator="reinforce"` the caller trains it from `return_log_prob=True`'s log alpha_z with
    `keras_transformer.layers.reinforce.Reinforce` (`return_entropy=True` gives the entropy of
    alpha for its entropy bonus). Values get gradients either way.

    Args:
        attention_score: `"scaled_dot"` (default), `"dot"`, `"additive"`, `"bilinear"` or
            `"cosine"`. `"dot"`, `"scaled_dot"` and `"cosine"` need queries as wide as the keys.
        causality: bool, whether query `i` may only attend to keys `0..i`.
        attention_width: int A of the additive score; None for the key width. See
            `AttentionScore`.
        cosine_scale: float, the cosine score's scale (initial value when learned).
        learn_cosine_scale: bool, whether the cosine score's scale is learned.
        hard: None (soft attention, default), `"argmax"` or `"sample"`.
        estimator: `"reinforce"` (default) or `"gumbel"`: how `hard="sample"` is trained.
        temperature: positive float, the Gumbel-softmax relaxation's temperature (`"gumbel"`).
        seed: int or None, the seed of the sampling noise (`hard="sample"`).
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        queries: float tensor `[B, T_q, D_q]`.
        keys: float tensor `[B, T_k, D_k]`.
        values: float tensor `[B, T_k, D_v]`, or None (plain mode: the keys are the values).
        queries_mask: optional bool tensor `[B, T_q]`, True at real query positions.
        keys_mask: optional bool tensor `[B, T_k]`, True at real key positions.
        return_attention_scores: bool; also return the attention weights `[B, T_q, T_k]`
            (zero rows at padding queries): the distribution alpha, or the one-hot choice of
            hard attention.
        return_log_prob: bool; also return `[B, T_q]`, log alpha_z of hard attention's chosen
            key `z` (differentiable with respect to the scores; 0 at padding queries). For soft
            attention, zeros.
        return_entropy: bool; also return `[B, T_q]`, the entropy of the distribution alpha in
            nats (differentiable; 0 at padding queries), whatever `hard`.
        training: bool; `hard="sample"` samples only when True.

    Returns:
        float tensor `[B, T_q, D_v]` (`D_v = D_k` in plain mode), zero at padding queries; then
        the weights, the log-probabilities and the entropies if requested, in that order.

    Raises:
        ValueError: an unknown `attention_score`, `hard` or `estimator`, or bad score or temperature
            settings (at construction), or queries and keys of different widths for `"dot"`,
            `"scaled_dot"` or `"cosine"` (when built).

    Example:
    >>> attention = Attention(attention_score="additive")
    >>> queries, keys = np.random.rand(2, 3, 4).astype("float32"), np.random.rand(2, 5, 6).astype("float32")
    >>> context, weights = attention(queries, keys, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 6), (2, 3, 5))
    """

    def __init__(
        self,
        attention_score="scaled_dot",
        causality=False,
        attention_width=None,
        cosine_scale=10.0,
        learn_cosine_scale=True,
        hard=None,
        estimator="reinforce",
        temperature=1.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_hard_attention(hard, estimator, temperature)
        self.causality = causality
        self.hard = hard
        self.estimator = estimator
        self.temperature = float(temperature)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if hard == "sample" else None
        # Made here, so bad score arguments fail at construction.
        self.scoring = AttentionScore(
            attention_score,
            attention_width=attention_width,
            cosine_scale=cosine_scale,
            learn_cosine_scale=learn_cosine_scale,
            dtype=self.dtype_policy,
            name="scoring",
        )
        self.supports_masking = True

    @property
    def attention_score(self):
        """The name of the score function, e.g. `"scaled_dot"`."""
        return self.scoring.attention_score

    def build(self, queries_shape, keys_shape, values_shape=None):
        # One head: the score function sees [B, 1, T, D].
        self.scoring.build((None, 1, None, queries_shape[-1]), (None, 1, None, keys_shape[-1]))

    def call(
        self,
        queries,
        keys,
        values=None,
        queries_mask=None,
        keys_mask=None,
        return_attention_scores=False,
        return_log_prob=False,
        return_entropy=False,
        training=None,
    ):
        values = keys if values is None else values
        queries_mask, allowed = attention_masks(queries, keys, queries_mask, keys_mask, self.causality)

        # 2. attention distribution: alpha = softmax(s(x, q)), scores float32 and masked.
        scores = self.scoring(queries[:, None], keys[:, None], allowed)[:, 0]  # (B, T_q, T_k)
        if self.hard is None:
            weights = ops.softmax(scores, axis=-1)  # (B, T_q, T_k)
            log_prob = ops.zeros_like(scores[:, :, 0]) if return_log_prob else None  # (B, T_q)
        else:  # one-hot: the argmax, or a sample of alpha
            weights, log_prob = hard_weights(
                scores, allowed[:, 0], self.hard, self.estimator, self.temperature, self.seed_generator, bool(training)
            )
        weights = ops.cast(weights, self.compute_dtype)
        # 3. weighted average of the values (hard attention: the chosen value).
        context = ops.matmul(weights, values)  # (B, T_q, D_v)
        context = zero_padding_rows(context, queries_mask)
        outputs = [context]
        if return_attention_scores:
            outputs.append(weights * ops.cast(queries_mask[:, :, None], weights.dtype))
        if return_log_prob:
            outputs.append(log_prob * ops.cast(queries_mask, log_prob.dtype))
        if return_entropy:
            alpha_entropy = entropy(ops.log_softmax(scores, axis=-1))  # (B, T_q)
            outputs.append(alpha_entropy * ops.cast(queries_mask, alpha_entropy.dtype))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def get_config(self):
        config = super().get_config()
        scoring = self.scoring.get_config()
        config.update(
            {
                "attention_score": scoring["attention_score"],
                "causality": self.causality,
                "attention_width": scoring["attention_width"],
                "cosine_scale": scoring["cosine_scale"],
                "learn_cosine_scale": scoring["learn_cosine_scale"],
                "hard": self.hard,
                "estimator": self.estimator,
                "temperature": self.temperature,
                "seed": self.seed,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_attention_score(config))
