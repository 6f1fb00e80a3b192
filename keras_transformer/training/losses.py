"""The tutorial's loss: label-smoothed cross-entropy over the real target tokens only.

`MaskedLabelSmoothedLoss` is the loss `model.compile` takes (paper section 5.4): label smoothing
`epsilon`, averaged over the positions whose label is not padding. `smoothed_cross_entropy`
computes the loss of every position from the logits with its gradient written out, without a
tensor of smoothed targets or log-probabilities; `smoothed_cross_entropy_forward` is its forward
pass, which `keras_transformer.training.packed` shares.
"""

import keras
from keras import ops

from keras_transformer.checks import check_rate
from keras_transformer.data.special_tokens import PAD_ID


def smoothed_cross_entropy_forward(labels, logits, epsilon, mean_logit):
    """The loss of `smoothed_cross_entropy`, with what its gradient needs.

    Args:
        labels: int32 tensor `[...]` of target ids.
        logits: float32 tensor `[..., V]`.
        epsilon: float label smoothing in [0, 1).
        mean_logit: float32 tensor `[...]`, the mean of the logits over V (the caller may have
            it more cheaply than a pass over them).

    Returns:
        `(loss [...], exponentials [..., V], total [..., 1])`: `exp(logits - max)` and its sum.
    """
    top = ops.max(logits, axis=-1, keepdims=True)  # (..., 1)
    exponentials = ops.exp(logits - top)  # (..., V)
    total = ops.sum(exponentials, axis=-1, keepdims=True)  # (..., 1)
    gold = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]  # (...)
    loss = (ops.log(total) + top)[..., 0] - (1.0 - epsilon) * gold - epsilon * mean_logit
    return loss, exponentials, total


def smoothed_cross_entropy(labels, logits, epsilon):
    """Label-smoothed cross-entropy of each position, with its gradient written out.

    `(1 - eps) * NLL(y) + eps * mean(-log p)`, computed as
    `logsumexp(z) - (1 - eps) * z[y] - eps * mean(z)` for logits `z`, without a tensor of
    log-probabilities or smoothed targets. Its gradient is `softmax(z) - (1 - eps) * one_hot(y) -
    eps / V`, computed in two passes over `[B, T, V]` from the exponentials the forward pass
    made, `softmax(z) - eps / V`, then corrected at the gold positions only (one value per
    position, gathered and scattered back), never building a `[B, T, V]` one-hot or mask. Left to
    automatic differentiation, the same formula costs several more passes (every use of `z` gets
    its own gradient, then they are summed): at the small preset that made a training step about
    1.18x slower. Over a large vocabulary these passes, not the model's matmuls, dominate a small
    model's step.

    Args:
        labels: int32 tensor `[B, T]` of target ids.
        logits: float32 tensor `[B, T, V]`.
        epsilon: float label smoothing in [0, 1).

    Returns:
        float32 tensor `[B, T]`, the loss of every position (padding included; the caller masks).
    """
    vocab_size = ops.shape(logits)[-1]

    @ops.custom_gradient
    def cross_entropy(logits):
        loss, exponentials, total = smoothed_cross_entropy_forward(labels, logits, epsilon, ops.mean(logits, axis=-1))

        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # (B, T); the PyTorch backend passes it by name
            per_row = upstream[..., None]  # (B, T, 1)
            smoothed = exponentials * (per_row / total) - per_row * (epsilon / ops.cast(vocab_size, "float32"))
            # The gold positions in the flattened [B * T * V] gradient; `% V` wraps negative labels
            # as `take_along_axis` does above.
            flat_labels = ops.reshape(labels, (-1,)) % vocab_size  # (B * T,)
            gold_index = ops.arange(ops.shape(flat_labels)[0], dtype="int32") * vocab_size + flat_labels
            flat = ops.reshape(smoothed, (-1,))  # (B * T * V,), free
            gold = ops.take(flat, gold_index) - ops.reshape(upstream, (-1,)) * (1.0 - epsilon)
            return ops.reshape(ops.scatter_update(flat, gold_index[:, None], gold), ops.shape(logits))

        return loss, gradient

    return cross_entropy(logits)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLabelSmoothedLoss(keras.losses.Loss):
    """Label-smoothed cross-entropy over real target tokens (paper section 5.4).

    The tutorial's loss: targets `y_smoothed = (1 - epsilon) * one_hot(y) + epsilon / V`, softmax
    cross-entropy with the logits, averaged over the positions where `y != 0` (`istarget`).
    Computed without materialising the smoothed targets, by `smoothed_cross_entropy`.

    Padding positions (label 0) are ignored, so extra trailing padding leaves the loss unchanged,
    whether or not Keras also passes the logits' padding mask. Each real token's loss is weighted
    by `1 / (number of real tokens in the batch)` and the reduction is a sum, which gives the
    mean over real tokens.

    Args:
        label_smoothing: float epsilon in [0, 1).

    Call arguments:
        y_true: int tensor `[B, T]` of target ids, 0 = padding.
        y_pred: float tensor `[B, T, V]` of logits.
    """

    def __init__(self, label_smoothing=0.1, name="masked_label_smoothed_loss", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        check_rate("label_smoothing", label_smoothing)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        per_token = smoothed_cross_entropy(labels, ops.cast(y_pred, "float32"), self.label_smoothing)  # (B, T)
        is_target = ops.cast(ops.not_equal(labels, PAD_ID), "float32")  # (B, T)
        return per_token * is_target / ops.maximum(ops.sum(is_target), 1.0)

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"label_smoothing": self.label_smoothing})
        return config
