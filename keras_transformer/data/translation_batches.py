"""tf.data input pipelines: tokenize parallel text, drop overlong pairs, bucket by length, batch.

Feeds `model.fit` with `((source_ids [B, S], target_in_ids [B, T]), target_out_ids [B, T])`,
all int32 and zero-padded, where `target_in_ids = <s> y` and `target_out_ids = y </s>` (the
tutorial's decoder inputs and labels).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer.data.tokenizers import END_ID, START_ID

# Tokenize this many sentences per call, so a large corpus never becomes one huge tensor.
_TOKENIZE_CHUNK = 8192


@dataclasses.dataclass
class EncodedPairs:
    """Token ids of a parallel corpus, overlong pairs removed.

    Attributes:
        source_ids: int32 `tf.RaggedTensor` `[N, (S)]`, no special tokens.
        target_ids: int32 `tf.RaggedTensor` `[N, (T)]`, no special tokens.
        num_dropped: pairs removed because a side was longer than its maximum, or empty.
    """

    source_ids: tf.RaggedTensor
    target_ids: tf.RaggedTensor
    num_dropped: int

    def __len__(self):
        return int(self.source_ids.nrows())

    def mean_target_tokens(self):
        """Mean number of target tokens per pair, counting the end token."""
        return float(np.mean(self.target_ids.row_lengths().numpy() + 1)) if len(self) else 0.0


def _tokenize_all(tokenizer, texts):
    chunks = [
        tokenizer.tokenize(tf.constant(texts[start : start + _TOKENIZE_CHUNK], dtype=tf.string))
        for start in range(0, len(texts), _TOKENIZE_CHUNK)
    ]
    if not chunks:
        return tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    return tf.cast(tf.concat(chunks, axis=0), tf.int32)


def encode_pairs(sources, targets, source_tokenizer, target_tokenizer, max_source_len, max_target_len):
    """Tokenize a parallel corpus and drop the pairs that do not fit.

    A pair is kept when its source has 1 to `max_source_len` tokens and its target 1 to
    `max_target_len - 1` tokens (one place is kept for `<s>` / `</s>`).

    Args:
        sources: list of source sentences (str).
        targets: list of target sentences (str), as long as `sources`.
        source_tokenizer: `SubwordTokenizer` for `sources`.
        target_tokenizer: `SubwordTokenizer` for `targets`.
        max_source_len: int, the most source tokens a kept pair may have.
        max_target_len: int, the most target tokens a kept pair may have once `<s>` / `</s>` is
            added (so at most `max_target_len - 1` tokens of text).

    Returns:
        `EncodedPairs`.

    Raises:
        ValueError: `sources` and `targets` differ in length.
    """
    if len(sources) != len(targets):
        raise ValueError(f"Sources and targets differ in length: {len(sources)} != {len(targets)}")
    source_ids = _tokenize_all(source_tokenizer, list(sources))
    target_ids = _tokenize_all(target_tokenizer, list(targets))
    source_lengths = source_ids.row_lengths().numpy()
    target_lengths = target_ids.row_lengths().numpy()
    keep = (
        (source_lengths >= 1)
        & (source_lengths <= max_source_len)
        & (target_lengths >= 1)
        & (target_lengths <= max_target_len - 1)
    )
    kept_indices = np.flatnonzero(keep)
    return EncodedPairs(
        source_ids=tf.gather(source_ids, kept_indices),
        target_ids=tf.gather(target_ids, kept_indices),
        num_dropped=int(len(keep) - len(kept_indices)),
    )


def _to_model_inputs(source, target):
    start = tf.constant([START_ID], tf.int32)
    end = tf.constant([END_ID], tf.int32)
    return (source, tf.concat([start, target], 0)), tf.concat([target, end], 0)


def make_dataset(pairs, batch_size, shuffle=False, repeat=False, seed=0, bucket_width=8, batch_tokens=0):
    """Batches for `model.fit` / `model.evaluate`.

    Pairs are grouped into buckets of similar length (`bucket_width` tokens apart, by the
    longer side) so that batches carry little padding, then padded to the longest in the batch.

    Args:
        pairs: `EncodedPairs`.
        batch_size: sentence pairs per batch (when `batch_tokens` is 0).
        batch_tokens: if > 0, batch by token budget instead: a bucket of pairs up to `L` tokens
            long gets `max(1, batch_tokens // L)` pairs per batch, so a batch holds at most about
            `batch_tokens` tokens, padding included (the longer side counted).
        shuffle: shuffle the pairs (reshuffled every pass).
        repeat: repeat forever (use with `steps_per_epoch`; avoids the iterator restart that
            stalls the first step of every epoch).
        seed: shuffle seed.
        bucket_width: width of the length buckets, in tokens.

    Returns:
        `tf.data.Dataset` of `((source_ids [B, S], target_in_ids [B, T]), target_out_ids [B, T])`.
    """
    if len(pairs) == 0:
        raise ValueError("No sentence pairs to batch: the corpus is empty after length filtering")
    dataset = tf.data.Dataset.from_tensor_slices((pairs.source_ids, pairs.target_ids))
    if shuffle:
        dataset = dataset.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.map(_to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
    longest = int(max(tf.reduce_max(pairs.source_ids.row_lengths()), tf.reduce_max(pairs.target_ids.row_lengths()) + 1))
    boundaries = list(range(bucket_width + 1, longest + 1, bucket_width))
    dataset = dataset.bucket_by_sequence_length(
        element_length_func=lambda inputs, labels: tf.maximum(tf.shape(inputs[0])[0], tf.shape(labels)[0]),
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[max(1, batch_tokens // length) for length in boundaries + [longest]]
        if batch_tokens
        else [batch_size] * (len(boundaries) + 1),
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
