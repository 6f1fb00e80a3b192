"""Hard attention: read exactly one position instead of a weighted average of all of them.

Soft attention reads `context = sum_i alpha_i v_i`, a smooth function of the scores. Hard
attention reads one value `v_z`, with `z` either the highest-scoring position (`"argmax"`) or a
position sampled from the attention distribution, `z ~ Categorical(alpha)` (`"sample"`). The
choice is a step function of the scores, so no gradient reaches the score function through it;
it is trained one of two ways (`ESTIMATORS`):

    "reinforce"  the score-function (REINFORCE) estimator of Williams 1992, used for attention
                 by Mnih et al. 2014 and Xu et al. 2015: for a reward R of the sampled choice,
                 E[(R - b) d/dtheta log alpha_z] = d/dtheta E[R] for any baseline b that does not
                 depend on z. The layer returns log alpha_z; `keras_transformer.layers.reinforce`
                 turns it and the reward into a loss whose gradient is that estimate, with the
                 variance reductions that make it converge.
    "gumbel"     straight-through Gumbel-softmax (Jang et al. 2017, Maddison et al. 2017): the
                 forward pass reads the one-hot choice z = argmax_i(log alpha_i + g_i), g_i
                 Gumbel(0, 1) noise (a sample of Categorical(alpha): the Gumbel-max trick), and
                 the backward pass differentiates the relaxed weights
                 softmax((log alpha + g) / temperature) in its place. Biased, lower variance.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_number

HARD_ATTENTIONS = ("argmax", "sample")
ESTIMATORS = ("reinforce", "gumbel")
# Uniform noise is clipped to [eps, 1 - eps] so that the Gumbel noise -log(-log u) is finite.
_UNIFORM_EPSILON = 1e-7


def check_hard_attention(hard, estimator, temperature):
    """Check the hard attention arguments of `keras_transformer.layers.Attention`.

    Args:
        hard: None (soft attention), `"argmax"` or `"sample"`.
        estimator: `"reinforce"` or `"gumbel"`: how a sampled choice is trained.
        temperature: positive float, the Gumbel-softmax relaxation's temperature.

    Raises:
        ValueError: any of them is not one of its allowed values; the message names the value.
    """
    check_choice("hard", hard, (None, *HARD_ATTENTIONS))
    check_choice("estimator", estimator, ESTIMATORS)
    check_number("temperature", temperature, greater_than=0)


def gumbel_noise(shape, seed):
    """Standard Gumbel noise `-log(-log u)`, `u ~ Uniform(0, 1)`, float32 of `shape`.

    Args:
        shape: the noise's shape.
        seed: a `keras.random.SeedGenerator` (or an int) for `keras.random.uniform`.

    Returns:
        float32 tensor of `shape`.
    """
    uniform = keras.random.uniform(shape, minval=_UNIFORM_EPSILON, maxval=1.0 - _UNIFORM_EPSILON, seed=seed)
    return -ops.log(-ops.log(uniform))


def one_hot_argmax(values):
    """One-hot of the first maximum along the last axis: exactly one 1 per row. `[..., N]` -> float32 `[..., N]`."""
    positions = ops.arange(ops.shape(values)[-1])  # (N,)
    return ops.cast(ops.equal(positions, ops.expand_dims(ops.argmax(values, axis=-1), -1)), "float32")


def hard_weights(scores, allowed, hard, estimator="reinforce", temperature=1.0, seed=None, training=False):
    """One-hot attention weights from masked scores, and the log-probability of the choice.

    Args:
        scores: float32 tensor `[B, T_q, T_k]`, masked (disallowed keys at `MASKED_SCORE`).
        allowed: bool tensor broadcastable to `[B, T_q, T_k]`, True where a query may attend.
        hard: `"argmax"`, or `"sample"` (samples only when `training`; the argmax otherwise).
        estimator: `"reinforce"` (no gradient through the weights) or `"gumbel"` (straight-through
            gradient of the relaxed weights, when sampling).
        temperature: the Gumbel-softmax relaxation's temperature.
        seed: a `keras.random.SeedGenerator` for the sampling noise.
        training: bool, whether to sample (`hard="sample"`).

    Returns:
        `(weights, log_prob)`: float32 `[B, T_q, T_k]`, one 1 per query row at the chosen key
        (all zeros in a row where no key is allowed), and float32 `[B, T_q]`, log alpha of the
        chosen key (0 where no key is allowed).
    """
    log_alpha = ops.log_softmax(scores, axis=-1)  # (B, T_q, T_k)
    allowed = ops.cast(allowed, "float32")
    sampling = hard == "sample" and training
    perturbed = log_alpha + gumbel_noise(ops.shape(scores), seed) if sampling else log_alpha
    weights = one_hot_argmax(perturbed) * allowed  # (B, T_q, T_k)
    if sampling and estimator == "gumbel":
        relaxed = ops.softmax(perturbed / temperature, axis=-1) * allowed  # (B, T_q, T_k)
        weights = weights + (relaxed - ops.stop_gradient(relaxed))  # forward: exactly one-hot; backward: relaxed
    else:
        weights = ops.stop_gradient(weights)
    log_prob = ops.sum(ops.stop_gradient(weights) * log_alpha, axis=-1)  # (B, T_q)
    return weights, log_prob
