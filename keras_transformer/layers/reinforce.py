"""REINFORCE, the score-function estimator, and what makes it converge.

A model that samples a discrete choice `z ~ p_theta` (where to look: one key of hard attention,
a glimpse location) cannot backpropagate through it. REINFORCE (Williams 1992) estimates the
gradient of the expected reward from samples:

    d/dtheta E[R] = E[(R - b) d/dtheta log p_theta(z)]

for any baseline `b` that does not depend on `z`. The estimate is unbiased but can be so noisy
that training crawls; `Reinforce` holds the variance reductions the literature uses, each a
setting, so that one implementation serves every model that samples:

- **a baseline** (`baseline`):
  - `"none"`: R itself, the plain estimator.
  - `"learned"`: one trainable scalar b, regressed on R (`(R - b)^2`).
  - `"value"`: an input-dependent b(x) from a value head of the caller's, regressed on R.
  - `"batch_mean"`: for each example, the mean reward of the other examples of the batch.
  - `"leave_one_out"`: for each of `samples >= 2` choices drawn for the same input, the mean
    reward of the other choices of that input (Kool et al. 2019, "Buy 4 REINFORCE samples, get a
    baseline for free"). It compares choices made for the same input, so what the input itself
    makes easy or hard cancels.
- **several samples per input** (`samples`): the estimate averages over them.
- **reward normalisation** (`normalize`): the advantages `R - b` divided by their standard
  deviation over the batch (after subtracting their mean), so the step does not depend on the
  reward's scale.
- **an entropy bonus** (`entropy_weight`): `-beta H(p_theta)` added to the loss, which keeps the
  policy from collapsing on one choice before it has learned.

The loss `Reinforce.loss` returns is a surrogate: its value means nothing, its gradient is the
estimate (minus, so that minimising it climbs the expected reward) plus the baseline's
regression and the entropy bonus. Rewards and baselines are constants to the estimate
(`stop_gradient`).
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number

BASELINES = ("none", "learned", "value", "batch_mean", "leave_one_out")
# Added to the standard deviation of the advantages before dividing by it (`normalize`).
_NORMALIZE_EPSILON = 1e-6


def reinforce_loss(reward, log_prob, baseline=0.0):
    """The REINFORCE surrogate loss of a sampled choice, with a baseline.

    Its gradient is `-(R - b) d/dtheta log p(z)`, minus the score-function estimate of
    `d/dtheta E[R]`: minimising it climbs the expected reward. Reward and baseline are
    constants to it (`stop_gradient`); the baseline changes the estimate's variance, not its
    expectation.

    Args:
        reward: float tensor `[B]` (or any shape of `log_prob`), the reward of each choice.
        log_prob: float tensor of the same shape, log p(z) of each choice (differentiable).
        baseline: float scalar or tensor broadcastable to `reward`.

    Returns:
        float32 scalar, the mean of `-(R - b) log p(z)`.
    """
    advantage = ops.stop_gradient(ops.cast(reward, "float32") - ops.cast(baseline, "float32"))
    return -ops.mean(advantage * ops.cast(log_prob, "float32"))


def leave_one_out_baseline(rewards, axis=0):
    """For each reward, the mean of the others along `axis`: a baseline that does not depend on its own choice.

    Args:
        rewards: float tensor, e.g. `[S, B]`: S choices drawn for each of B inputs (axis 0).
        axis: int, the axis of the choices that share a baseline.

    Returns:
        float32 tensor of `rewards`' shape: `(sum_j R_j - R_i) / (S - 1)` along `axis`; 0 where
        `axis` has one element (no other choice: no baseline).
    """
    rewards = ops.cast(rewards, "float32")
    others = ops.maximum(ops.cast(ops.shape(rewards)[axis], "float32") - 1.0, 1.0)
    return (ops.sum(rewards, axis=axis, keepdims=True) - rewards) / others


def entropy(log_probs, axis=-1):
    """The entropy `-sum p log p` of distributions given as log-probabilities.

    Args:
        log_probs: float tensor `[..., N]` of log-probabilities along `axis` (masked entries may
            hold a very negative number: their `p log p` is 0).
        axis: int, the distribution's axis.

    Returns:
        float32 tensor `[...]`, in nats.
    """
    log_probs = ops.cast(log_probs, "float32")
    return -ops.sum(ops.exp(log_probs) * log_probs, axis=axis)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Reinforce:
    """The settings of a REINFORCE estimator, and its loss.

    The defaults (the batch mean, one sample) are the cheapest setting that learned the lookup
    task of `keras_transformer.models.lookup` in every seed measured; leave-one-out over 4
    samples learned it in the fewest steps (docs/benchmarks/hard-attention.md).

    Args:
        baseline: one of `BASELINES` (see the module's docstring). `"learned"` and `"value"`
            need the caller's baseline tensor in `loss`; `"leave_one_out"` needs `samples >= 2`.
        samples: int S >= 1, choices the caller draws per input in training.
        normalize: bool, divide the advantages by their standard deviation over the batch
            after subtracting their mean.
        entropy_weight: float beta >= 0, the weight of the entropy bonus.

    Raises:
        ValueError: an unknown baseline, `samples` not a positive int, `"leave_one_out"` with
            `samples < 2`, or a negative `entropy_weight`; the message names the value.

    Example:
    >>> estimator = Reinforce("leave_one_out", samples=2)
    >>> rewards = keras.ops.convert_to_tensor([[1.0], [3.0]])  # (S, B): two reads of one input
    >>> keras.ops.convert_to_numpy(estimator.advantages(rewards)).ravel().tolist()  # R - the other's R
    [-2.0, 2.0]
    """

    def __init__(self, baseline="batch_mean", samples=1, normalize=False, entropy_weight=0.0):
        check_choice("baseline", baseline, BASELINES)
        check_int("samples", samples, 1)
        if baseline == "leave_one_out" and samples < 2:
            raise ValueError(f"`baseline='leave_one_out'` needs `samples` of at least 2. Received: samples={samples}")
        check_number("entropy_weight", entropy_weight, 0)
        self.baseline = baseline
        self.samples = samples
        self.normalize = bool(normalize)
        self.entropy_weight = float(entropy_weight)

    @property
    def needs_baseline(self):
        """Whether `loss` takes the caller's baseline tensor (`"learned"` or `"value"`)."""
        return self.baseline in ("learned", "value")

    def advantages(self, rewards, baseline=None):
        """The advantages `R - b` the estimate weighs each choice's log-probability by, as constants.

        Args:
            rewards: float tensor `[S, B]`, the reward of each of S choices for B inputs.
            baseline: the caller's baseline (`"learned"`: a scalar; `"value"`: `[B]` or
                `[S, B]`); ignored by the other baselines.

        Returns:
            float32 `[S, B]`, with no gradient.
        """
        rewards = ops.cast(rewards, "float32")
        if self.baseline == "none":
            advantages = rewards
        elif self.baseline == "batch_mean":
            flat = leave_one_out_baseline(ops.reshape(rewards, (-1,)), axis=0)  # (S * B,)
            advantages = rewards - ops.reshape(flat, ops.shape(rewards))
        elif self.baseline == "leave_one_out":
            advantages = rewards - leave_one_out_baseline(rewards, axis=0)
        else:
            advantages = rewards - ops.cast(self._checked(baseline), "float32")
        if self.normalize:
            advantages = advantages - ops.mean(advantages)
            advantages = advantages / (ops.std(advantages) + _NORMALIZE_EPSILON)
        return ops.stop_gradient(advantages)

    def loss(self, rewards, log_probs, baseline=None, entropies=None):
        """The surrogate loss: the estimate, the baseline's regression and the entropy bonus.

        Args:
            rewards: float tensor `[S, B]`, the reward of each choice (a constant to the loss).
            log_probs: float tensor `[S, B]`, log p(z) of each choice (differentiable).
            baseline: the caller's baseline tensor, for `"learned"` (a scalar) and `"value"`
                (`[B]`); it is trained by the mean of `(R - b)^2`.
            entropies: float tensor `[B]` (or `[S, B]`), the entropy of each input's
                distribution (`entropy`); needed when `entropy_weight > 0`.

        Returns:
            float32 scalar.

        Raises:
            ValueError: a needed `baseline` or `entropies` is missing.
        """
        rewards = ops.stop_gradient(ops.cast(rewards, "float32"))
        total = reinforce_loss(self.advantages(rewards, baseline), log_probs)
        if self.needs_baseline:
            total = total + ops.mean(ops.square(rewards - ops.cast(baseline, "float32")))
        if self.entropy_weight > 0:
            if entropies is None:
                raise ValueError("`entropy_weight > 0` needs the distribution's `entropies`.")
            total = total - self.entropy_weight * ops.mean(ops.cast(entropies, "float32"))
        return total

    def _checked(self, baseline):
        if baseline is None:
            raise ValueError(f"`baseline={self.baseline!r}` needs the caller's baseline tensor in `loss`.")
        return baseline

    def get_config(self):
        return {
            "baseline": self.baseline,
            "samples": self.samples,
            "normalize": self.normalize,
            "entropy_weight": self.entropy_weight,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, Reinforce) and self.get_config() == other.get_config()

    def __repr__(self):
        settings = ", ".join(f"{name}={value!r}" for name, value in self.get_config().items())
        return f"Reinforce({settings})"
