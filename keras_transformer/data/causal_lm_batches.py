"""Batches for a decoder-only model (causal LM): predict each next token.

`causal_lm_dataset` turns token ids (`texts.encode_texts`) into `(inputs int32 [B, L], labels
int32 [B, L])`, labels the inputs shifted by one. By default the texts are packed:
`<s> text </s> <s> text </s> ...` as one stream cut into consecutive windows of `L + 1` tokens,
the window's first `L` tokens the inputs and its last `L` the labels; no padding but in a finite
stream's last window, and attention crosses text boundaries (the `<s>` after a `</s>` tells the
model a new text starts). Packing wastes no compute on padding and keeps every batch the same
shape; each window loses one prediction (its first token is never a label), and every token of
the stream is in exactly one window (but for a finite stream's last token when it would be a
window of its own, with nothing to predict). `pack=False` gives one text per row instead
(`<s> text </s>` cut to `L + 1` tokens), each starting at `<s>` like a prompt.

Labels are 0 at padding, which is what `keras_transformer.training.MaskedLabelSmoothedLoss` and
`MaskedAccuracy` ignore: the model trains with the translation model's loss and metric,
unchanged, and the loss averages over exactly the predicted tokens.

Deterministic: shuffling takes `seed`, so the same arguments give the same batches in any process.
"""

import tensorflow as tf

from keras_transformer.checks import check_int
from keras_transformer.data.token_rows import _nonempty_rows, _ordered, _pad_to, _with_ends

__all__ = ["causal_lm_dataset"]


def causal_lm_dataset(ids, seq_len, batch_size, shuffle=False, repeat=False, seed=0, pack=True, drop_remainder=False):
    """Batches for a decoder-only model's `model.fit`: predict each next token.

    Each text becomes `<s> pieces </s>`. Packed (the default), they form one stream, in order
    (or shuffled by text), cut into consecutive windows of `seq_len + 1` tokens; with
    `pack=False`, each text is a window of its own, cut to `seq_len + 1` tokens. A window `w`
    gives `inputs = w[:-1]`, `labels = w[1:]`, padded with 0 to `seq_len`; a one-token window
    (nothing to predict) is left out. Empty texts are left out.

    Args:
        ids: `int32` RaggedTensor `[N, (T)]` (`encode_texts`).
        seq_len: L, the tokens per row.
        batch_size: rows per batch.
        shuffle: shuffle the texts before they are packed (anew each pass).
        repeat: repeat forever (use with `steps_per_epoch`).
        seed: shuffle seed.
        pack: pack the texts into full windows (False: one text per row).
        drop_remainder: leave out a finite dataset's last, smaller batch.

    Returns:
        `tf.data.Dataset` of `(inputs int32 [B, L], labels int32 [B, L])`, labels 0 at padding.

    Raises:
        ValueError: `seq_len` < 2, `batch_size` < 1, or no text has a token.
    """
    seq_len = check_int("seq_len", seq_len, 2)
    batch_size = check_int("batch_size", batch_size, 1)
    dataset, size = _nonempty_rows(ids, "causal LM batches")
    dataset = _ordered(dataset, size, shuffle, repeat, seed).map(_with_ends, num_parallel_calls=tf.data.AUTOTUNE)
    if pack:
        dataset = dataset.rebatch(seq_len + 1)
    else:
        dataset = dataset.map(lambda window: window[: seq_len + 1])
    dataset = dataset.filter(lambda window: tf.shape(window)[0] >= 2)
    dataset = dataset.map(
        lambda window: (_pad_to(window[:-1], seq_len), _pad_to(window[1:], seq_len)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
