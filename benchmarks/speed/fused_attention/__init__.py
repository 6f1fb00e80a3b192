"""Fused against explicit attention: one MultiheadAttention's training step, by length, on this machine's backend.

    python -m benchmarks.speed.fused_attention                    # lengths 64, 256, 1024; TensorFlow
    KERAS_BACKEND=jax python -m benchmarks.speed.fused_attention  # the same on JAX
    python -m benchmarks.speed.fused_attention --lengths 64 --tokens 512 --rounds 1 --steps 2   # a quick check
    python -m benchmarks.speed.fused_attention --help

What `MultiheadAttention(attention_implementation="auto")` decides on: for each length T (at equal
tokens per batch, `--tokens`), with and without causality, the same layer (D `--width`, H
`--heads`, key-padding mask: the last eighth of every sequence is padding) trained by
`model.train_on_batch` (mean squared error, SGD) through the explicit path (scores, masked
softmax, weighted sum) and through the fused `keras.ops.dot_product_attention`, from the same
weights. The two alternate, `--steps` timed steps each per round (after one untimed step that
compiles), for `--rounds` rounds; the median step time of each gives the ratio fused / explicit
speed (above 1: fused is faster). Float32.

Output: a table on stdout; the JSON (`--name`_<backend>.json: settings, command, versions, CPU model
and flags, every step time) in `--out` (by default this study's `results/`, as
`fused_attention_speed_<backend>.json`).

The modules: `__main__` holds the command line and `main`; `measure` the layer's models and their timing.
"""
