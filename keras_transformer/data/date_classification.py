"""A classification task generated in-library, to fine-tune the encoder on: what date a text names.

`date_classification` gives dates written as in the built-in corpus, each with its month, decade
or weekday as a class; `classification_dataset` turns the token ids of texts
(`texts.encode_texts`) and their classes into `(ids int32 [B, L], label int32 [B])`, one text per
row, `<s> text </s>` cut to `L` tokens and padded with 0, `<s>` at position 0 where the encoder's
classification head reads. The label is a class index (0 is a class), for a plain sparse
categorical cross-entropy. Deterministic: the texts depend only on the split, size, seed and
label, and shuffling takes `seed`.
"""

import dataclasses

import tensorflow as tf

from keras_transformer.checks import check_choice, check_int
from keras_transformer.data import dates
from keras_transformer.data.date_words import MONTH_NAMES, WEEKDAY_NAMES
from keras_transformer.data.token_rows import _ordered, _pad_to, _with_ends

__all__ = ["DATE_LABELS", "DateClassification", "date_classification", "classification_dataset"]

MONTH_CLASSES = tuple(name.capitalize() for name in MONTH_NAMES)
WEEKDAY_CLASSES = tuple(name.capitalize() for name in WEEKDAY_NAMES)
DECADE_CLASSES = tuple(f"{year}s" for year in range(dates.FIRST_DATE.year, dates.LAST_DATE.year + 1, 10))
# What `date_classification` can ask of a date, and the names of its classes (label i is class i).
DATE_LABELS = {"month": MONTH_CLASSES, "decade": DECADE_CLASSES, "weekday": WEEKDAY_CLASSES}


@dataclasses.dataclass
class DateClassification:
    """Dates written as in the built-in corpus, each with a class.

    Attributes:
        texts: list of `str`, the dates as typed.
        labels: list of `int`, the class of each: an index into `classes`.
        dates: list of `str`, each text's date in ISO form.
        classes: tuple of `str`, the class names.
    """

    texts: list
    labels: list
    dates: list
    classes: tuple

    def __len__(self):
        return len(self.texts)


def _date_label(date, label):
    if label == "month":
        return date.month - 1
    if label == "weekday":
        return date.weekday()
    return (date.year - dates.FIRST_DATE.year) // 10


def date_classification(split, size=None, seed=0, label="month"):
    """A classification task generated from the built-in corpus: what date a text names.

    The texts are the built-in corpus's sources for `split` and `seed` (so a split's dates
    are never in another split, and a model pre-trained on the train split's text has seen
    no validation or test date), each labelled with
    - "month": its month, 0 (January) .. 11; the reader has to tell the form ("03.04.1987"
      is April, "1987/03/04" March) or read the month's name;
    - "decade": its decade, 0 (1900s) .. 19 (2090s), from a year in digits or in words
      ("nineteen eighty-seven", "two thousand and four");
    - "weekday": its weekday, 0 (Monday) .. 6, a calendar computation over the whole date;
      the forms that name the weekday are left out, so it is never written in the text.

    Args:
        split: "train", "validation" or "test".
        size: number of texts (None: the split's default size).
        seed: the built-in corpus's seed.
        label: a key of `DATE_LABELS`.

    Returns:
        `DateClassification`; a smaller `size` gives a prefix of a larger one.

    Raises:
        ValueError: an unknown `label` or split, or a bad size.
    """
    check_choice("label", label, DATE_LABELS)
    check_choice("split", split, dates.SPLITS)
    size = dates.DEFAULT_SIZES[split] if size is None else check_int("size", size, 0)
    draw = size
    while True:
        samples = dates._sample(split, draw, seed)
        if label == "weekday":  # leave out the forms that spell the answer
            samples = [sample for sample in samples if "weekday" not in sample[1]]
        if len(samples) >= size:
            break
        draw = 2 * draw
    samples = samples[:size]
    return DateClassification(
        texts=[text for _, _, text in samples],
        labels=[_date_label(date, label) for date, _, _ in samples],
        dates=[date.isoformat() for date, _, _ in samples],
        classes=DATE_LABELS[label],
    )


def classification_dataset(ids, labels, seq_len, batch_size, shuffle=False, repeat=False, seed=0, drop_remainder=False):
    """Batches for an encoder-only model's classification `model.fit`.

    Each text is one row, `<s> pieces </s>` cut to `seq_len` tokens and padded with 0; `<s>`
    at position 0 is where the classification head reads.

    Args:
        ids: `int32` RaggedTensor `[N, (T)]` (`encode_texts`), one row per text.
        labels: `N` ints, the class of each text.
        seq_len: L, the tokens per row.
        batch_size: rows per batch.
        shuffle: shuffle the examples (anew each pass).
        repeat: repeat forever.
        seed: shuffle seed.
        drop_remainder: leave out a finite dataset's last, smaller batch.

    Returns:
        `tf.data.Dataset` of `(ids int32 [B, L], label int32 [B])`.

    Raises:
        ValueError: `seq_len` < 3, `batch_size` < 1, `ids` and `labels` differ in length, a
            label is negative, or there is no example.
    """
    seq_len = check_int("seq_len", seq_len, 3)
    batch_size = check_int("batch_size", batch_size, 1)
    labels = [check_int("label", label, 0) for label in labels]
    if not isinstance(ids, tf.RaggedTensor) or ids.shape.rank != 2:
        raise ValueError(f"ids must be an int RaggedTensor [N, (T)] (from encode_texts), got {ids!r}")
    if int(ids.nrows()) != len(labels):
        raise ValueError(f"ids and labels differ in length: {int(ids.nrows())} != {len(labels)}")
    if not labels:
        raise ValueError("No example to classify: 0 texts")
    dataset = tf.data.Dataset.from_tensor_slices((tf.cast(ids, tf.int32), tf.constant(labels, tf.int32)))
    dataset = _ordered(dataset, len(labels), shuffle, repeat, seed)
    dataset = dataset.map(lambda row, label: (_pad_to(_with_ends(row), seq_len), label))
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
