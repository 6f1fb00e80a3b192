"""Why self-attention: one layer's training step against the sequence length n, beside a GRU and a convolution.

    python -m benchmarks.attention_family.length_scaling        # d 128, 4 heads, batch 8, n = 16 .. 1024
    python -m benchmarks.attention_family.length_scaling --lengths 16,32 --repeats 1 --warmup-repeats 0 \
        --steps 1                                                 # a quick check
    python -m benchmarks.attention_family.length_scaling --help # every flag

The measured side of the paper's section 4 ("Why Self-Attention") and its Table 1. Three layers of
the same width d (`--d-model`), each mapping `[B, n, d]` to `[B, n, d]` in float32:

    self-attention   `keras_transformer.layers.MultiheadAttention(num_heads=--num-heads)` as the
                     encoder uses it: Q, K, V and output projections, residual connection and
                     LayerNorm, a padding mask with no padding, no dropout
    GRU              `keras.layers.GRU(d, return_sequences=True)` (Keras's default reset_after);
                     on a CPU a `tf.while_loop` of n steps (cuDNN's kernel would serve a GPU)
    conv             `keras.layers.Conv1D(d, kernel_size=--kernel-size, padding="same")`, k = 3 by
                     default: contiguous, undilated

What runs, in one process (TensorFlow backend):

- Each layer is built once (seeded) and its training step is one `tf.function` (XLA with
  `--jit-compile true`): the forward pass on a seeded random normal batch `[--batch-size, n, d]`,
  the scalar loss mean(outputs^2), and its gradients with respect to the inputs and every
  trainable weight. One concrete function per layer and length.
- Each (layer, length) is first called once untimed (tracing), then every repeat times `--steps`
  consecutive steps of each layer at each length, the three layers interleaved at each length and
  their order rotated from repeat to repeat, so that drift of the machine falls on all alike. The
  first `--warmup-repeats` repeats are not counted; the report gives the median over `--repeats`
  repeats of the milliseconds per step.
- FLOPs are counted from formulas: the matmuls of the forward pass of one sequence (2 FLOPs per
  multiply-add; biases, softmax, LayerNorm, gates' nonlinearities and the loss not counted),
  times 3 for a training step (the backward pass is twice the forward), times the batch:
      self-attention   8 n d^2 + 4 n^2 d   (Q, K, V, output projections; scores and weighted sum)
      GRU              12 n d^2            (input and recurrent kernels, 3 gates each)
      conv             2 k n d^2
- The log-log slope of the measured time against n (least squares of log t on log n) over the
  upper lengths: those above d (`--fit-from` sets the smallest), where the n^2 d of attention
  overtakes its n d^2, or the two largest when fewer than two are. The same slope of the FLOP
  formula is printed next to it: attention's tends to 2 as n >> d (about 1.7 over n = 256 .. 1024
  at d = 128), the GRU's and the convolution's are 1.
- Next to the measurements, the paper's Table 1 (n length, d width, k kernel size):
      layer type       complexity per layer   sequential operations   maximum path length
      self-attention   O(n^2 d)               O(1)                    O(1)
      recurrent        O(n d^2)               O(n)                    O(n)
      convolutional    O(k n d^2)             O(1)                    O(log_k n)
  The paper's O(log_k n) path length is for dilated convolutions; a stack of contiguous ones like
  this layer needs O(n/k) layers to connect every pair of positions.

Output: a table (ms per step per layer and length, the ratios self-attention / GRU and
self-attention / conv, GFLOP per training step of each layer), the slopes and Table 1 on stdout;
the JSON (`--name`.json, `scaling.json` by default: settings, versions, CPU model and flags, and
per layer its Table 1 row, FLOP formula, FLOPs, times of every repeat, medians, GFLOP/s,
first-call seconds and slopes; the ratios) and a log-log PNG of ms per step against n, with guides
of slope 1 and 2 (`scaling.png`), in the `--out` folder (the study's `results/`, which holds the
run docs/benchmarks/scaling.md quotes).

The modules: `__main__` (the flags and the run), `measure` (the layers' FLOP formulas and the
slope fit, plain arithmetic; the layers, their timing and the summary of the timings) and
`report` (the table, the JSON and the PNG).
"""
