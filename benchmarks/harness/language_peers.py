"""The language models of both libraries at the same size, and their generation (the LM and speed studies).

The models (`build_model`), each from one `LanguageModelConfig` of `--preset` and kind:

    ours        decoder: `build_decoder_only`; encoder: `build_encoder_only` (no classification
                head), both from `language_model_preset(--preset, kind, vocab_size=--vocab-size,
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

Generation: ours is `keras_transformer.decoding.generation.generate`; keras-hub's is
`GPT2CausalLM.call_with_cache` driven by the sampler with a prefill over the prompt columns only
(`keras_hub_cached_generate`), beside `GPT2CausalLM.generate` itself. `uncached_greedy` is the
reference each cached generation is checked against.

What is matched, and what is not (recorded in the JSON under `architecture`):
- Matched: D, H, F, N, V, the sequence length, dropout (on embeddings, attention weights and
  sublayer outputs in both), learned position embeddings (ours with `learned_positions=True`,
  where the tutorial's default is sinusoids; `--learned-positions false` runs ours with those), tied
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
"""

import numpy as np

GENERATORS = {"ours": ("ours",), "keras-hub": ("keras-hub", "keras-hub generate")}
ARCHITECTURE = {
    "matched": [
        "d_model, heads, d_ff, blocks, vocabulary, sequence length, dropout",
        "learned position embeddings (ours with learned_positions=True unless --learned-positions false)",
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
