"""Speed: how fast our Transformer trains and decodes on this machine, against keras-hub's at equal size.

`train_throughput` races the training of our model and keras-hub's in one run (tokens/s, MFU,
peak memory, a length sweep, the decoder-only LM against GPT-2); `step_breakdown` shows where our
training step's time goes, op by op, under JAX or TensorFlow; `fused_attention` times one attention
layer's training step through the explicit path and through the fused kernel; `decode` times greedy
and beam-search decoding, in batches and one sentence at a time. `benchmarks/gpu.sh` runs them on a
GPU under JAX.
"""
