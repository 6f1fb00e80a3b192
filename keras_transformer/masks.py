"""Padding and causality masks: pure functions on `keras.ops`.

One convention: a mask is True where a position holds a real token (may be attended to) and
False at padding (or, for causality, in the future).

The tutorial derives padding masks from the tensors themselves (`sign_mask`): a position is
padding when its vector is all zeros (the document's code, rule "abs_sum") or sums to zero
(Kyubyong's repository, rule "sum"). That only holds while every sublayer keeps padding rows at
exactly zero, which the layers of this package guarantee by default (see
`keras_transformer.layers`). Masks built from token ids (`padding_mask`) need no such care and
take precedence wherever both are available.
"""

from keras import ops

# The tutorial's large negative score for masked positions: exp() of it is exactly 0 in float32.
MASKED_SCORE = -(2.0**32) + 1.0
# The rules of `sign_mask`: the document's code's, and Kyubyong's repository's.
SIGN_MASK_RULES = ("abs_sum", "sum")


def sign_mask(inputs, rule="abs_sum"):
    """The tutorial's key and query masks: True where `inputs[b, t, :]` is not padding by `rule`.

    `rule="abs_sum"` is the document's code, `sign(reduce_sum(abs(x), axis=-1))`: padding only
    for an all-zero vector. `rule="sum"` is Kyubyong's repository, `sign(abs(reduce_sum(x,
    axis=-1)))`, which also calls padding a real vector whose entries happen to sum to zero (as
    those of LayerNorm's output do, up to rounding, while its `beta` is zero). The sum is taken
    in float32 whatever the dtype of `inputs`.

    Args:
        inputs: float tensor `[B, T, D]`.
        rule: `"abs_sum"` or `"sum"`.

    Returns:
        bool tensor `[B, T]`.
    """
    if rule == "sum":
        return ops.not_equal(ops.sum(ops.cast(inputs, "float32"), axis=-1), 0)
    return ops.greater(ops.sum(ops.abs(inputs), axis=-1), 0)


def padding_mask(token_ids, pad_id=0):
    """Mask from token ids: True where `token_ids != pad_id`. `[B, T]` int -> `[B, T]` bool."""
    return ops.not_equal(token_ids, pad_id)


def causal_mask(query_length, key_length):
    """Lower-triangular (`tril`) mask: query `i` may attend to keys `0..i`. Returns `[T_q, T_k]` bool."""
    query_positions = ops.expand_dims(ops.arange(query_length), 1)  # (T_q, 1)
    key_positions = ops.expand_dims(ops.arange(key_length), 0)  # (1, T_k)
    return ops.greater_equal(query_positions, key_positions)  # (T_q, T_k)


def zero_padding_rows(outputs, mask):
    """Multiply `outputs [B, T, D]` by `mask [B, T]`, so padding rows are exactly zero."""
    return outputs * ops.cast(ops.expand_dims(mask, -1), outputs.dtype)


def attention_masks(queries, keys, queries_mask=None, keys_mask=None, causality=False, rule="abs_sum"):
    """The padding and causality masks of one attention call, in the one convention (True = may attend).

    Args:
        queries: float tensor `[B, T_q, D_q]`.
        keys: float tensor `[B, T_k, D_k]`.
        queries_mask: optional bool tensor `[B, T_q]`; None for the sign mask of `queries`.
        keys_mask: optional bool tensor `[B, T_k]`; None for the sign mask of `keys`.
        causality: bool, whether query `i` may only attend to keys `0..i` (`tril`).
        rule: the `sign_mask` rule of the masks not given.

    Returns:
        `(queries_mask, allowed)`: bool `[B, T_q]`, True at real queries, and bool `[B, 1, 1, T_k]`
        (`[B, 1, T_q, T_k]` with causality), True where a query may attend to a key.
    """
    queries_mask = sign_mask(queries, rule) if queries_mask is None else ops.cast(queries_mask, "bool")
    keys_mask = sign_mask(keys, rule) if keys_mask is None else ops.cast(keys_mask, "bool")
    allowed = keys_mask[:, None, None, :]  # (B, 1, 1, T_k)
    if causality:
        future_hidden = causal_mask(ops.shape(queries)[1], ops.shape(keys)[1])  # (T_q, T_k)
        allowed = ops.logical_and(allowed, future_hidden[None, None, :, :])  # (B, 1, T_q, T_k)
    return queries_mask, allowed
