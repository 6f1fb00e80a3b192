"""What both workers of train_throughput.py build alike: the model config, batches, models, model FLOPs.

`model_config` is the `ModelConfig` of both models; `synthetic_batches` the seeded batches every
worker makes for itself; `build_model` the model of a worker: ours, keras-hub's (peers.py) or the
shared part (`build_shared_part`, what a step of either model computes besides its blocks).

Model-FLOPs utilisation (MFU) = model FLOPs per second / the machine's measured fp32 matmul
peak (the median rate of `--peak-size`^3 matmuls, measured first, by the parent, alone). Model
FLOPs per training step, on the padded batch [B, S] -> [B, T] with R real target tokens, are
3x the forward FLOPs (the backward pass is twice the forward):
    forward = B * ( N * [ S * (8 D^2 + 4 D F) + 4 S^2 D ]                          encoder
                  + N * [ T * (12 D^2 + 4 D F) + 4 S D^2 + 4 T^2 D + 4 T S D ]     decoder
                  ) + R * 2 D V                                                      logits
counting 2 FLOPs per multiply-add of the matmuls only (projections, attention scores and
weighted sums, feed-forward, logits); embeddings, softmax, LayerNorm and the loss are not
counted. The blocks are counted over the padded batch (attention mixes the positions of a
row, so a batched model computes them all), the logits only at the real target positions
(each position's are its own; those at padding are thrown away by the loss, and our model
does not compute them). R is the mean over a round's batches. Both models are given the same
model FLOPs, so their MFU ratio equals their speed ratio.
The bf16 matmul peak is printed too, as the ceiling of a mixed_bfloat16 run.
"""

import sys
from pathlib import Path

import keras
import numpy as np
from keras import ops

from keras_transformer.config import preset
from keras_transformer.data.special_tokens import END_ID, START_ID

MODELS = ("ours", "keras-hub")
SHARED = "shared"  # not a model: the part of a step that both models compute alike
FIRST_REGULAR_ID = END_ID + 1


def model_config(args):
    """The `ModelConfig` of both models: `--preset` at vocabulary `--vocab` and length `--length`."""
    return preset(
        args.preset,
        source_vocab_size=args.vocab,
        target_vocab_size=args.vocab,
        max_source_len=args.length,
        max_target_len=args.length,
    )


def train_step_flops(config, batch, source_length, target_length, target_tokens=None, blocks=True):
    """Model FLOPs of one training step on a padded batch.

    That is 3x the forward matmul FLOPs (see the module docstring for the formula): the blocks
    over the padded `[batch, length]`, the logits at `target_tokens` real target positions
    (default: every position, `batch * target_length`); with `blocks=False`, the logits' only
    (the shared part).
    """
    d, f, n, v = config.d_model, config.d_ff, config.num_blocks if blocks else 0, config.target_vocab_size
    s, t = source_length, target_length
    target_tokens = batch * t if target_tokens is None else target_tokens
    encoder = n * (s * (8 * d * d + 4 * d * f) + 4 * s * s * d)
    decoder = n * (t * (12 * d * d + 4 * d * f) + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d)
    logits = target_tokens * 2 * d * v
    return 3 * (batch * (encoder + decoder) + logits)


def round_target_tokens(args, batches):
    """The real target tokens (labels that are not padding) of one round's `--steps` steps."""
    return sum(int(np.count_nonzero(batches[i % len(batches)][1])) for i in range(args.steps))


def target_tokens_per_step(args):
    """The mean real target tokens of a step of a round (R of the FLOP formula)."""
    return round_target_tokens(args, synthetic_batches(args)) / args.steps


def synthetic_batches(args):
    """The synthetic training batches, the same for every worker (seeded).

    Each sentence has `L // 2 .. L` real tokens; the target input starts with `<s>` and the
    output ends with `</s>`, as the pipeline makes them.

    Returns:
        `--batches` batches `((source_ids, target_in_ids), target_out_ids)`, int32 `[B, L]` each.
    """
    rng = np.random.default_rng(args.seed)
    batch, length = args.batch_size, args.length
    positions = np.arange(length)[None, :]
    batches = []
    for _ in range(args.batches):
        source = rng.integers(FIRST_REGULAR_ID, args.vocab, size=(batch, length), dtype="int32")
        source *= positions < rng.integers(length // 2, length + 1, size=(batch, 1))
        words = rng.integers(FIRST_REGULAR_ID, args.vocab, size=(batch, length), dtype="int32")
        target_length = rng.integers(length // 2, length + 1, size=(batch, 1))  # </s> included
        target_out = np.where(positions < target_length - 1, words, 0)
        target_out = np.where(positions == target_length - 1, END_ID, target_out).astype("int32")
        target_in = np.where(positions < target_length, np.roll(words, 1, axis=1), 0)
        target_in[:, 0] = START_ID
        batches.append(((source, target_in.astype("int32")), target_out))
    return batches


def build_shared_part(config):
    """The shared part: what a step of either model computes besides its blocks.

    That is both embedding tables, the logits projection, and (compiled) the loss and Adam over
    those weights. Our model's layers before and after its blocks: source `[B, S]` ids ->
    `TokenEmbedding` -> `PositionalEncoding` -> dropout, whose mean over time is added to every
    target position (so the table gets a gradient); target `[B, T]` ids -> the same -> float32
    `Dense(V)` logits `[B, T, V]`.
    """
    from keras_transformer.layers import PositionalEncoding, TokenEmbedding

    def embed(ids, vocab_size, side):
        hidden = TokenEmbedding(vocab_size, config.d_model, name=f"{side}_embedding")(ids)  # (B, L, D)
        hidden = PositionalEncoding(name=f"{side}_positions")(hidden)
        return keras.layers.Dropout(config.dropout_rate, name=f"{side}_dropout")(hidden)

    source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in_ids = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    source = embed(source_ids, config.source_vocab_size, "source")
    hidden = embed(target_in_ids, config.target_vocab_size, "target") + ops.mean(source, axis=1, keepdims=True)
    logits = keras.layers.Dense(config.target_vocab_size, dtype="float32", name="logits")(hidden)  # (B, T, V)
    return keras.Model([source_ids, target_in_ids], logits, name="shared_part")


def build_model(name, config):
    """The uncompiled model of worker `name`: ours, keras-hub's or the shared part."""
    if name == SHARED:
        return build_shared_part(config)
    if name == "ours":
        from keras_transformer.models import build_transformer

        return build_transformer(config)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peers import KerasHubTransformer

    return KerasHubTransformer(config).model
