"""Our decoder-only and encoder-only language models against keras-hub's GPT-2 and BERT at equal size.

    python benchmarks/language_models.py                 # small preset, V 8000; JSON to benchmarks/results/
    python benchmarks/language_models.py --preset tiny --vocab 200 --batch-size 4 --length 16 \
        --prompt-length 4 --new-tokens 4 --steps 2 --rounds 1 --peak-size 128     # a quick check

What runs:

- Two worker processes (this script with `--worker NAME`), one per library, each building its
  models once under the `--precision` dtype policy (`auto` is resolved by each worker with
  `keras_transformer.training.precision.choose_precision`, and both must agree), and waiting for orders
  on stdin:
    ours        decoder: `build_decoder_only`; encoder: `build_encoder_only` (no classification
                head), both from `language_model_preset(--preset, kind, vocab_size=--vocab,
                max_length=..., learned_positions=True, tie_embeddings=True)`
    keras-hub   decoder: `keras_hub.models.GPT2Backbone(vocabulary_size, num_layers, num_heads,
                hidden_dim, intermediate_dim, dropout, max_sequence_length)` built from the same
                config (no preset is downloaded) and the logits of its token embedding table
                (`token_embedding(hidden, reverse=True)`: the tied LM head of `GPT2CausalLM`);
                encoder: `keras_hub.models.BertBackbone` at the same sizes and the same tied
                logits at every position
  Each model takes int32 token ids `[B, T]` (0 = padding; the keras-hub models compute their
  `padding_mask`, and BERT's all-zero `segment_ids`, from them inside the model) and gives logits
  `[B, T, V]`. Both are compiled by `keras_transformer.training.compile_transformer`: the same
  masked label-smoothed loss (label 0 is ignored), Adam and Noam schedule.
- Training (a): the parent tells the workers, in turn, to train one round of one kind:
  `model.fit` for `--steps` steps on the same `--batches` synthetic batches, in the same order.
  The order of the two alternates every round (ABBA), so slow drift of the machine falls on both
  alike; only one worker runs at a time. The first `--warmup-rounds` rounds (tracing) are not
  counted. Decoder batches are packed causal-LM windows: `--batch-size` rows of `--length + 1`
  seeded random ids, the first `--length` the inputs and the last `--length` the labels, no
  padding, so every position is a target (target tokens = B x T per step). Encoder batches are
  masked-LM rows from `keras_transformer.data.masked_lm_dataset` over seeded random texts of
  `--length // 2 .. --length` tokens (`<s>` and `</s>` included, padded to `--length`): 15% of the
  pieces selected (80% `<mask>`, 10% random, 10% kept), labels 0 at every other position, so the
  loss of both models counts the masked positions only. Each worker makes the batches itself and
  reports their checksum; the parent checks that the two are equal.
  Tokens/s is real (non-padding) input tokens per second of a round; for the decoder these are
  its target tokens, for the encoder the report also gives the masked (predicted) tokens/s.
  Medians over the rounds, and the ratio of the medians ours / keras-hub. Each round also records
  the worker's CPU seconds (`time.process_time`: user and system time of all its threads), and
  the report gives tokens per CPU-second and their ratio beside the wall-clock figures: on a
  machine shared with other jobs a round's wall-clock time depends on how much of the CPU the
  others left it, its CPU time much less so (the work, not the waiting; though contention still
  costs caches). On an idle machine the wall-clock ratio is the one that counts, since it also
  sees how well each model keeps the cores busy.
- Generation (b), decoder only: `--batch-size` prompts of `--prompt-length` seeded random ids,
  `--new-tokens` new tokens each, greedy (`keras_hub.samplers.GreedySampler` for both), no stop
  token (every row gets every new token), each wrapped once in `tf.function` (XLA with `--jit`),
  warmed up once, then timed `--rounds` times, alternating ABBA:
    ours               `keras_transformer.decoding.generation.generate(model, prompts, P + N, sampler,
                       end_id=None)`: prefill over the P prompt columns, then one cached step a token
    keras-hub          `GPT2CausalLM(backbone, preprocessor=None).call_with_cache` driven by the
                       same sampler the way `GPT2CausalLM.generate_step` drives it, but with the
                       prefill over the P prompt columns only: the same work as ours (the ratio)
    keras-hub generate `GPT2CausalLM.generate({"token_ids", "padding_mask"}, stop_token_ids=None)`
                       compiled with `sampler="greedy"`: keras-hub's own path, whose prefill runs
                       over all P + N columns (reported beside, with its ratio)
  New tokens/s = B x N / seconds of a call (and per CPU-second, as for training). After the
  warm-up, each cached generation is checked on two rows against the model's own uncached greedy
  decode (the whole model re-run on the whole prefix at each step); the JSON records the
  fraction of equal tokens.
- Model-FLOPs utilisation (MFU) of training = model FLOPs per step / step seconds / the float32
  matmul peak that the `ours` worker measures first, alone (the best rate of `--peak-size`^3
  matmul chains); "CPU MFU" is the same per CPU-second: model FLOPs per CPU-second of a step /
  the matmuls' median FLOP per CPU-second, which other jobs on the machine hardly change. Model FLOPs
  per training step on a batch [B, T], 3x the forward (the backward pass is twice the forward):
      forward = B * ( N * [ T * (8 D^2 + 4 D F) + 4 T^2 D ] + T * 2 D V )
  counting 2 FLOPs per multiply-add of the matmuls only (Q, K, V and output projections, the
  T x T attention scores and weighted sums, the feed-forward, the tied logits); embeddings,
  softmax, LayerNorm, the loss are not counted. The causal mask saves no matmul work in either
  model, so the decoder and the encoder have the same formula, and both libraries the same FLOPs.

What is matched, and what is not (recorded in the JSON under `architecture`):
- Matched: D, H, F, N, V, the sequence length, dropout (on embeddings, attention weights and
  sublayer outputs in both), learned position embeddings (ours with `learned_positions=True`,
  where the tutorial's default is sinusoids; `--positions sinusoid` runs ours with those), tied
  input and output embeddings (one `[V, D]` table), the loss, optimizer and batches.
- GPT-2 is pre-LN: LayerNorm before each sublayer and once after the last block; ours is post-LN
  as in the paper and the tutorial (LayerNorm after each residual, none at the end). GPT-2's
  feed-forward uses GELU (tanh approximation), ours relu (as two kernel-1 `Conv1D`s).
- BERT is post-LN like ours, with GELU; it also has segment embeddings (all segment 0 here) and
  a LayerNorm over the summed embeddings, which ours lacks, and a pooler (`pooled_dense`, D x D
  on the first position) that the masked LM does not use: it is frozen here, so that it trains
  nothing. keras-hub's `BertMaskedLM` head is not used: it adds a D x D dense + GELU + LayerNorm
  transform and a bias, and computes the logits only at a fixed number of gathered masked
  positions, where ours computes them everywhere; both here compute the tied logits everywhere.
- The initialisations differ (GPT-2 and BERT: normal(0.02); ours: Glorot), which changes the
  losses, not the work of a step.

How to read it: ratios above 1 mean ours is faster. Timings on a shared machine are noisy:
compare the ratios within a run rather than seconds across runs; the JSON (`--out`) keeps every
round's figure. The weights are random (and briefly trained), so the generated tokens mean
nothing; the cost of a step does not depend on them.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import common
import numpy as np

from keras_transformer.config import PRECISIONS, PRESETS, language_model_preset

MODELS = ("ours", "keras-hub")
KINDS = ("decoder", "encoder")
FIRST_PIECE_ID = 5  # ids 0-4: <pad>, <unk>, <s>, </s>, <mask>
CHECK_ROWS = 2  # rows of the uncached greedy check of each cached generation
GENERATORS = {"ours": ("ours",), "keras-hub": ("keras-hub", "keras-hub generate")}
ARCHITECTURE = {
    "matched": [
        "d_model, heads, d_ff, blocks, vocabulary, sequence length, dropout",
        "learned position embeddings (ours with learned_positions=True unless --positions sinusoid)",
        "tied input/output embeddings, no output bias",
        "loss (masked label-smoothed, label 0 ignored), Adam + Noam schedule, batches",
    ],
    "decoder": "GPT-2 is pre-LN (LayerNorm before each sublayer, a final LayerNorm) with GELU; ours is post-LN "
    "(the paper's, the tutorial's) with relu, no final LayerNorm",
    "encoder": "BERT is post-LN like ours but GELU, plus segment embeddings (all 0 here), a LayerNorm over the "
    "embeddings and a frozen, unused pooler; both use tied logits at every position (not BertMaskedLM's "
    "gathered-positions head with its dense+LayerNorm transform and bias)",
    "initialisation": "GPT-2/BERT normal(0.02), ours Glorot: different losses, the same work",
}


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size of all the models.")
    parser.add_argument("--vocab", type=int, default=8000, help="Vocabulary size V.")
    parser.add_argument("--batch-size", type=int, default=16, help="Rows per training batch, and prompts generated.")
    parser.add_argument("--length", type=int, default=64, help="Training sequence length T.")
    parser.add_argument("--prompt-length", type=int, default=16, help="Tokens of every prompt (generation).")
    parser.add_argument("--new-tokens", type=int, default=48, help="Tokens generated after every prompt.")
    parser.add_argument("--kinds", default=",".join(KINDS), help="Comma-separated subset of: decoder,encoder.")
    parser.add_argument(
        "--positions",
        default="learned",
        choices=("learned", "sinusoid"),
        help="Our models' positions: learned (as GPT-2's and BERT's) or the tutorial's sinusoids.",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="Dtype policy of all models; auto is mixed_bfloat16 where bfloat16 is native, else float32.",
    )
    parser.add_argument("--jit", action="store_true", help="Compile training steps and generation with XLA.")
    parser.add_argument("--steps", type=int, default=10, help="Training steps per round.")
    parser.add_argument("--rounds", type=int, default=5, help="Counted rounds per model (training and generation).")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="Training rounds run first and not counted.")
    parser.add_argument("--batches", type=int, default=8, help="Distinct synthetic batches, cycled.")
    parser.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the weights, batches and prompts.")
    parser.add_argument("--out", default="benchmarks/results/language_models.json", help="JSON results file.")
    parser.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # workers get the same flags
    args.kinds = [name.strip() for name in args.kinds.split(",") if name.strip()]
    if not args.kinds or sorted(set(args.kinds) - set(KINDS)):
        parser.error(f"--kinds takes names from {','.join(KINDS)}; received {args.kinds or 'nothing'}")
    args.kinds = [kind for kind in KINDS if kind in args.kinds]
    common.check_at_least(parser, args, ("batch_size", "steps", "rounds", "batches", "peak_size"), 1)
    common.check_at_least(parser, args, ("prompt_length", "new_tokens"), 1)
    common.check_at_least(parser, args, ("warmup_rounds",), 0)
    common.check_at_least(parser, args, ("length",), 3)  # a masked-LM row is <s> piece </s> at least
    common.check_at_least(parser, args, ("vocab",), FIRST_PIECE_ID + 2)
    return args


def max_length(args):
    """The longest sequence the models see: a training row or a prompt with its new tokens."""
    return max(args.length, args.prompt_length + args.new_tokens)


def model_config(args, kind):
    """Our `LanguageModelConfig` of `kind`; the keras-hub models are built from the same one."""
    return language_model_preset(
        args.preset,
        kind,
        vocab_size=args.vocab,
        max_length=max_length(args),
        learned_positions=args.positions == "learned",
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
        window = rng.integers(FIRST_PIECE_ID, args.vocab, size=(args.batch_size, args.length + 1), dtype="int32")
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
    pieces = rng.integers(FIRST_PIECE_ID, args.vocab, size=int(lengths.sum()), dtype="int32")
    texts = tf.RaggedTensor.from_row_lengths(pieces, lengths)
    dataset = masked_lm_dataset(texts, args.length, args.batch_size, args.vocab, seed=args.seed)
    return [(inputs.numpy(), labels.numpy()) for inputs, labels in dataset.take(args.batches)]


def checksum(batches):
    """A short digest of batches, to check that both workers train on the same ones."""
    digest = hashlib.sha256()
    for inputs, labels in batches:
        digest.update(np.ascontiguousarray(inputs, dtype="int32").tobytes())
        digest.update(np.ascontiguousarray(labels, dtype="int32").tobytes())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------------------------- workers
def build_keras_hub(config):
    """keras-hub's model of `config.kind` at `config`'s sizes, ids in and tied logits out.

    Returns:
        `(model, backbone)`: the functional `keras.Model` from int32 token ids `[B, T]` to float32
        logits `[B, T, V]`, and the `GPT2Backbone` or `BertBackbone` inside it.
    """
    import keras
    import keras_hub
    from keras import ops

    sizes = dict(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_blocks,
        num_heads=config.num_heads,
        hidden_dim=config.d_model,
        intermediate_dim=config.d_ff,
        dropout=config.dropout_rate,
        max_sequence_length=config.max_length,
    )
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask = ops.cast(ops.not_equal(token_ids, 0), "int32")
    if config.kind == "decoder":
        backbone = keras_hub.models.GPT2Backbone(**sizes)
        hidden = backbone({"token_ids": token_ids, "padding_mask": padding_mask})
    else:
        backbone = keras_hub.models.BertBackbone(**sizes)
        backbone.pooled_dense.trainable = False  # the masked LM does not read the pooled output
        inputs = {"token_ids": token_ids, "padding_mask": padding_mask, "segment_ids": ops.zeros_like(token_ids)}
        hidden = backbone(inputs)["sequence_output"]
    logits = ops.cast(backbone.token_embedding(hidden, reverse=True), "float32")  # (B, T, V)
    return keras.Model(token_ids, logits, name=f"keras_hub_{config.kind}"), backbone


def build_model(name, config):
    """The uncompiled model of library `name` and `config.kind`, and keras-hub's backbone (or None)."""
    if name == "ours":
        from keras_transformer.models.language import build_decoder_only, build_encoder_only

        build = build_decoder_only if config.kind == "decoder" else build_encoder_only
        return build(config), None
    return build_keras_hub(config)


def keras_hub_cached_generate(causal_lm, sampler, prompt_ids, length):
    """Greedy generation with `GPT2CausalLM.call_with_cache`, prefilling the prompt columns only.

    `GPT2CausalLM.generate_step` with one change: its cache is filled by one pass over the prompt
    columns `[B, P]` (the cache update writes positions `0 .. P - 1`), where `_build_cache` runs
    over all `L` columns. Then the sampler asks for one position at a time, as in `generate_step`.

    Args:
        causal_lm: a `keras_hub.models.GPT2CausalLM`.
        sampler: a keras-hub sampler.
        prompt_ids: int32 `[B, P]`, every row a full prompt (no padding).
        length: L, the output length (prompt included).

    Returns:
        int32 `[B, L]`.
    """
    from keras import ops

    backbone = causal_lm.backbone
    batch, prompt_length = ops.shape(prompt_ids)[0], ops.shape(prompt_ids)[1]
    tokens = ops.pad(prompt_ids, ((0, 0), (0, length - prompt_length)))  # (B, L)
    head_width = backbone.hidden_dim // backbone.num_heads
    cache = ops.zeros(
        (batch, backbone.num_layers, 2, length, backbone.num_heads, head_width), dtype=causal_lm.compute_dtype
    )
    _, hidden, cache = causal_lm.call_with_cache(prompt_ids, cache, 0)  # (B, P, D), cache at 0 .. P - 1
    hidden = ops.pad(hidden, ((0, 0), (0, length - prompt_length), (0, 0)))

    def next_logits(prompt, cache, index):
        token = ops.slice(prompt, [0, index - 1], [ops.shape(prompt)[0], 1])  # (B, 1)
        logits, hidden, cache = causal_lm.call_with_cache(token, cache, index - 1)
        return ops.squeeze(logits, axis=1), ops.squeeze(hidden, axis=1), cache

    return sampler(
        next=next_logits,
        prompt=tokens,
        cache=cache,
        index=prompt_length,
        mask=ops.not_equal(tokens, 0),
        stop_token_ids=None,
        hidden_states=hidden,
        model=causal_lm,
    )


def uncached_greedy(model, prompt_ids, new_tokens, forbid):
    """The model's greedy continuation without a cache: the whole model on the whole prefix each step.

    Args:
        model: a model from ids `[B, T]` to logits `[B, T, V]`.
        prompt_ids: int32 array `[B, P]`.
        new_tokens: N.
        forbid: a function applied to the `[B, V]` logits first (ours: `forbid_never_emitted`).

    Returns:
        int32 array `[B, P + N]`.
    """
    from keras import ops

    tokens = np.asarray(prompt_ids, dtype="int32")
    for _ in range(new_tokens):
        logits = forbid(model(tokens, training=False)[:, -1, :])  # (B, V)
        tokens = np.concatenate([tokens, ops.convert_to_numpy(ops.argmax(logits, axis=-1))[:, None]], axis=1)
    return tokens.astype("int32")


def matmul_peak(size, repeats=7, chain=4):
    """The float32 matmul peak: the best FLOP/s of `repeats` timed chains, and the median FLOP per CPU-second.

    The best, not the median, wall-clock rate: on a shared machine a slower repeat measures the
    other jobs. FLOP per CPU-second (`time.process_time`, all threads) hardly depends on them.

    Returns:
        `{"float32": FLOP/s, "float32_per_cpu_second": FLOP per CPU-second}`.
    """
    from keras import ops

    rng = np.random.default_rng(0)
    a = ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32"))
    b = ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32") / size**0.5)

    def run():
        c = a
        for _ in range(chain):
            c = ops.matmul(c, b)
        return float(ops.convert_to_numpy(c[0, 0]))  # waits for the result

    run()
    rates, cpu_rates = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        run()
        rates.append(chain * 2 * size**3 / (time.perf_counter() - start))
        cpu_rates.append(chain * 2 * size**3 / max(time.process_time() - cpu_start, 1e-9))
    return {"float32": float(max(rates)), "float32_per_cpu_second": float(np.median(cpu_rates))}


class _RoundClock:
    """Wall-clock and CPU seconds of the training steps of one `fit` call, first batch's start to last batch's end.

    CPU seconds are the process's (`time.process_time`: user and system time of all its threads).
    """

    @staticmethod
    def callback():
        import keras

        class Clock(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 0:
                    self.started, self.cpu_started = time.perf_counter(), time.process_time()

            def on_train_batch_end(self, batch, logs=None):
                self.ended, self.cpu_ended = time.perf_counter(), time.process_time()

        return Clock()


class Worker:
    """One library's models in a worker process: built, compiled, and the orders it carries out.

    Args:
        args: the parsed flags (`args.worker` names the library).
        precision: the dtype policy to build in.
    """

    def __init__(self, args, precision):
        import keras
        import keras_hub
        import tensorflow as tf

        from keras_transformer.config import TrainConfig
        from keras_transformer.training import compile_transformer, dtype_policy

        self.args, self.name = args, args.worker
        keras.utils.set_random_seed(args.seed)
        self.models, self.data, self.tokens, self.checksums = {}, {}, {}, {}
        self.clock = _RoundClock.callback()
        train_config = TrainConfig(warmup_steps=400, jit_compile=args.jit)
        makers = {"decoder": decoder_batches, "encoder": encoder_batches}
        with dtype_policy(precision):
            for kind in args.kinds:
                config = model_config(args, kind)
                model, backbone = build_model(self.name, config)
                self.models[kind] = compile_transformer(model, config, train_config)
                if kind == "decoder" and backbone is not None:
                    self.causal_lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
                    self.causal_lm.compile(sampler="greedy")
                batches = makers[kind](args)
                self.checksums[kind] = checksum(batches)
                self.tokens[kind] = round_tokens(batches, args.steps)
                stacked = (np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches]))
                self.data[kind] = tf.data.Dataset.from_tensor_slices(stacked).cache().repeat().prefetch(2)
        if "decoder" in args.kinds:
            rng = np.random.default_rng(args.seed + 2)
            self.prompts = rng.integers(
                FIRST_PIECE_ID, args.vocab, size=(args.batch_size, args.prompt_length), dtype="int32"
            )
            self.generators = self._generators()

    def ready(self, precision_choice):
        """The first line a worker answers: parameters, batch checksums, the precision chosen."""
        return {
            "ready": True,
            "parameters": {kind: int(model.count_params()) for kind, model in self.models.items()},
            "checksums": self.checksums,
            "precision": precision_choice,
        }

    def _generators(self):
        """`{label: function(prompt_ids) -> int32 [B, L] as NumPy}`, each traced once on its first call."""
        import keras_hub
        import tensorflow as tf

        length = self.args.prompt_length + self.args.new_tokens
        sampler = keras_hub.samplers.GreedySampler()
        if self.name == "ours":
            from keras_transformer.decoding.generation import generate

            model = self.models["decoder"]
            traced = tf.function(
                lambda ids: generate(model, ids, length, sampler=sampler, end_id=None),
                jit_compile=self.args.jit,
                autograph=False,
            )
            return {"ours": lambda ids: traced(ids).numpy()}
        causal_lm = self.causal_lm
        traced = tf.function(
            lambda ids: keras_hub_cached_generate(causal_lm, sampler, ids, length),
            jit_compile=self.args.jit,
            autograph=False,
        )
        if self.args.jit:
            causal_lm.jit_compile = True

        def own_generate(ids):
            tokens = np.pad(ids, ((0, 0), (0, self.args.new_tokens)))
            inputs = {"token_ids": tokens, "padding_mask": tokens != 0}
            return np.asarray(causal_lm.generate(inputs, stop_token_ids=None)["token_ids"])

        return {"keras-hub": lambda ids: traced(ids).numpy(), "keras-hub generate": own_generate}

    def peak(self):
        """The float32 matmul peak (`matmul_peak`)."""
        return matmul_peak(self.args.peak_size)

    def train(self, kind):
        """One round of `model.fit` on `kind`'s batches: seconds, tokens, loss, peak memory."""
        args, model = self.args, self.models[kind]
        history = model.fit(
            self.data[kind], epochs=1, steps_per_epoch=args.steps, callbacks=[self.clock], shuffle=False, verbose=0
        )
        input_tokens, predicted_tokens = self.tokens[kind]
        assert int(history.history["target_tokens"][-1]) == predicted_tokens, "the round did not train on its batches"
        return {
            "seconds": self.clock.ended - self.clock.started,
            "cpu_seconds": self.clock.cpu_ended - self.clock.cpu_started,
            "input_tokens": input_tokens,
            "predicted_tokens": predicted_tokens,
            "loss": float(history.history["loss"][-1]),
            "peak_rss_mib": common.peak_rss_mib(),
        }

    def generate(self, index):
        """One timed call of each generator (order alternating with `index`); the first also checks."""
        from keras_transformer.decoding import forbid_never_emitted

        labels = list(self.generators)
        report = {"seconds": {}, "cpu_seconds": {}}
        for label in labels if index % 2 == 0 else labels[::-1]:
            start, cpu_start = time.perf_counter(), time.process_time()
            outputs = self.generators[label](self.prompts)
            report["seconds"][label] = time.perf_counter() - start
            report["cpu_seconds"][label] = time.process_time() - cpu_start
            expected = (self.args.batch_size, self.args.prompt_length + self.args.new_tokens)
            assert outputs.shape == expected, f"{label} returned {outputs.shape}, expected {expected}"
            if index == 0:  # the warm-up call: check it against the uncached decode
                forbid = forbid_never_emitted if self.name == "ours" else (lambda logits: logits)
                reference = uncached_greedy(
                    self.models["decoder"], self.prompts[:CHECK_ROWS], self.args.new_tokens, forbid
                )
                report.setdefault("equal_to_uncached", {})[label] = float(np.mean(outputs[:CHECK_ROWS] == reference))
        report["peak_rss_mib"] = common.peak_rss_mib()
        return report


def run_worker(args):
    """Build everything, answer the ready line, then carry out one order per JSON line on stdin."""
    from keras_transformer.training.precision import choose_precision

    choice = choose_precision(args.precision, common.cpu_info())
    worker = Worker(args, choice.policy)
    print(json.dumps(worker.ready(choice.to_dict())), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        order = json.loads(line)
        if order["do"] == "peak":
            answer = worker.peak()
        elif order["do"] == "train":
            answer = worker.train(order["kind"])
        else:
            answer = worker.generate(order["index"])
        print(json.dumps(answer), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------- parent
def start_workers(args):
    """Both `--worker` subprocesses, built and ready: `(workers, ready lines)` in the order of `MODELS`."""
    workers = [
        common.JsonLinesWorker(common.worker_command(__file__, args.argv, "--worker", name), name) for name in MODELS
    ]
    ready = {}
    try:
        for worker in workers:
            ready[worker.name] = worker.answer()
    except BaseException:
        for worker in workers:
            worker.process.kill()
        raise
    for kind in args.kinds:
        sums = {name: answer["checksums"][kind] for name, answer in ready.items()}
        if len(set(sums.values())) != 1:
            raise RuntimeError(f"the workers made different {kind} batches: {sums}")
    policies = {name: answer["precision"]["policy"] for name, answer in ready.items()}
    if len(set(policies.values())) != 1:
        raise RuntimeError(f"the workers chose different precisions: {policies}")
    return workers, ready


def alternate(workers, orders, warmup, label):
    """Send each worker every order in turn, the workers' order alternating (ABBA).

    Args:
        workers: the `JsonLinesWorker`s.
        orders: a function of the round index giving the order (a dict) for that round.
        warmup: the first rounds, answered but not kept.
        label: a function of (round index, worker name, answer) giving the progress line.

    Returns:
        `(kept, first)`: `{name: [answer, ...]}` of the counted rounds, and `{name: answer}` of the
        first round (warm-up or not).
    """
    kept, first = {worker.name: [] for worker in workers}, {}
    for index, order in enumerate(orders):
        for worker in workers if index % 2 == 0 else workers[::-1]:
            answer = worker.request(json.dumps(order))
            first.setdefault(worker.name, answer)
            if index >= warmup:
                kept[worker.name].append(answer)
            print(
                f"  round {index + 1}{' (warm-up)' if index < warmup else ''} {label(worker.name, answer)}", flush=True
            )
    return kept, first


def summarise_training(args, kind, config, rounds, parameters, peak):
    """The training results of one kind: each library's medians, MFU, memory, and the ratio."""
    flops = train_step_flops(config, args.batch_size, args.length)
    results = {}
    for name, reports in rounds.items():
        seconds = np.array([r["seconds"] for r in reports])
        step_seconds = float(np.median(seconds)) / args.steps
        cpu_step_seconds = float(np.median([r["cpu_seconds"] for r in reports])) / args.steps
        results[name] = {
            "parameters": parameters[name],
            "tokens_per_second_median": float(np.median([r["input_tokens"] / s for r, s in zip(reports, seconds)])),
            "tokens_per_second_rounds": [round(r["input_tokens"] / s, 1) for r, s in zip(reports, seconds)],
            "predicted_tokens_per_second_median": float(
                np.median([r["predicted_tokens"] / s for r, s in zip(reports, seconds)])
            ),
            "tokens_per_cpu_second_median": float(np.median([r["input_tokens"] / r["cpu_seconds"] for r in reports])),
            "step_ms_median": 1000 * step_seconds,
            "mfu_fp32_peak": flops / step_seconds / peak["float32"],
            "mfu_fp32_peak_cpu_time": flops / cpu_step_seconds / peak["float32_per_cpu_second"],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
            "final_loss": reports[-1]["loss"],
        }
    results["model_flops_per_step"] = flops
    results["ours_over_keras_hub"] = common.ours_over_keras_hub(results, "tokens_per_second_median")
    results["ours_over_keras_hub_cpu_time"] = common.ours_over_keras_hub(results, "tokens_per_cpu_second_median")
    return results


def summarise_generation(args, rounds, checks):
    """The generation results: each generator's median new tokens/s, ratios ours / each keras-hub one."""
    new_tokens = args.batch_size * args.new_tokens
    results = {}
    for name, reports in rounds.items():
        for label in GENERATORS[name]:
            seconds = [r["seconds"][label] for r in reports]
            cpu_seconds = [r["cpu_seconds"][label] for r in reports]
            results[label] = {
                "new_tokens_per_second_median": new_tokens / float(np.median(seconds)),
                "new_tokens_per_cpu_second_median": new_tokens / float(np.median(cpu_seconds)),
                "seconds_rounds": seconds,
                "cpu_seconds_rounds": cpu_seconds,
                "equal_to_uncached": checks[name]["equal_to_uncached"][label],
                "peak_rss_mib": max(r["peak_rss_mib"] for r in reports),
            }
    for suffix, key in (("", "new_tokens_per_second_median"), ("_cpu_time", "new_tokens_per_cpu_second_median")):
        ours = results["ours"][key]
        results["ours_over_keras_hub" + suffix] = ours / results["keras-hub"][key]
        results["ours_over_keras_hub_generate" + suffix] = ours / results["keras-hub generate"][key]
    return results


def print_report(args, cpu, precision, peak, training, generation):
    """The tables: training per kind (tokens/s, per CPU-second, step ms, MFU, memory, ratios), then generation."""
    config = model_config(args, args.kinds[0])
    print()
    print(
        f"preset {args.preset} (D {config.d_model}, H {config.num_heads}, F {config.d_ff}, N {config.num_blocks}), "
        f"V {args.vocab}, positions {args.positions}, precision {precision['policy']}, jit "
        f"{'on' if args.jit else 'off'}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    print(
        f"matmul peak ({args.peak_size}^3): float32 {peak['float32'] / 1e9:,.0f} GFLOP/s (best of the repeats), "
        f"{peak['float32_per_cpu_second'] / 1e9:,.0f} GFLOP per CPU-second; model FLOPs per training step "
        f"{train_step_flops(config, args.batch_size, args.length) / 1e9:.2f} GFLOP"
    )
    peers = {"decoder": "GPT2Backbone", "encoder": "BertBackbone"}
    print(f"training: batches {args.batch_size} x {args.length}, {args.rounds} rounds of {args.steps} steps (medians)")
    header = (
        f"{'kind':<9}{'model':<14}{'params':>10}{'tokens/s':>10}{'tok/CPU-s':>11}{'step ms':>9}{'MFU':>7}{'CPU MFU':>9}"
        f"{'peak MiB':>10}{'loss':>7}"
    )
    print(header)
    print("-" * len(header))
    for kind, results in training.items():
        for name in MODELS:
            r = results[name]
            print(
                f"{kind:<9}{name if name == 'ours' else peers[kind]:<14}{r['parameters']:>10,}"
                f"{r['tokens_per_second_median']:>10,.0f}{r['tokens_per_cpu_second_median']:>11,.0f}"
                f"{r['step_ms_median']:>9.1f}{r['mfu_fp32_peak']:>7.1%}{r['mfu_fp32_peak_cpu_time']:>9.1%}"
                f"{r['peak_rss_mib']:>10,.0f}{r['final_loss']:>7.2f}"
            )
        extra = ""
        if kind == "encoder":
            extra = (
                f" (masked tokens/s: ours {results['ours']['predicted_tokens_per_second_median']:,.0f}, "
                f"keras-hub {results['keras-hub']['predicted_tokens_per_second_median']:,.0f})"
            )
        print(
            f"{kind:<9}ours / keras-hub: {common.format_ratio(results['ours_over_keras_hub'])}, per CPU-second "
            f"{common.format_ratio(results['ours_over_keras_hub_cpu_time'])}{extra}"
        )
    if generation:
        print(
            f"generation: {args.batch_size} prompts x {args.prompt_length} tokens, {args.new_tokens} new tokens each, "
            f"greedy, no stop token, {args.rounds} rounds (medians)"
        )
        header = f"{'generator':<22}{'new tokens/s':>13}{'per CPU-s':>11}{'== uncached':>13}"
        print(header)
        print("-" * len(header))
        for label in (*GENERATORS["ours"], *GENERATORS["keras-hub"]):
            r = generation[label]
            print(
                f"{label:<22}{r['new_tokens_per_second_median']:>13,.0f}{r['new_tokens_per_cpu_second_median']:>11,.0f}"
                f"{r['equal_to_uncached']:>13.0%}"
            )
        ratio = {key: common.format_ratio(value) for key, value in generation.items() if key.startswith("ours_")}
        print(
            f"ours / keras-hub (same work): {ratio['ours_over_keras_hub']}, per CPU-second "
            f"{ratio['ours_over_keras_hub_cpu_time']}; ours / keras-hub generate(): "
            f"{ratio['ours_over_keras_hub_generate']}, per CPU-second {ratio['ours_over_keras_hub_generate_cpu_time']}"
        )


def main(argv=None):
    """The parent's run (peak, training, generation, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = common.cpu_info()
    workers, ready = start_workers(args)
    precision = ready["ours"]["precision"]
    print(f"precision {args.precision}: {precision['policy']} ({precision['reason']})", flush=True)
    training, generation = {}, {}
    try:
        peak = workers[0].request(json.dumps({"do": "peak"}))  # the other worker waits, idle
        print(
            f"matmul peak: float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, "
            f"{peak['float32_per_cpu_second'] / 1e9:,.0f} GFLOP per CPU-second",
            flush=True,
        )
        for kind in args.kinds:
            orders = [{"do": "train", "kind": kind}] * (args.warmup_rounds + args.rounds)
            rounds, _ = alternate(
                workers,
                orders,
                args.warmup_rounds,
                lambda name, r, kind=kind: (
                    f"{kind} {name:<9} {r['input_tokens'] / r['seconds']:>9,.0f} tokens/s, loss {r['loss']:.3f}"
                ),
            )
            parameters = {name: answer["parameters"][kind] for name, answer in ready.items()}
            training[kind] = summarise_training(args, kind, model_config(args, kind), rounds, parameters, peak)
        if "decoder" in args.kinds:
            orders = [{"do": "generate", "index": i} for i in range(1 + args.rounds)]
            rounds, first = alternate(
                workers,
                orders,
                1,
                lambda name, r: (
                    "generate "
                    + ", ".join(
                        f"{label} {args.batch_size * args.new_tokens / s:,.0f}" for label, s in r["seconds"].items()
                    )
                    + " new tokens/s"
                ),
            )
            generation = summarise_generation(args, rounds, first)
    finally:
        for worker in workers:
            worker.close()
    print_report(args, cpu, precision, peak, training, generation)
    results = {
        "command": common.command_line(args.argv),
        "config": {
            **{k: v for k, v in vars(args).items() if k not in ("worker", "argv")},
            "max_length": max_length(args),
            "models": {kind: model_config(args, kind).to_dict() for kind in args.kinds},
        },
        "architecture": ARCHITECTURE,
        "versions": common.package_versions({"keras": "keras", "tensorflow": "tensorflow", "keras-hub": "keras-hub"}),
        **common.machine(cpu),
        "precision": precision,
        "matmul_peak_flops": peak,
        "training": training,
        "generation": generation,
    }
    print(f"wrote {common.write_json(args.out, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
