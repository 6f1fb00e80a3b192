"""Data for the models: corpora, tokenizers and tf.data pipelines.

- `dates`: the built-in corpus, dates written many ways -> ISO dates, generated from a seed
  (no TensorFlow).
- `parallel_text`: sentence pairs of any corpus by split: the built-in one, the user's
  line-aligned text files, TFDS datasets.
- `tokenizers`: tensorflow-text WordPiece, learned from text, run in the graph.
- `lookup`: the key-value lookup task (exactly one position holds the answer), generated from a
  seed, for hard attention (no TensorFlow).
- `translation_batches`: tf.data batches for the translation model: tokenize, drop overlong
  pairs, bucket by length, batch.
- `language_batches`: text of any of those sources for the language models, tf.data batches for
  the causal LM (packed windows) and the masked LM (deterministic masking), and a date
  classification task generated in-library for fine-tuning.
"""
