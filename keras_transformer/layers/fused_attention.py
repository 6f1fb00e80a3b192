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
                 causality), the explicit path elsewhere: on a CPU, and for short sequences, where
                 it was faster

The thresholds are the crossovers measured on one H200 (JAX, bfloat16, H 8, K 64, forward and
backward): the fused call was 0.47x the explicit path's speed at 64 keys, 1.03-1.09x at 256 and
1.45-1.55x at 1,024 without causality; 0.95-0.99x at 256 and 2.03-2.08x at 1,024 with it. On a
2-core Zen 5 CPU (`benchmarks/fused_attention_speed.py`, a training step, 64 to 1,024 keys) it
was slower at every length: 0.86-0.92x on TensorFlow, 0.55-0.98x on JAX. So "auto" stays explicit
on a CPU.

The mask is passed in full, `[B, 1, T_q, T_k]`: a broadcast `[B, 1, 1, T_k]` key-padding mask
made Keras fall back, with a logged warning, from cuDNN to a slower non-fused path.
"""

import logging

import keras
from keras import ops

FUSED_MIN_KEYS = 256
FUSED_MIN_KEYS_CAUSAL = 1024

logger = logging.getLogger("keras_transformer")
_logged = set()


def fused_kernel_available():
    """Whether `keras.ops.dot_product_attention` can run a fused kernel: JAX on a GPU, or PyTorch with CUDA.

    Keras's TensorFlow backend computes it as an einsum, a softmax and an einsum, the explicit
    path under another name, so there it is never chosen by "auto".
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() in ("gpu", "cuda", "rocm")
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    return False


def fused_pays(key_length, causal):
    """The choice of "auto": a fused kernel exists and `key_length` (a static int, or None) reaches the crossover."""
    threshold = FUSED_MIN_KEYS_CAUSAL if causal else FUSED_MIN_KEYS
    return key_length is not None and key_length >= threshold and fused_kernel_available()


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
