"""Training throughput: our Transformer against keras-hub's, alternating in one run.

    python -m benchmarks.speed.train_throughput         # small preset, float32 (+ mixed_bfloat16 if native)
    python -m benchmarks.speed.train_throughput --jit-compile true --precision mixed_bfloat16
    python -m benchmarks.speed.train_throughput --rounds 2 --steps 3 --bleu-epochs 0 --preset tiny   # a quick check
    python -m benchmarks.speed.train_throughput --length 64 256 1024 --tokens-per-step 4096 --bleu-epochs 0  # a sweep
    python -m benchmarks.speed.train_throughput --task lm  # our decoder-only LM against keras-hub's GPT-2

What runs:

- `--task translation` (the default): our encoder-decoder Transformer against keras-hub's layers, on
  padded sentence pairs, as below. `--task lm`: our decoder-only language model
  (`build_decoder_only`, learned positions, tied embeddings) against keras-hub's `GPT2Backbone`
  with the tied head of `GPT2CausalLM`, at the same size (`benchmarks.harness.language_peers`), on
  packed causal-LM windows of `--length` tokens (every position a target; no BLEU check, no shared
  part).
- A length sweep: `--length` takes several lengths, run one after the other, each with its own
  workers; `--tokens-per-step N` sets the batch size at each length to `N // length`, so every
  length trains on the same tokens per step. A summary table across the lengths ends the report.
- Two worker processes (this study with `--worker NAME`), one per model, each building its model
  once under the `--precision` dtype policy, compiling it with
  `keras_transformer.training.compile_transformer` (the same masked label-smoothed loss, metrics,
  Adam and Noam schedule for both) and waiting for orders on stdin:
    ours        `build_transformer(preset(--preset, ...))`
    keras-hub   `KerasHubTransformer` (`benchmarks.harness.peers`): keras-hub's
                `TokenAndPositionEmbedding`, `TransformerEncoder` and `TransformerDecoder` at the
                same D, H, F, depth, dropout and vocabulary
- The parent tells them, in turn, to train one round: `model.fit` for `--steps` steps on the same
  `--batches` synthetic batches (seeded token ids, `--batch-size` pairs padded to `--length`,
  each sentence `--length // 2 .. --length` real tokens), in the same order. The order of the two
  alternates every round (ABBA), so slow drift of the machine falls on both alike. Only one
  worker runs at a time; the other waits, idle. The first `--warmup-rounds` rounds (graph
  tracing, XLA compiles, caches) are not counted.
- Throughput is real target tokens (labels that are not padding) per second of a round; the
  report gives the median over the rounds and the ratio of the medians, ours / keras-hub. Peak
  memory is each worker's maximum resident set size and, on a GPU, the most device memory it used.
- Model-FLOPs utilisation (MFU) = model FLOPs per second / the machine's measured matmul peak
  (measured first, by the parent, alone): against the float32 peak ("MFU"), and against the peak
  of the precision's compute dtype ("own MFU": the bfloat16 peak for mixed_bfloat16).
  `benchmarks.harness.training_workload` gives the model FLOPs of a step and how they are counted.
- `--models ours,keras-hub,shared` adds a third worker that trains only what both models' steps
  share besides their blocks (both embedding tables, the logits projection, the loss and Adam
  over those), and the report splits each step: the shared part's milliseconds, each model's
  blocks (its step minus the shared part), and the block time ours would need for 1.2x.
- Precision: `--precision float32 auto` by default. `auto` is resolved once, by the parent, with
  `keras_transformer.precision.choose_precision`: mixed_bfloat16 where the hardware computes
  bfloat16 natively (a CPU with AVX512-BF16 or AMX, a GPU of compute capability 8.0+, a TPU),
  else float32, which then runs once. So the defaults always measure float32 and add
  mixed_bfloat16 only where it can be the faster: on a CPU with AVX2 only, bfloat16 matmuls are
  emulated and a mixed_bfloat16 round takes many times longer. An explicit `mixed_bfloat16` is
  run as asked, with a warning where it is emulated. What each flag became, and why, is printed
  and written to the JSON (`precision`), beside the CPU model and flags.
- `--bleu-epochs N` (TensorFlow backend only) then trains our model on the built-in corpus
  (`runs.train`, small preset, N epochs) once in each precision and prints the test BLEU of
  each, to show that the faster precision does not cost translation quality.

The study runs under any Keras backend: `benchmarks/gpu.sh` runs it with JAX on a GPU. Under
TensorFlow the batches go through `tf.data` (cached, prefetched); under other backends through a
Python generator. The results JSON goes to `--out`/`--name`.json (by default this study's
`results/train_throughput.json`).

The modules: `__main__` holds the command line, the precision choice and `main`; `rounds` the
parent's alternating rounds and their summary; `worker` a worker; `report` the tables; `bleu` the
BLEU check. What every worker builds alike (config, batches, models, FLOP count) is
`benchmarks.harness.training_workload`, the matmul peak `benchmarks.harness.matmul_peak`.
"""
