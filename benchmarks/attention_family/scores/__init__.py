"""The built-in task trained with each attention score function: exact match, BLEU, ms per step, parameters.

    python -m benchmarks.attention_family.scores          # 5 scores x 2 seeds, small preset, 800 steps each
    python -m benchmarks.attention_family.scores --preset tiny --epochs 1 --steps-per-epoch 5 --seeds 0 \
        --scores scaled_dot,additive --train-size 500 --beam-size 1   # a quick check
    python -m benchmarks.attention_family.scores --help   # every flag

The built-in task (the dates corpus of `python train.py`) trained with each score
function s(x, q) of `keras_transformer.layers.AttentionScore` (`--scores`, default all five:
scaled_dot, dot, additive, bilinear, cosine) in every attention sublayer, the model config's
`attention_score` (`train.py --attention-score`), at the same size and budget:

- Every run is `keras_transformer.runs.train`, the job of `train.py`: train.py's `TrainConfig`
  defaults (batch 64, Noam schedule with 400 warm-up steps, label smoothing 0.1, no weight
  averaging) except the preset (`--preset`, small by default), the budget (`--epochs` x
  `--steps-per-epoch` optimizer steps, 4 x 200 by default), the seed, the beam of the test
  evaluation (`--beam-size`, train.py's 4 by default), the training pairs (`--train-size`) and
  float32 precision, always. It learns the vocabularies, trains with `model.fit`, evaluates the
  test split (no export), in a temporary run directory removed at the end.
- Each seed of `--seeds` (0 and 1 by default) generates the corpus and its splits, shuffles the
  batches and initializes the weights; all the scores of one seed train on the same data, batches
  and vocabularies (learned by its first run, then copied into the others' run directories, which
  read them instead of learning them again). Only the score, and the weights it adds, differ.
- The runs go seed by seed, one at a time in one process (`keras.backend.clear_session()` before
  each); the order of the scores is rotated by one place from one seed to the next, so that drift
  of the machine does not fall on one score: with two seeds and five scores, the first score
  runs first for seed 0 and last for seed 1.

Measured per run: exact match (%) and BLEU of the test split (1,000 sentences), as train.py scores
them (`keras_transformer.evaluation`: beam search, sacreBLEU); the median milliseconds per
training step, timed by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`
(fetching the batch, forward and backward pass and Adam's update; validation between epochs is
outside the steps) over every step but the run's first, which traces the training function; the
trainable parameters; the wall seconds of the whole run (vocabularies, training, evaluation).
Per score: each seed's values and their mean, the median over the timed steps of all its
runs and its ratio to scaled_dot's. Another process on the machine slows the runs that overlap
it: the JSON records the load average at the start and at the end.

Output: the runs one line each as they finish, then a table (one row per score: parameters, exact
match per seed and mean, BLEU per seed and mean, ms per step, ratio to scaled_dot) on stdout; the
JSON (`--name`.json, `attention_scores.json` by default: settings, the order of the runs,
versions, CPU model and flags, load average, and per score and per run the figures above, with
each run's chrF, step-time quartiles, first step, training seconds and final training metrics) in
the `--out` folder (the study's `results/` by default).

The modules: `__main__` (the flags and the run), `train` (the runs, one `keras_transformer.runs.train`
each) and `report` (the summary per score, the table and the JSON).
"""
