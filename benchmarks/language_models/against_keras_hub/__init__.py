"""Our decoder-only and encoder-only language models against keras-hub's GPT-2 and BERT at equal size.

    python -m benchmarks.language_models.against_keras_hub          # small preset, V 8000; JSON to its results/
    python -m benchmarks.language_models.against_keras_hub --preset tiny --vocab-size 200 --batch-size 4 \
        --length 16 --prompt-length 4 --new-tokens 4 --steps 2 --rounds 1 --peak-size 128     # a quick check
    python -m benchmarks.language_models.against_keras_hub --help   # every flag

What runs:

- Two worker processes (this study run again with `--worker NAME`), one per library, each
  building its models once under the `--precision` dtype policy (`auto` is resolved by each worker with
  `keras_transformer.precision.choose_precision`, and both must agree), and waiting for orders
  on stdin. The models are `benchmarks.harness.language_peers`'; the orders, `worker`'s.
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
  token (every row gets every new token), each wrapped once in `tf.function` (XLA with
  `--jit-compile true`), warmed up once, then timed `--rounds` times, alternating ABBA:
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
- Model-FLOPs utilisation (MFU) of training, against the float32 matmul peak that the `ours`
  worker measures first, alone: `benchmarks.harness.language_workload` says how, and which FLOPs
  it counts.

What is matched between the libraries' models, and what is not: `benchmarks.harness.language_peers`
(recorded in the JSON under `architecture`).

How to read it: ratios above 1 mean ours is faster. Timings on a shared machine are noisy:
compare the ratios within a run rather than seconds across runs; the JSON (`--name`.json in
`--out`) keeps every round's figure. The weights are random (and briefly trained), so the
generated tokens mean nothing; the cost of a step does not depend on them.

The modules: `__main__` holds the command line and `main`; `worker` a worker; `parent` the
parent's rounds and their summaries; `report` the tables and the JSON. The model sizes, batches
and FLOP count both workers share are `benchmarks.harness.language_workload`'s, the models and
their generation `benchmarks.harness.language_peers`' (the speed studies use them too).
"""
