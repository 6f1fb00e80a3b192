"""Where a training step's time goes: our model's step, op by op, at several lengths, under JAX or TensorFlow.

    KERAS_BACKEND=jax python -m benchmarks.speed.step_breakdown                   # small preset, lengths 64 256 1024
    KERAS_BACKEND=jax python -m benchmarks.speed.step_breakdown --task lm --precision mixed_bfloat16
    python -m benchmarks.speed.step_breakdown --length 24 --tokens-per-step 1536  # TensorFlow: train_throughput's step
    bash benchmarks/gpu.sh profile                                                # base preset on a GPU

What runs under JAX (XLA makes the step one program whose ops can be named):

- For each `--length`, at `--tokens-per-step` tokens per step (batch = tokens // length), our model
  of `--task` (`benchmarks.harness.training_workload`: the same configs, batches and model FLOPs as
  `benchmarks.speed.train_throughput`) is compiled with `compile_transformer(jit_compile=True)` and
  trained with `model.fit`: one warm-up round (the XLA compile), `--rounds` timed rounds of `--steps`
  steps (the median step time, MFU against the measured matmul peak of the precision's compute
  dtype), then `--trace-steps` steps under `jax.profiler.trace`.
- The compiled step's optimized HLO is dumped by XLA (`--xla_dump_to`, set by this study before
  JAX compiles anything), and every op the profiler timed is looked up there: its kind (a matmul: a
  dot or convolution, or a fusion or library call around one; an attention kernel: a fused attention
  custom call; else the rest: elementwise, reductions, copies) and its `op_name`, the JAX name
  stack of the Keras layers that emitted it. That path gives the op's phase (forward, backward:
  `transpose(jvp(...))`, optimizer update) and its part of the model:

    attention core      scores, mask, softmax, weighted sum and head reshapes, per kind of
                        attention (encoder self, decoder self (causal), cross; the LM's causal self)
    attention proj.     the query, key, value and output projections
    feed-forward        both layers and the activation
    layer norm          every LayerNorm
    embeddings          token embeddings, positions, their dropout
    logits and loss     the output projection, the loss
    optimizer           Adam's update of every weight
    other               what no layer claims (casts, masks of the inputs, the metrics)

- The report gives, per length: the step's wall-clock time, the ops' busy time per step (on a
  CPU the sum over its threads, so it can exceed the wall clock), the share of the busy time in
  each part and phase, the share in matmuls, and the `--top` ops with their paths.

Under TensorFlow (its default step, no XLA: the one train_throughput times, in one training
tower per core as `train.py` runs it, or with `--threads default` TensorFlow's own threads) the
same rounds run, traced with `tf.profiler`; each op the executor ran is named by its path of name scopes (Keras's
layers, `gradient_tape/` for the backward pass, the optimizer's scope for the update) and its op
type (a matmul: `MatMul`, `BatchMatMul`, oneDNN's fused matmuls, convolutions, einsums). The
executor runs independent ops on two threads at once, so here too the busy time can exceed the
wall clock.

The results JSON goes to `--out`/`--name`.json (by default this study's `results/step_breakdown.json`);
`--trace DIR` keeps each length's profiler trace there (for TensorBoard's profile plugin or
Perfetto), and under JAX the HLO dump. Peer models are not broken down: their layers have other
names. The figures are the profiler's: op times on a GPU are the device's kernel times; on a CPU
they are the thunks' wall-clock spans on each thread.

The modules: `__main__` holds the command line, the HLO dump's setting and `main`; `measure` builds,
times and traces the step at one length; `traces` reads the profilers' traces; `hlo` XLA's
optimized HLO (what each op is); `parts` an op's phase and part of the model from its path;
`breakdown` the split of the busy time; `report` the table.
"""
