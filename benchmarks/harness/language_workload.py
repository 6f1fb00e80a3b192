"""The work the LM studies give both libraries alike: model sizes, batches, and their model FLOPs.

Both workers build their models from the same `LanguageModelConfig` (`model_config`) and make the
same seeded batches themselves (`decoder_batches`, `encoder_batches`; the docstring of
`benchmarks.language_models.against_keras_hub` describes them); `checksum` lets the parent check
that the two made the same ones, and `round_tokens` counts what a round trains on.

Model-FLOPs utilisation (MFU) of training = model FLOPs per step / step seconds / the float32
matmul peak that the `ours` worker measures first, alone (the best rate of `--peak-size`^3
matmul chains); "CPU MFU" is the same per CPU-second: model FLOPs per CPU-second of a step /
the matmuls' median FLOP per CPU-second, which other jobs on the machine hardly change. Model FLOPs
per training step on a batch [B, T], 3x the forward (the backward pass is twice the forward):
    forward = B * ( N * [ T * (8 D^2 + 4 D F) + 4 T^2 D ] + T * 2 D V )
counting 2 FLOPs per multiply-add of the matmuls only (Q, K, V and output projections, the
T x T attention scores and weighted sums, the feed-forward, the tied logits); embeddings,
softmax, LayerNorm, the loss are not counted. The causal mask saves no matmul work in either
model, so the decoder and the encoder have the same formula, and both libraries the same FLOPs.
"""

import hashlib

import numpy as np

from keras_transformer.config import language_model_preset

MODELS = ("ours", "keras-hub")
KINDS = ("decoder", "encoder")
FIRST_PIECE_ID = 5  # ids 0-4: <pad>, <unk>, <s>, </s>, <mask>


def max_length(args):
    """The longest sequence the models see: a training row or a prompt with its new tokens."""
    return max(args.length, args.prompt_length + args.new_tokens)


def model_config(args, kind):
    """Our `LanguageModelConfig` of `kind`; the keras-hub models are built from the same one."""
    return language_model_preset(
        args.preset,
        kind,
        vocab_size=args.vocab_size,
        max_length=max_length(args),
        learned_positions=args.learned_positions,
        tie_embeddings=True,
    )


def train_step_flops(config, batch, length):
    """Model FLOPs of one training step on a `[batch, length]` batch (the module docstring's formula)."""
    d, f, n, v, t = config.d_model, config.d_ff, config.num_blocks, config.vocab_size, length
    forward = batch * (n * (t * (8 * d * d + 4 * d * f) + 4 * t * t * d) + t * 2 * d * v)
    return 3 * forward


def round_tokens(batches, steps):
    """Real input tokens and predicted tokens of a round: `steps` batches, cycling from the first.

    Args:
        batches: `(inputs, labels)` int arrays `[B, T]` (0 = padding; label 0 = not predicted).
        steps: batches in the round.

    Returns:
        `(input_tokens, predicted_tokens)`: non-zero inputs and non-zero labels over the round.
    """
    chosen = [batches[i % len(batches)] for i in range(steps)]
    return (
        sum(int(np.count_nonzero(inputs)) for inputs, _ in chosen),
        sum(int(np.count_nonzero(labels)) for _, labels in chosen),
    )


def decoder_batches(args):
    """Packed causal-LM windows: `--batches` of `(inputs, labels)` int32 `[B, T]`, labels shifted by one."""
    rng = np.random.default_rng(args.seed)
    batches = []
    for _ in range(args.batches):
        window = rng.integers(FIRST_PIECE_ID, args.vocab_size, size=(args.batch_size, args.length + 1), dtype="int32")
        batches.append((window[:, :-1], window[:, 1:]))
    return batches


def encoder_batches(args):
    """Masked-LM batches of `masked_lm_dataset`: `--batches` of `(inputs, labels)` int32 `[B, T]`.

    The texts are seeded random pieces, `T // 2 - 2 .. T - 2` of them, so that rows are
    `T // 2 .. T` tokens with `<s>` and `</s>`.
    """
    import tensorflow as tf

    from keras_transformer.data.masked_lm_batches import masked_lm_dataset

    rng = np.random.default_rng(args.seed + 1)
    count = args.batches * args.batch_size
    lengths = rng.integers(max(args.length // 2 - 2, 1), args.length - 1, size=count)
    pieces = rng.integers(FIRST_PIECE_ID, args.vocab_size, size=int(lengths.sum()), dtype="int32")
    texts = tf.RaggedTensor.from_row_lengths(pieces, lengths)
    dataset = masked_lm_dataset(texts, args.length, args.batch_size, args.vocab_size, seed=args.seed)
    return [(inputs.numpy(), labels.numpy()) for inputs, labels in dataset.take(args.batches)]


def checksum(batches):
    """A short digest of batches, to check that both workers train on the same ones."""
    digest = hashlib.sha256()
    for inputs, labels in batches:
        digest.update(np.ascontiguousarray(inputs, dtype="int32").tobytes())
        digest.update(np.ascontiguousarray(labels, dtype="int32").tobytes())
    return digest.hexdigest()[:16]
