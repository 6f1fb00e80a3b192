"""Soft against hard attention on the key-value lookup task, and every score function trained on it.

Two studies of one task, each an entry point:

    python -m benchmarks.attention_family.lookup                          # 12 variants, 1000 steps, seeds 0, 1, 2
    python -m benchmarks.attention_family.lookup --steps 100 --seeds 0    # a quick check
    python -m benchmarks.attention_family.lookup --help                   # every flag
    python -m benchmarks.attention_family.lookup.scores                   # 5 scores, 500 steps, seeds 0, 1, 2
    python -m benchmarks.attention_family.lookup.scores --steps 100 --seeds 0    # a quick check

Soft against hard attention (`__main__`): how fast each variant learns, how noisy its gradient.

The task (`keras_transformer.data.lookup`): a dictionary of `--pairs` key-value pairs and a query
key; the answer is the value stored under it, so exactly one position holds it. The model
(`keras_transformer.models.lookup.KeyValueLookup`): key, query and value embeddings of width
`--width`, one `Attention` read (key-value mode, `--attention-score`), a dense classifier over the
value symbols. The variants differ only in how the score function is trained:

    soft       the weighted average, differentiated exactly
    gumbel     hard: a sampled read, straight-through Gumbel-softmax gradient
    argmax     hard: the argmax read in training too, so the score function gets no gradient
               (a control)
    reinforce_...  hard: sampled reads, the REINFORCE (score-function) gradient with one of the
               variance reductions of `keras_transformer.layers.reinforce` (`--variants` takes
               any of them; the defaults take them all):
        reinforce_plain       no baseline: R itself
        reinforce_learned     a learned scalar baseline, regressed on R
        reinforce_value       an input-dependent baseline: a value head on the query, regressed on R
        reinforce_entropy     the learned baseline and an entropy bonus of weight 0.01
        reinforce_normalized  the learned baseline, advantages normalised over the batch
        reinforce_batch_mean  the mean reward of the batch's other examples
        reinforce_loo2/4/8    2, 4 or 8 reads per example, each one's baseline the mean reward
                              of the example's other reads (leave-one-out)
    reinforce  the model's default estimator (`KeyValueLookup`'s `DEFAULT_REINFORCE`)

What runs (`keras_transformer.training.lookup.compare_variants`, TensorFlow backend, float32):
for each seed, every variant starts from the same initial weights and trains with Adam on the same
stream of `--steps` x `--batch-size` new examples. Every `--every` steps (and before the first)
it records the accuracy on `--held-out` unseen examples, read with `training=False` (hard
variants: the argmax), and the noise of the gradient the optimizer gets for the score function's
weights (key and query embeddings): over `--gradient-batches` fresh minibatches at the current
weights, the total variance tr Cov[g] and the noise-to-signal ratio tr Cov[g] / |mean g|^2.

Output: a table on stdout (per variant, the mean over seeds of the accuracy at four points of the
run, the steps to reach 90% accuracy per seed and the reads that took (steps x batch x reads
per example), the gradient variance at the shared initial weights and its median over the run,
seconds per run), the JSON (`--name`.json, `hard_attention.json` by default: settings, versions,
CPU model and flags, every seed's curves) and a two-panel PNG (`hard_attention.png`: accuracy and
gradient variance against steps, the mean of the seeds) in the `--out` folder (this package's
`results/`, which holds the figure docs/benchmarks/hard-attention.md shows). The defaults take
about 9 minutes on 2 CPU cores.

Every score function (`scores`): docs/benchmarks/scoring.md and that module's docstring.

The modules: `__main__` and `scores`, the two studies' flags, tables and figures; `study`, the
flags of the task and the JSON that both write. What trains is the package's
(`keras_transformer.training.lookup`), so that notebook 04 runs the same studies at a small size.
"""
