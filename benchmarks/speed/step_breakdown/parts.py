"""An op's phase (forward, backward, update) and part of the model, from its path of names (JAX's or TensorFlow's)."""

import re

# TensorFlow's graph optimizer (Grappler) names the ops it rewrites by its passes, e.g.
# ".../ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul".
GRAPPLER_SCOPE = re.compile(r"[A-Z]\w*Optimizer/")
OPTIMIZER_SCOPE = re.compile(r"adam|optimizer|sgd", re.IGNORECASE)  # the training's optimizer


def _updates_weights(op_name):
    """Whether an op belongs to the training's optimizer (Grappler's pass names set aside)."""
    return bool(OPTIMIZER_SCOPE.search(GRAPPLER_SCOPE.sub("", op_name)))


def phase_of(op_name):
    """An op's phase, from its path: forward, backward (`transpose(jvp(...))`), update (the optimizer) or other."""
    if _updates_weights(op_name):
        return "update"
    if "transpose(jvp(" in op_name:
        return "backward"
    if "jvp(" in op_name:
        return "forward"
    return "other"


def part_of(op_name):
    """The part of the model an op belongs to, from its path (the study's docstring lists them)."""
    if _updates_weights(op_name):
        return "optimizer"
    path = re.sub(r"(?:transpose\()?jvp\(([^()]*)\)\)?", r"\1", GRAPPLER_SCOPE.sub("", op_name).lower())
    if "dropout" in path:
        return "dropout"
    if "layer_norm" in path:
        return "layer norm"
    if "attention" in path:
        if re.search(r"(query|key|value|output)_dense", path):
            return "attention projections"
        if "cross_attention" in path:
            return "attention core: cross"
        if "decoder_block" in path:
            return "attention core: decoder self (causal)"
        if "encoder_block" in path:
            return "attention core: encoder self"
        return "attention core: self (causal, decoder-only LM)"  # its blocks are block_0, block_1, ...
    if "feed_forward" in path:
        return "feed-forward"
    if "embedding" in path or "positions" in path:
        return "embeddings"
    if "logits" in path or "loss" in path:
        return "logits and loss"
    return "other"
