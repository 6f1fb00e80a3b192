"""Decoding speed of `keras_transformer.decoding`, against keras-hub at equal size.

What it measures, in one run, on one randomly initialised model and one batch of random source
ids (`--batch-size` sentences of `--source-len` ids in `[4, V)`):

- five batch decoders, each compiled once for the backend Keras runs (`compiled`: `tf.function`
  on TensorFlow, XLA with `--jit-compile true`; `jax.jit` on JAX with `--jit-compile true`), called
  once to warm up (the "first call" column: tracing, compiling and one run), then timed `--repeats`
  times, interleaved (round r times every decoder once, in an order rotated by r, so that load from
  other processes on the machine falls on all of them alike):
    greedy, uncached   `greedy_decode(use_cache=False)`: the tutorial's way, the whole decoder
                       re-run on the whole output at every step
    greedy, cached     `greedy_decode(use_cache=True)`: one new token per step, key/value cache
    beam 4, cached     `beam_search(beam_size=4, alpha=0.6)`
    keras-hub greedy   the peer: keras-hub's `TokenAndPositionEmbedding`, `TransformerEncoder`
                       and `TransformerDecoder` layers at our preset's width, heads, feed-forward
                       width, depth and vocabulary, generating with `keras_hub.samplers.GreedySampler`
                       and the decoder's self- and cross-attention key/value caches, written the
                       way keras-hub's BART `generate_step` does it (`KerasHubTransformer` in
                       `benchmarks.harness.peers`)
    keras-hub beam 4   the same peer with `keras_hub.samplers.BeamSampler(4)`
  and the CTranslate2 peer, our model's weights converted (`keras_transformer.models.transformer_spec`)
  and run by that engine at `compute_type` float32 and int8 by 1 and 2 threads, each setting in a
  worker process of its own after ours are timed (`ctranslate2_peer`; `--ctranslate2 false` leaves
  it out), giving exactly `--output-tokens` tokens per sentence too.
  Every decoder runs with no end token (`end_id=None`), so every sentence gets exactly
  `--output-tokens` tokens and "tokens/s" is exact: sentences/s x output tokens.
- the single-sentence latency, decoding until `</s>` or `max_target_len` = `--output-tokens`,
  greedy (beam 1) and beam 4, ours and the peer's. On TensorFlow, of SavedModels as a model server
  would run them: ours, the
  ids-only export (`IdsTranslator` -> `export_translator` -> `tf.saved_model.load` ->
  `serving_default`), by default and with XLA decoding (`jit_compile=True`, the export of
  `--xla-decoding true`, compiled at its first request and served by TF Serving with
  `--xla_cpu_compilation_enabled=true`), and the peer's, its generation above with keras-hub's `GreedySampler` or
  `BeamSampler(4)` saved the same way (`keras_hub_serving`; keras-hub's beam search ranks by
  log-probability, without our length penalty). Requests cycle through the batch's sentences, one
  sentence each, and through the four exports in a rotating order. On the other backends (no
  SavedModel), of the same four decoders compiled as the batch decoders are (`jax.jit` with
  `--jit-compile true`), called on one sentence: what an application serving from JAX would run.
  Then each CTranslate2 setting's, in its worker; the report names each compute type's fastest
  setting and how many times faster it is than ours, default and with XLA decoding.

How to read it: "median s/batch" is the median over the repeats of one decoder call on the whole
batch; sentences/s and tokens/s follow from it. The ratios compare medians of the same run:
`cached / uncached` is the cache's speed-up, `ours / keras-hub` above 1 means our cached greedy
(or beam-4) decoder is faster than the peer's, `beam 4 / greedy` is what beam search costs. The weights are
random, so the translations mean nothing; the cost of a step does not depend on the weights,
and the export's latency depends on them only through the output length, which is reported.
Timings on a shared machine are noisy: compare ratios within a run rather than seconds across
runs, and look at the raw times in the JSON (`--out`/`--name`.json, by default this study's
`results/decode.json`) when a median looks odd.

    python -m benchmarks.speed.decode                    # the default run, about a minute on 2 CPU cores
    python -m benchmarks.speed.decode --preset tiny --repeats 2 --latency-requests 5  # a quick check
    KERAS_BACKEND=jax python -m benchmarks.speed.decode --jit-compile true  # under JAX (gpu.sh decode on a GPU)

The modules: `__main__` holds the command line, the models and `main`; `decoders` the batch
decoders, their timing and checks; `latency` the single-sentence latency and the exports;
`ctranslate2_peer` the engine's conversion, sweep and ratios, `ctranslate2_worker` the process
that runs one setting; `report` the table and the JSON.
"""
