"""Text for the language models, one list of `str` per split, and its token ids.

- Sources: the built-in dates (`builtin_texts`), the user's line files, plain or gzip, one text
  per line (`read_text_file`, the same reader as the parallel files), a TFDS dataset's text
  feature (`load_tfds_texts`), or any of them by name (`load_texts`). Each gives a `TextCorpus`:
  the texts, and the number of lines left out for each reason.
- Ids: `encode_texts` runs a `SubwordTokenizer` over them: `int32 [N, (T)]`, one row per text,
  no special tokens. The masked LM needs `<mask>`: learn its vocabulary with
  `learn_vocabulary(..., extra_reserved=(MASK_TOKEN,))`, which puts `<mask>` at id 4
  (`MASK_ID`, read back as `SubwordTokenizer.mask_id`) and keeps `<pad>` 0, `<unk>` 1, `<s>` 2,
  `</s>` 3 where translation vocabularies have them.

The ids become batches in `causal_lm_batches`, `masked_lm_batches` and `date_classification`.
"""

import dataclasses

import tensorflow as tf

from keras_transformer.checks import check_choice, check_int
from keras_transformer.data import dates
from keras_transformer.data.parallel_text import MAX_LINE_BYTES, CorpusError, _read_lines
from keras_transformer.data.translation_batches import _tokenize_all

__all__ = ["SIDES", "TextCorpus", "builtin_texts", "read_text_file", "load_tfds_texts", "load_texts", "encode_texts"]

SIDES = ("source", "target", "both")


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
    check_choice("side", side, SIDES)
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
    size = check_int("size", size, 0)
    check_choice("corpus", corpus, ("builtin", "files", "tfds"))
    if corpus == "builtin":
        return builtin_texts(split, size=size or None, seed=seed, side=side)
    if corpus == "files":
        if path is None:
            raise ValueError(f"corpus 'files' needs the path of split {split!r}'s line file")
        text = read_text_file(path)
    else:
        if not tfds_name:
            raise ValueError("corpus 'tfds' needs tfds_name")
        text = load_tfds_texts(tfds_name, split, tfds_feature, tfds_data_dir or None)
    return TextCorpus(text.texts[:size], text.skipped) if size else text


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
