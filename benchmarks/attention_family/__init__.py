"""Attention-family studies: which score function, soft or hard reads, and why self-attention at all.

`scores` trains the built-in translation task with each score function of
`keras_transformer.layers.AttentionScore`; `length_scaling` times one self-attention layer against
a GRU and a convolution over the sequence length (the paper's section 4 and Table 1); `lookup`
trains the key-value lookup task with soft and hard attention (REINFORCE's estimators,
straight-through Gumbel) and, in `lookup.scores`, with every score function. Run each as
`python -m benchmarks.attention_family.<study>` (and `python -m benchmarks.attention_family.lookup.scores`).
"""
