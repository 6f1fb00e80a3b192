"""Data for the models: corpora, tokenizers and tf.data pipelines.

- `dates`: the built-in corpus, dates written many ways -> ISO dates, generated from a seed
  (no TensorFlow); `date_forms`: the ways a date is written and typed; `date_words`: month and
  weekday names, numbers and years in words.
- `typed_dates`: dates typed the way people type them, a held-out set by kind of typing (no
  TensorFlow).
- `parallel_text`: sentence pairs of any corpus by split: the built-in one, the user's
  line-aligned text files, TFDS datasets.
- `special_tokens`: the reserved tokens every vocabulary starts with, and their ids (no
  TensorFlow).
- `text_normalization`: text as the tokenizer sees it: cleaned, optionally typing-normalized,
  split into words.
- `vocabulary`: WordPiece vocabularies learned from text, written and read as files.
- `tokenizers`: the tensorflow-text WordPiece tokenizer over a vocabulary, run in the graph.
- `lookup`: the key-value lookup task (exactly one position holds the answer), generated from a
  seed, for hard attention (no TensorFlow).
- `translation_batches`: tf.data batches for the translation model: tokenize, drop overlong
  pairs, bucket by length, batch.
- `texts`: text of any of those sources for the language models, one list per split, and its
  token ids.
- `causal_lm_batches`: tf.data batches for the causal LM: the texts packed into windows.
- `masked_lm_batches`: tf.data batches for the masked LM: deterministic masking, anew each pass.
- `date_classification`: a date classification task generated in-library, for fine-tuning, and
  its tf.data batches.
- `topic_sentences`: sentences of a small grammar whose words all belong to the sentence's topic,
  labelled with it: text a masked LM can learn from, and a classification task (no TensorFlow).
- `token_rows`: what those share: the rows of token ids on their way to a batch (their
  arguments are checked by `keras_transformer.checks`, as everywhere in the package).
"""
