"""The training workload of the speed studies: model configs, synthetic batches, models, model FLOPs.

`benchmarks.speed.train_throughput` races our model against keras-hub's on it, and
`benchmarks.speed.step_breakdown` breaks our model's step down on the same configs, batches and
FLOPs. Two tasks (`--task`):
    translation  our encoder-decoder Transformer against keras-hub's `TransformerEncoder` and
                 `TransformerDecoder` (`peers.KerasHubTransformer`), on padded sentence pairs
    lm           our decoder-only language model against keras-hub's `GPT2Backbone` with the tied
                 head of `GPT2CausalLM` (`language_peers`), on packed causal-LM windows

`model_config` is the config of both models of a task; `synthetic_batches` the seeded batches every
worker makes for itself; `build_model` the model of a worker: ours, keras-hub's or, for the
translation task, the shared part (`build_shared_part`, what a step of either model computes
besides its blocks). `at_length` gives the flags of one length of a sweep (`--length` 64 256 1024
with `--tokens-per-step`: the batch size at each length).

Model-FLOPs utilisation (MFU) = model FLOPs per second / the machine's measured matmul peak (the
median rate of `--peak-size`^3 matmuls, measured first, by the parent, alone: `matmul_peak`):
against the float32 peak, and against the peak of the precision's compute dtype (bfloat16 for
mixed_bfloat16). Model FLOPs per training step of the translation task, on the padded batch
[B, S] -> [B, T] with R real target tokens, are 3x the forward FLOPs (the backward pass is twice
the forward):
    forward = B * ( N * [ S * (8 D^2 + 4 D F) + 4 S^2 D ]                          encoder
                  + N * [ T * (12 D^2 + 4 D F) + 4 S D^2 + 4 T^2 D + 4 T S D ]     decoder
                  ) + R * 2 D V                                                      logits
counting 2 FLOPs per multiply-add of the matmuls only (projections, attention scores and
weighted sums, feed-forward, logits); embeddings, softmax, LayerNorm and the loss are not
counted. The blocks are counted over the padded batch (attention mixes the positions of a
row, so a batched model computes them all), the logits only at the real target positions
(each position's are its own; those at padding are thrown away by the loss, and our model
does not compute them). R is the mean over a round's batches. Those of the lm task are
`language_workload`'s (every position of a packed window is a target). Both models of a
task are given the same model FLOPs, so their MFU ratio equals their speed ratio.

The flags read here (`args`): `--task`, `--preset`, `--vocab-size`, `--length` (one length),
`--batch-size`, `--tokens-per-step`, `--batches`, `--steps`, `--seed`, and
`--attention-dropout-rate` where a study has it.
"""

import argparse

import keras
import numpy as np
from keras import ops

from benchmarks.harness import language_peers, language_workload
from keras_transformer.config import language_model_preset, preset
from keras_transformer.data.special_tokens import END_ID, START_ID

MODELS = ("ours", "keras-hub")
SHARED = "shared"  # not a model: the part of a step that both models compute alike
TASKS = ("translation", "lm")
FIRST_REGULAR_ID = END_ID + 1


def at_length(args, length):
    """The flags of one length of a sweep: `args` with `length = length` and its batch size.

    With `--tokens-per-step N` the batch size is `N // length` (every length trains on the same
    tokens per step); without it, `--batch-size`.
    """
    batch_size = args.tokens_per_step // length if args.tokens_per_step else args.batch_size
    return argparse.Namespace(**{**vars(args), "length": length, "batch_size": batch_size})


def model_config(args):
    """The config of both models, `--preset` at vocabulary `--vocab-size` and length `--length` (one length).

    A `ModelConfig` for the translation task; for the lm task, the decoder-only
    `LanguageModelConfig` with learned positions and tied embeddings, as GPT-2's.
    """
    # step_breakdown may set the dropout on the attention weights (train_throughput keeps the
    # default, which keras-hub's layers match).
    extra = {}
    if getattr(args, "attention_dropout_rate", None) is not None:
        extra["attention_dropout_rate"] = args.attention_dropout_rate
    if args.task == "lm":
        return language_model_preset(
            args.preset,
            "decoder",
            vocab_size=args.vocab_size,
            max_length=args.length,
            learned_positions=True,
            tie_embeddings=True,
            **extra,
        )
    return preset(
        args.preset,
        source_vocab_size=args.vocab_size,
        target_vocab_size=args.vocab_size,
        max_source_len=args.length,
        max_target_len=args.length,
        **extra,
    )


def step_flops(args, config, target_tokens=None, blocks=True):
    """Model FLOPs of one training step of the task on a `[--batch-size, --length]` batch.

    The translation task: `train_step_flops` with `target_tokens` real target positions (default:
    all); the lm task: `language_workload`'s count (`target_tokens` and `blocks` do not apply:
    every position is a target, and it has no shared part).
    """
    if args.task == "lm":
        return language_workload.train_step_flops(config, args.batch_size, args.length)
    return train_step_flops(config, args.batch_size, args.length, args.length, target_tokens, blocks)


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

    The lm task's are `language_workload`'s packed causal-LM windows, `(inputs, labels)` int32
    `[B, L]` each, every label a target. The translation task's are below.

    Each sentence has `L // 2 .. L` real tokens; the target input starts with `<s>` and the
    output ends with `</s>`, as the pipeline makes them.

    Returns:
        `--batches` batches `((source_ids, target_in_ids), target_out_ids)`, int32 `[B, L]` each.
    """
    if args.task == "lm":
        return language_workload.decoder_batches(args)
    rng = np.random.default_rng(args.seed)
    batch, length = args.batch_size, args.length
    positions = np.arange(length)[None, :]
    batches = []
    for _ in range(args.batches):
        source = rng.integers(FIRST_REGULAR_ID, args.vocab_size, size=(batch, length), dtype="int32")
        source *= positions < rng.integers(length // 2, length + 1, size=(batch, 1))
        words = rng.integers(FIRST_REGULAR_ID, args.vocab_size, size=(batch, length), dtype="int32")
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
    """The uncompiled model of worker `name`: ours, keras-hub's or the shared part.

    A `LanguageModelConfig` (the lm task) gives the decoder-only models of `language_peers`.
    """
    if getattr(config, "kind", None) == "decoder":
        return language_peers.build_model(name, config)[0]
    if name == SHARED:
        return build_shared_part(config)
    if name == "ours":
        from keras_transformer.models import build_transformer

        return build_transformer(config)
    from benchmarks.harness.peers import KerasHubTransformer

    return KerasHubTransformer(config).model
