"""Rows of token ids on their way to the language-model batches.

The steps that the causal LM, the masked LM and the classification batches share: the non-empty
rows of encoded texts as a dataset (`int32 [T]` each), their order (shuffled anew each pass,
repeated), `<s>` and `</s>` around a row, and a row cut or padded with `<pad>` (0) to a fixed
length.
"""

import tensorflow as tf

from keras_transformer.data.special_tokens import END_ID, PAD_ID, START_ID


def _nonempty_rows(ids, what):
    """A dataset of the non-empty rows of `ids` (`int32 [N, (T)]`), each `int32 [T]`."""
    if not isinstance(ids, tf.RaggedTensor) or ids.shape.rank != 2:
        raise ValueError(f"ids must be an int RaggedTensor [N, (T)] (from encode_texts), got {ids!r}")
    lengths = ids.row_lengths()
    if int(tf.reduce_sum(lengths)) == 0:
        raise ValueError(f"No text to make {what} of: {int(ids.nrows())} text(s), 0 tokens")
    kept = tf.gather(tf.cast(ids, tf.int32), tf.where(lengths > 0)[:, 0])
    return tf.data.Dataset.from_tensor_slices(kept), int(kept.nrows())


def _ordered(dataset, size, shuffle, repeat, seed):
    if shuffle:
        dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset


def _with_ends(ids):
    return tf.concat([[START_ID], ids, [END_ID]], axis=0)


def _pad_to(ids, length):
    ids = ids[:length]
    return tf.ensure_shape(tf.pad(ids, [[0, length - tf.shape(ids)[0]]], constant_values=PAD_ID), [length])
