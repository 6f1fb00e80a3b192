r"""Language-model batches: causal LM windows, masked LM examples, a date classification task.

Text in, tf.data batches out, for the decoder-only (causal LM) and the encoder-only (masked LM,
classification) models:

- Text sources, one list of `str` per split: the built-in dates (`builtin_texts`), the user's
  line files, plain or gzip, one text per line (`read_text_file`, the same reader as the parallel
  files), a TFDS dataset's text feature (`load_tfds_texts`), or any of them by name
  (`load_texts`).
- Ids: `encode_texts` runs a `SubwordTokenizer` over them: `int32 [N, (T)]`, one row per text,
  no special tokens. The masked LM needs `<mask>`: learn its vocabulary with
  `learn_vocabulary(..., extra_reserved=(MASK_TOKEN,))`, which puts `<mask>` at id 4
  (`MASK_ID`, read back as `SubwordTokenizer.mask_id`) and keeps `<pad>` 0, `<unk>` 1, `<s>` 2,
  `</s>` 3 where translation vocabularies have them.
- `causal_lm_dataset`: `(inputs int32 [B, L], labels int32 [B, L])`, labels the inputs shifted
  by one. By default the texts are packed: `<s> text </s> <s> text </s> ...` as one stream cut
  into consecutive windows of `L + 1` tokens, the window's first `L` tokens the inputs and its
  last `L` the labels; no padding but in a finite stream's last window, and attention crosses
  text boundaries (the `<s>` after a `</s>` tells the model a new text starts). Packing wastes
  no compute on padding and keeps every batch the same shape; each window loses one prediction
  (its first token is never a label), and every token of the stream is in exactly one window
  (but for a finite stream's last token when it would be a window of its own, with nothing to
  predict).
  `pack=False` gives one text per row instead (`<s> text </s>` cut to `L + 1` tokens), each
  starting at `<s>` like a prompt.
- `masked_lm_dataset`: `(inputs int32 [B, L], labels int32 [B, L])`, one text per row,
  `<s> text </s>` cut to `L` tokens and padded with 0; `<s>` at position 0 is the position
  the encoder's classification head reads (BERT's `[CLS]`). Each text piece (an id of at least
  `num_reserved`: never padding, `<s>`, `</s>`, `<unk>` or `<mask>`) is selected with
  probability `mask_rate` (15%); a selected piece becomes `<mask>` with probability 0.8, a
  random other text piece with probability 0.1, and stays as it is otherwise. Labels hold the
  original id at the selected positions and 0 everywhere else.
- `date_classification` and `classification_dataset`: a task generated in-library to fine-tune
  the encoder on, a date written as in the built-in corpus and its month, decade or weekday:
  `(ids int32 [B, L], label int32 [B])`.

Labels are 0 wherever the loss must not look (padding, and in the masked LM every unselected
position), which is what `keras_transformer.training.MaskedLabelSmoothedLoss` and
`MaskedAccuracy` ignore: both models train with the translation model's loss and metric,
unchanged. The loss then averages over exactly the predicted tokens. The classification task's
label is a class index (0 is a class), for a plain sparse categorical cross-entropy.

Deterministic. Shuffling takes `seed`; the masked LM's choices are drawn with stateless random
ops keyed by `(seed, index)`, `index` the example's position in the dataset's stream (counted
after shuffling and repeating). The same arguments give the same batches in any process, a run
resumed by skipping the batches it had trained on continues with the very batches it would have
seen, and each pass over a repeated dataset masks the texts afresh (dynamic masking).

Why our own masking: tensorflow-text's `mask_language_model` with `RandomItemSelector` and
`MaskValuesChooser` (which keras-hub's `MaskedLMMaskGenerator` wraps) draws from TensorFlow's
global random state (the selector takes a shuffle function, the value chooser nothing), so its
batches differ from run to run and cannot be recomputed on resume; its random tokens are drawn
from the whole vocabulary, reserved ids included; and it picks a fixed count per row where we
draw each piece independently at the rate. The stateless version is a few lines of plain tensor
ops.
"""

import dataclasses
import numbers

import tensorflow as tf

from keras_transformer.data import dates
from keras_transformer.data.parallel_text import MAX_LINE_BYTES, CorpusError, _read_lines
from keras_transformer.data.special_tokens import END_ID, LM_RESERVED_TOKENS, MASK_ID, PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.data.translation_batches import _tokenize_all

__all__ = [
    "SIDES",
    "DATE_LABELS",
    "TextCorpus",
    "builtin_texts",
    "read_text_file",
    "load_tfds_texts",
    "load_texts",
    "encode_texts",
    "causal_lm_dataset",
    "mask_tokens",
    "masked_lm_dataset",
    "DateClassification",
    "date_classification",
    "classification_dataset",
]

SIDES = ("source", "target", "both")
MONTH_CLASSES = tuple(name.capitalize() for name in dates.MONTH_NAMES)
WEEKDAY_CLASSES = tuple(name.capitalize() for name in dates.WEEKDAY_NAMES)
DECADE_CLASSES = tuple(f"{year}s" for year in range(dates.FIRST_DATE.year, dates.LAST_DATE.year + 1, 10))
# What `date_classification` can ask of a date, and the names of its classes (label i is class i).
DATE_LABELS = {"month": MONTH_CLASSES, "decade": DECADE_CLASSES, "weekday": WEEKDAY_CLASSES}


@dataclasses.dataclass
class TextCorpus:
    """The texts of one split, and what was left out while reading them.

    Attributes:
        texts: list of `str`, one text (a sentence, a line, a document) each.
        skipped: `{reason: number of lines}` left out (`undecodable`, `empty`, `line_too_long`).
    """

    texts: list
    skipped: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return len(self.texts)


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _check_rate(name, value, low_open=True, high_open=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    value = float(value)
    low_ok = value > 0.0 if low_open else value >= 0.0
    high_ok = value < 1.0 if high_open else value <= 1.0
    if not (low_ok and high_ok):
        interval = ("(" if low_open else "[") + "0, 1" + (")" if high_open else "]")
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value


# --------------------------------------------------------------------------
# Text sources
# --------------------------------------------------------------------------
def builtin_texts(split, size=None, seed=0, side="source"):
    """The built-in corpus's text, for a language model.

    A pair of the built-in corpus is a date as someone typed it and the same date in ISO form.
    The typed dates are the text (`side="source"`, the default): they hold every one of the 19
    forms, the ISO form among them. The ISO targets are a function of the sources and one form
    only, so adding them (`"both"`: each pair's source, then its target) mostly makes the corpus
    more ISO; `"target"` gives them alone.

    Args:
        split: "train", "validation" or "test"; as in `dates.builtin_corpus`, no date of one
            split occurs in another, for the same seed.
        size: number of pairs (None: the split's default size, 20,000 for train).
        seed: the corpus seed (`dates.builtin_corpus`).
        side: one of `SIDES`.

    Returns:
        `TextCorpus`, its texts those of `builtin_corpus(split, size, seed)` (two per pair for
        `"both"`).

    Raises:
        ValueError: an unknown `side` (or split, or a bad size).
    """
    if side not in SIDES:
        raise ValueError(f"Unknown side {side!r}; expected one of {SIDES}")
    sources, targets = dates.builtin_corpus(split, size=size, seed=seed)
    if side == "source":
        return TextCorpus(sources)
    if side == "target":
        return TextCorpus(targets)
    return TextCorpus([text for pair in zip(sources, targets) for text in pair])


def _decode_line(line, skipped):
    """The `str` of one byte line, stripped, or None (counted in `skipped`) if it is unusable."""
    reason = None
    if len(line) > MAX_LINE_BYTES:
        reason = "line_too_long"
    else:
        try:
            line = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            reason = "undecodable"
        else:
            if not line:
                reason = "empty"
    if reason:
        skipped[reason] = skipped.get(reason, 0) + 1
        return None
    return line


def _collect(lines):
    texts, skipped = [], {}
    for line in lines:
        text = _decode_line(line, skipped)
        if text is not None:
            texts.append(text)
    return TextCorpus(texts, skipped)


def read_text_file(path):
    r"""Read a text file, one text per line (UTF-8, plain or gzip), as the parallel files are read.

    Lines are split on `\n` only; a line that is not valid UTF-8, empty (after stripping
    whitespace) or longer than `MAX_LINE_BYTES` is skipped and counted.

    Args:
        path: the file (str or path-like); gzip is recognized by its first bytes.

    Returns:
        `TextCorpus`.

    Raises:
        FileNotFoundError: the file is missing.
        CorpusError: the file is empty or not valid gzip, or has no usable line.
    """
    lines = _read_lines(path)
    if not lines:
        raise CorpusError(f"{path} is empty")
    corpus = _collect(lines)
    if not corpus.texts:
        raise CorpusError(f"No usable lines in {path} (skipped: {corpus.skipped})")
    return corpus


def load_tfds_texts(name, split, feature="text", data_dir=None, download=True):
    """Read the text feature of a split of a TFDS dataset (`lm1b`, `imdb_reviews`, ...).

    Args:
        name: TFDS name, with its config if it has several.
        split: TFDS split name.
        feature: the key of the text feature in the dataset's examples.
        data_dir: TFDS data directory (None: TFDS's default, `~/tensorflow_datasets`).
        download: let TFDS download and prepare the dataset if it is not there yet.

    Returns:
        `TextCorpus`, its lines skipped by the same rules as `read_text_file`.

    Raises:
        CorpusError: the dataset cannot be loaded or has no usable text.
        ValueError: the examples have no `feature`, or it is not a scalar string (the message
            lists the features they have).
    """
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir, download=download)
    except Exception as error:  # TFDS raises many types (DatasetNotFoundError, ValueError, AssertionError ...)
        raise CorpusError(f"Cannot load TFDS dataset {name!r}, split {split!r}: {error}") from None
    spec = dataset.element_spec
    if not isinstance(spec, dict) or feature not in spec:
        available = sorted(spec) if isinstance(spec, dict) else spec
        raise ValueError(f"TFDS dataset {name!r} has no feature {feature!r}; its features: {available}")
    if spec[feature].dtype != tf.string or spec[feature].shape.rank != 0:
        raise ValueError(f"Feature {feature!r} of TFDS dataset {name!r} is not a text: {spec[feature]}")
    corpus = _collect(tfds.as_numpy(dataset.map(lambda example: example[feature])))
    if not corpus.texts:
        raise CorpusError(f"TFDS dataset {name!r}, split {split!r} has no usable text in {feature!r}")
    return corpus


def load_texts(
    corpus, split, size=0, seed=0, side="source", path=None, tfds_name=None, tfds_feature="text", tfds_data_dir=None
):
    """A split of text from any source, by name: the one entry point for a command line.

    Args:
        corpus: "builtin", "files" or "tfds".
        split: "train", "validation" or "test" (for TFDS, the dataset's own split name).
        size: keep the first `size` texts (0: all; the built-in corpus then generates its
            default size).
        seed: the built-in corpus's seed.
        side: the built-in corpus's side (`builtin_texts`).
        path: the line file of this split, for "files".
        tfds_name: the TFDS dataset, for "tfds".
        tfds_feature: its text feature.
        tfds_data_dir: its data directory (None or "": TFDS's default).

    Returns:
        `TextCorpus`.

    Raises:
        ValueError: an unknown `corpus`, or the argument it needs is missing.
    """
    size = _check_int("size", size, 0)
    if corpus == "builtin":
        return builtin_texts(split, size=size or None, seed=seed, side=side)
    if corpus == "files":
        if path is None:
            raise ValueError(f"corpus 'files' needs the path of split {split!r}'s line file")
        text = read_text_file(path)
    elif corpus == "tfds":
        if not tfds_name:
            raise ValueError("corpus 'tfds' needs tfds_name")
        text = load_tfds_texts(tfds_name, split, tfds_feature, tfds_data_dir or None)
    else:
        raise ValueError(f"Unknown corpus {corpus!r}; expected 'builtin', 'files' or 'tfds'")
    return TextCorpus(text.texts[:size], text.skipped) if size else text


# --------------------------------------------------------------------------
# Ids
# --------------------------------------------------------------------------
def encode_texts(texts, tokenizer):
    """Token ids of texts, one row per text, in order (an empty text gives an empty row).

    Args:
        texts: a `TextCorpus` or a list of `str`.
        tokenizer: a `SubwordTokenizer`.

    Returns:
        `int32` RaggedTensor `[N, (T)]`, no special tokens.
    """
    if isinstance(texts, TextCorpus):
        texts = texts.texts
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of strings, not a single string")
    return _tokenize_all(tokenizer, list(texts))


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


# --------------------------------------------------------------------------
# Causal language model
# --------------------------------------------------------------------------
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
    seq_len = _check_int("seq_len", seq_len, 2)
    batch_size = _check_int("batch_size", batch_size, 1)
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


# --------------------------------------------------------------------------
# Masked language model
# --------------------------------------------------------------------------
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
    seq_len = _check_int("seq_len", seq_len, 3)
    batch_size = _check_int("batch_size", batch_size, 1)
    num_reserved = _check_int("num_reserved", num_reserved, len(RESERVED_TOKENS) + 1)
    vocab_size = _check_int("vocab_size", vocab_size, num_reserved + 2)
    if mask_id is None:
        raise ValueError("mask_id is None: the vocabulary has no <mask>; learn it with extra_reserved=(MASK_TOKEN,)")
    mask_id = _check_int("mask_id", mask_id, 0)
    if not len(RESERVED_TOKENS) <= mask_id < num_reserved:
        raise ValueError(
            f"mask_id must be a reserved id after the first {len(RESERVED_TOKENS)} (< num_reserved={num_reserved}), "
            f"got {mask_id}"
        )
    mask_rate = _check_rate("mask_rate", mask_rate)
    mask_token_rate = _check_rate("mask_token_rate", mask_token_rate, low_open=False, high_open=False)
    random_token_rate = _check_rate("random_token_rate", random_token_rate, low_open=False, high_open=False)
    if mask_token_rate + random_token_rate > 1.0:
        raise ValueError(
            f"mask_token_rate + random_token_rate must be at most 1, got {mask_token_rate} + {random_token_rate}"
        )
    seed = _check_int("seed", seed, -(2**63))
    dataset, size = _nonempty_rows(ids, "masked LM batches")
    dataset = _ordered(dataset, size, shuffle, repeat, seed).enumerate()

    def example(index, row):
        row = _pad_to(_with_ends(row), seq_len)
        key = tf.stack([tf.constant(seed, tf.int64), index])
        return mask_tokens(row, key, vocab_size, mask_id, num_reserved, mask_rate, mask_token_rate, random_token_rate)

    dataset = dataset.map(example, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


# --------------------------------------------------------------------------
# A classification task: what a date's text says
# --------------------------------------------------------------------------
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
    if label not in DATE_LABELS:
        raise ValueError(f"Unknown label {label!r}; expected one of {tuple(DATE_LABELS)}")
    if split not in dates.SPLITS:
        raise ValueError(f"Unknown split {split!r}; expected one of {dates.SPLITS}")
    size = dates.DEFAULT_SIZES[split] if size is None else _check_int("size", size, 0)
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
    seq_len = _check_int("seq_len", seq_len, 3)
    batch_size = _check_int("batch_size", batch_size, 1)
    labels = [_check_int("label", label, 0) for label in labels]
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
