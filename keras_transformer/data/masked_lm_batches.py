"""Batches for an encoder-only model's masked LM: predict the pieces chosen and hidden.

`masked_lm_dataset` turns token ids (`texts.encode_texts`) into `(inputs int32 [B, L], labels
int32 [B, L])`, one text per row, `<s> text </s>` cut to `L` tokens and padded with 0; `<s>` at
position 0 is the position the encoder's classification head reads (BERT's `[CLS]`). Each text
piece (an id of at least `num_reserved`: never padding, `<s>`, `</s>`, `<unk>` or `<mask>`) is
selected with probability `mask_rate` (15%); a selected piece becomes `<mask>` with probability
0.8, a random other text piece with probability 0.1, and stays as it is otherwise
(`mask_tokens`). Labels hold the original id at the selected positions and 0 everywhere else,
which is what `keras_transformer.training.MaskedLabelSmoothedLoss` and `MaskedAccuracy` ignore:
the model trains with the translation model's loss and metric, unchanged, and the loss averages
over exactly the selected pieces.

Deterministic. Shuffling takes `seed`; the choices are drawn with stateless random ops keyed by
`(seed, index)`, `index` the example's position in the dataset's stream (counted after shuffling
and repeating). The same arguments give the same batches in any process, a run resumed by
skipping the batches it had trained on continues with the very batches it would have seen, and
each pass over a repeated dataset masks the texts afresh (dynamic masking).

Why our own masking: tensorflow-text's `mask_language_model` with `RandomItemSelector` and
`MaskValuesChooser` (which keras-hub's `MaskedLMMaskGenerator` wraps) draws from TensorFlow's
global random state (the selector takes a shuffle function, the value chooser nothing), so its
batches differ from run to run and cannot be recomputed on resume; its random tokens are drawn
from the whole vocabulary, reserved ids included; and it picks a fixed count per row where we
draw each piece independently at the rate. The stateless version is a few lines of plain tensor
ops.
"""

import typing

import tensorflow as tf

from keras_transformer.checks import check_int, check_rate
from keras_transformer.data.special_tokens import LM_RESERVED_TOKENS, MASK_ID, PAD_ID, RESERVED_TOKENS
from keras_transformer.data.token_rows import _nonempty_rows, _ordered, _pad_to, _with_ends

__all__ = ["mask_tokens", "masked_lm_dataset"]


class _Masking(typing.NamedTuple):
    """The checked arguments of `mask_tokens` that are the same for every row (see there)."""

    vocab_size: int
    mask_id: int
    num_reserved: int
    mask_rate: float
    mask_token_rate: float
    random_token_rate: float


def mask_tokens(
    ids,
    key,
    vocab_size,
    mask_id=MASK_ID,
    num_reserved=len(LM_RESERVED_TOKENS),
    mask_rate=0.15,
    mask_token_rate=0.8,
    random_token_rate=0.1,
):
    """Chooses and masks the pieces of one sequence, deterministically given `key`.

    Each id of at least `num_reserved` is selected with probability `mask_rate`. A selected id
    becomes `mask_id` with probability `mask_token_rate`, another id of `num_reserved ..
    vocab_size - 1` (uniform among those different from it) with probability
    `random_token_rate`, and is kept otherwise. Arguments are not checked here (see
    `masked_lm_dataset`).

    Args:
        ids: `int32 [T]`, padded with 0.
        key: `int64 [2]`, the stateless random seed of this sequence.
        vocab_size: the vocabulary's size.
        mask_id: the id of `<mask>`.
        num_reserved: the first id of a text piece.
        mask_rate: the probability that a piece is selected.
        mask_token_rate: the probability that a selected piece becomes `mask_id`.
        random_token_rate: the probability that a selected piece becomes another piece.

    Returns:
        `(inputs int32 [T], labels int32 [T])`: `ids` with the replacements, and the original
        id at each selected position, 0 elsewhere.
    """
    select_key, action_key, random_key = tf.unstack(tf.random.experimental.stateless_split(key, num=3))
    shape = tf.shape(ids)
    selected = tf.logical_and(ids >= num_reserved, tf.random.stateless_uniform(shape, seed=select_key) < mask_rate)
    action = tf.random.stateless_uniform(shape, seed=action_key)
    to_mask = tf.logical_and(selected, action < mask_token_rate)
    to_random = tf.logical_and(
        selected, tf.logical_and(action >= mask_token_rate, action < mask_token_rate + random_token_rate)
    )
    # A uniform draw from the other num_pieces - 1 pieces: an offset of 1 .. num_pieces - 1 from this one.
    num_pieces = vocab_size - num_reserved
    offset = tf.random.stateless_uniform(shape, seed=random_key, minval=1, maxval=num_pieces, dtype=tf.int32)
    other = num_reserved + (ids - num_reserved + offset) % num_pieces
    inputs = tf.where(to_mask, tf.constant(mask_id, tf.int32), tf.where(to_random, other, ids))
    labels = tf.where(selected, ids, tf.constant(PAD_ID, tf.int32))
    return inputs, labels


def _checked_masking(vocab_size, mask_id, num_reserved, mask_rate, mask_token_rate, random_token_rate):
    """The masking arguments of `masked_lm_dataset`, checked in this order, as a `_Masking`.

    Raises:
        ValueError: as listed in `masked_lm_dataset`.
    """
    num_reserved = check_int("num_reserved", num_reserved, len(RESERVED_TOKENS) + 1)
    vocab_size = check_int("vocab_size", vocab_size, num_reserved + 2)
    if mask_id is None:
        raise ValueError("mask_id is None: the vocabulary has no <mask>; learn it with extra_reserved=(MASK_TOKEN,)")
    # A reserved id after those of every vocabulary (RESERVED_TOKENS).
    mask_id = check_int("mask_id", mask_id, len(RESERVED_TOKENS), num_reserved - 1)
    mask_rate = check_rate("mask_rate", mask_rate, allow_zero=False)
    mask_token_rate = check_rate("mask_token_rate", mask_token_rate, allow_one=True)
    random_token_rate = check_rate("random_token_rate", random_token_rate, allow_one=True)
    if mask_token_rate + random_token_rate > 1.0:
        raise ValueError(
            "`mask_token_rate + random_token_rate` must be at most 1. "
            f"Received: mask_token_rate={mask_token_rate}, random_token_rate={random_token_rate}"
        )
    return _Masking(vocab_size, mask_id, num_reserved, mask_rate, mask_token_rate, random_token_rate)


def _masked_example(seq_len, seed, masking):
    """The function that makes a stream's example: `(index, row int32 [T])` -> `(inputs, labels)`.

    Args:
        seq_len: L, the tokens per row (`<s>` and `</s>` included).
        seed: the masking seed; example `index` is masked with the key `(seed, index)`.
        masking: a `_Masking`, the arguments of `mask_tokens`.

    Returns:
        A function of `(index int64 [], row int32 [T])` giving `(inputs int32 [L], labels int32 [L])`.
    """

    def example(index, row):
        row = _pad_to(_with_ends(row), seq_len)
        key = tf.stack([tf.constant(seed, tf.int64), index])
        return mask_tokens(row, key, **masking._asdict())

    return example


def masked_lm_dataset(
    ids,
    seq_len,
    batch_size,
    vocab_size,
    mask_id=MASK_ID,
    num_reserved=len(LM_RESERVED_TOKENS),
    mask_rate=0.15,
    mask_token_rate=0.8,
    random_token_rate=0.1,
    shuffle=False,
    repeat=False,
    seed=0,
    drop_remainder=False,
):
    """Batches for an encoder-only model's masked-LM `model.fit`: predict the chosen pieces.

    Each text is one row, `<s> pieces </s>` cut to `seq_len` tokens (a longer text loses its
    tail, `</s>` included) and padded with 0; empty texts are left out. The pieces are chosen
    and replaced by `mask_tokens`, keyed by `(seed, index of the row in the stream)`.

    Args:
        ids: `int32` RaggedTensor `[N, (T)]` (`encode_texts`).
        seq_len: L, the tokens per row (`<s>` and `</s>` included).
        batch_size: rows per batch.
        vocab_size: the vocabulary's size (`SubwordTokenizer.vocab_size`).
        mask_id: the id of `<mask>` (`SubwordTokenizer.mask_id`; `MASK_ID` is 4).
        num_reserved: the number of reserved ids (`SubwordTokenizer.num_reserved`; 5 with
            `<mask>`); these are never selected nor drawn as random pieces.
        mask_rate: the share of pieces selected, in (0, 1).
        mask_token_rate: of those, the share replaced by `<mask>`.
        random_token_rate: of those, the share replaced by another piece; the rest are kept.
        shuffle: shuffle the texts (anew each pass).
        repeat: repeat forever (use with `steps_per_epoch`).
        seed: the shuffle seed and the masking seed.
        drop_remainder: leave out a finite dataset's last, smaller batch.

    Returns:
        `tf.data.Dataset` of `(inputs int32 [B, L], labels int32 [B, L])`: labels hold the
        original id at each selected position and 0 elsewhere.

    Raises:
        ValueError: `seq_len` < 3, `batch_size` < 1, a rate outside its range,
            `mask_token_rate + random_token_rate` > 1, `mask_id` not a reserved id or None (the
            vocabulary has no `<mask>`), fewer than two text pieces in the vocabulary, or no
            text has a token.
    """
    seq_len = check_int("seq_len", seq_len, 3)
    batch_size = check_int("batch_size", batch_size, 1)
    masking = _checked_masking(vocab_size, mask_id, num_reserved, mask_rate, mask_token_rate, random_token_rate)
    seed = check_int("seed", seed, -(2**63))
    dataset, size = _nonempty_rows(ids, "masked LM batches")
    dataset = _ordered(dataset, size, shuffle, repeat, seed).enumerate()
    dataset = dataset.map(_masked_example(seq_len, seed, masking), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
