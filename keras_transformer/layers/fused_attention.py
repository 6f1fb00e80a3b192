"""Fused attention: `keras.ops.dot_product_attention` where it computes what the explicit path does.

`MultiheadAttention` computes attention explicitly by default on a CPU: the float32 scores
`[B, H, T_q, T_k]`, a masked softmax, the weighted sum. With the paper's scaled dot-product score,
no dropout on the attention weights and no weights requested, the same result is one call of
`keras.ops.dot_product_attention`, which each backend can run as one fused kernel (cuDNN or
flash attention on a GPU), keeping the weights out of memory. `attention_implementation` picks:

    "explicit"   always the explicit path
    "fused"      the fused call wherever the layer's call reduces to it (weights requested: the
                 explicit path, which computes them)
    "auto"       the fused call on a GPU from `FUSED_MIN_KEYS` keys (`FUSED_MIN_KEYS_CAUSAL` with
                 causality) and on PyTorch's CPU at every length; the explicit path elsewhere
                 (TensorFlow, JAX on a CPU, short sequences on a GPU), where it was the faster

The thresholds are the crossovers measured on one H200 (JAX, bfloat16, H 8, K 64, forward and
backward): the fused call was 0.47x the explicit path's speed at 64 keys, 1.03-1.09x at 256 and
1.45-1.55x at 1,024 without causality; 0.95-0.99x at 256 and 2.03-2.08x at 1,024 with it. On a
2-core Zen 5 CPU (`python -m benchmarks.speed.fused_attention`, a training step, 64 to 1,024 keys) it
was slower at every length on TensorFlow (0.86-0.92x) and on JAX (0.55-0.98x), where neither is
a fused kernel, and faster at every length on PyTorch (1.04x at 64 keys, 1.38-1.46x at 256,
1.93-1.96x at 1,024), whose CPU kernel is fused. So on a CPU "auto" fuses on PyTorch only.

The mask is passed in full, `[B, 1, T_q, T_k]`: a broadcast `[B, 1, 1, T_k]` key-padding mask
made Keras fall back, with a logged warning, from cuDNN to a slower non-fused path.
"""

import functools
import logging

import keras
from keras import ops

FUSED_MIN_KEYS = 256
FUSED_MIN_KEYS_CAUSAL = 1024

logger = logging.getLogger("keras_transformer")
_logged = set()


@functools.cache  # the backend and its devices do not change in a process; `auto` asks at every call
def fused_device():
    """Where `keras.ops.dot_product_attention` runs a fused kernel, for the backend Keras runs.

    Returns:
        `"gpu"` (JAX on a GPU, PyTorch with CUDA), `"cpu"` (PyTorch on a CPU, whose
        `scaled_dot_product_attention` is a fused CPU kernel), or None: TensorFlow, where Keras
        computes it as an einsum, a softmax and an einsum (the explicit path under another name),
        and JAX on a CPU, where it is not fused either.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return "gpu" if jax.default_backend() in ("gpu", "cuda", "rocm") else None
    if backend == "torch":
        import torch

        return "gpu" if torch.cuda.is_available() else "cpu"
    return None


def fused_pays(key_length, causal):
    """The choice of "auto": whether the fused call is the faster, by `fused_device` and the measured crossovers.

    Args:
        key_length: int or None, the static number of keys T_k (None: not known, explicit on a GPU).
        causal: bool, whether the layer is causal (a later crossover on a GPU).
    """
    device = fused_device()
    if device == "cpu":  # PyTorch on a CPU: faster at every length measured, 64 to 1,024
        return True
    threshold = FUSED_MIN_KEYS_CAUSAL if causal else FUSED_MIN_KEYS
    return device == "gpu" and key_length is not None and key_length >= threshold


def log_choice_once(choice, reason):
    """Log the implementation an attention layer chose, once per `(choice, reason)` in the process."""
    if (choice, reason) not in _logged:
        _logged.add((choice, reason))
        logger.info("MultiheadAttention: %s attention (%s)", choice, reason)


def fused_context(query, key, value, allowed):
    """Scaled dot-product attention through `keras.ops.dot_product_attention`, heads merged.

    Args:
        query: float tensor `[B, H, T_q, K]`, the projected queries split into heads.
        key: float tensor `[B, H, T_k, K]`.
        value: float tensor `[B, H, T_k, K]`.
        allowed: bool tensor broadcastable to `[B, 1, T_q, T_k]`, True where query `i` may attend
            to key `j`.

    Returns:
        float tensor `[B, T_q, H * K]`, the context before the output projection.
    """
    batch, heads, query_length, width = (ops.shape(query)[i] for i in range(4))
    key_length = ops.shape(key)[2]
    mask = ops.broadcast_to(allowed, (batch, 1, query_length, key_length))  # in full: see the module docstring
    context = ops.dot_product_attention(
        ops.transpose(query, (0, 2, 1, 3)),  # (B, T_q, H, K)
        ops.transpose(key, (0, 2, 1, 3)),  # (B, T_k, H, K)
        ops.transpose(value, (0, 2, 1, 3)),
        mask=mask,
        scale=1.0 / float(query.shape[-1]) ** 0.5,
    )  # (B, T_q, H, K)
    return ops.reshape(context, (batch, query_length, heads * width))
