"""Greedy decoding, as the tutorial does it: re-run the decoder on the growing output and take
the most likely next token, until every sentence has produced `</s>` or the length limit.

Written with `keras.ops` (`ops.while_loop`), so it traces into a `tf.function` graph for the
SavedModel export. The encoder runs once; the decoder runs once per output token over a fixed
`[B, max_length]` buffer (positions not yet written are padding, which causality and the key
mask hide), which keeps every shape static.
"""

from keras import ops

from keras_transformer.model import TransformerLayers, decode, encode
from keras_transformer.tokenizers import END_ID, PAD_ID, START_ID


def greedy_decode(model, source_ids, max_length):
    """Translate a batch of token ids greedily.

    Args:
        model: a model from `build_transformer`.
        source_ids: int tensor `[B, S]`, 0 = padding.
        max_length: int, most tokens to generate per sentence, `</s>` included.

    Returns:
        int32 tensor `[B, max_length]`: generated ids; after a sentence's `</s>`, padding (0).
    """
    source_ids = ops.cast(source_ids, "int32")
    batch = ops.shape(source_ids)[0]
    # TensorFlow's oneDNN CPU convolution mishandles an empty batch (it returns the input's shape),
    # so an empty batch never reaches the model: it gets an empty result.
    return ops.cond(
        batch > 0,
        lambda: _greedy_decode(model, source_ids, max_length),
        lambda: ops.zeros((batch, max_length), dtype="int32"),
    )


def _greedy_decode(model, source_ids, max_length):
    layers = TransformerLayers.from_model(model)
    memory, source_mask = encode(layers, source_ids, training=False)  # (B, S, D), (B, S)
    batch = ops.shape(source_ids)[0]
    # tokens[:, 0] is <s>; step t writes tokens[:, t + 1].
    tokens = ops.pad(ops.full((batch, 1), START_ID, dtype="int32"), ((0, 0), (0, max_length)))  # (B, L + 1)
    finished = ops.zeros((batch,), dtype="bool")

    def keep_going(step, tokens, finished):
        return ops.logical_and(step < max_length, ops.logical_not(ops.all(finished)))

    def next_token(step, tokens, finished):
        logits = decode(layers, tokens[:, :max_length], memory, source_mask, training=False)  # (B, L, V)
        step_logits = ops.take(logits, step, axis=1)  # (B, V)
        token = ops.cast(ops.argmax(step_logits, axis=-1), "int32")  # (B,)
        token = ops.where(finished, PAD_ID, token)
        column = ops.cast(ops.equal(ops.arange(max_length + 1), step + 1), "int32")  # (L + 1,)
        tokens = tokens + column[None, :] * token[:, None]
        return step + 1, tokens, ops.logical_or(finished, ops.equal(token, END_ID))

    _, tokens, _ = ops.while_loop(keep_going, next_token, (ops.convert_to_tensor(0), tokens, finished))
    return tokens[:, 1:]
