r"""Sentence pairs by split: the built-in dates, the user's line-aligned text files, TFDS datasets.

Every source gives a `ParallelText` per split: equal-length lists of source and target
sentences, plus counts of the pairs it skipped and why. Nothing is dropped silently and nothing
can shift out of alignment:

- text files (plain or gzip, told apart by their first bytes, not their names) are split on
  `\n` only, as bytes, so a U+2028 or a stray `\r` inside a sentence never moves the lines of
  one file against the other; files whose line counts differ are an error; a pair whose line is
  not valid UTF-8 on either side, is empty on either side, or is longer than `MAX_LINE_BYTES`
  is skipped and counted;
- TFDS translation datasets (`ted_hrlr_translate/pt_to_en`, `wmt14_translate/de-en`, ...) are
  read with `tfds.load(..., as_supervised=True)`, in the dataset's own (source, target) order.
"""

import dataclasses
import gzip
import zlib
from pathlib import Path

from keras_transformer.checks import check_choice
from keras_transformer.data import dates

SPLITS = ("train", "validation", "test")
# Longer lines are skipped before tokenization: no sentence is this long, and a runaway line
# (a file without newlines) must not become one huge tensor.
MAX_LINE_BYTES = 10_000
_GZIP_MAGIC = b"\x1f\x8b"


class CorpusError(Exception):
    """Input data that cannot be used as it is (printed as one line by the CLI)."""


@dataclasses.dataclass
class ParallelText:
    """Sentence pairs of one split.

    Attributes:
        sources, targets: equal-length lists of str.
        skipped: `{reason: number of pairs}` left out while reading (`undecodable`, `empty`,
            `line_too_long`).
    """

    sources: list
    targets: list
    skipped: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return len(self.sources)

    def head(self, size):
        """The first `size` pairs (all when `size` is 0)."""
        if not size:
            return self
        return ParallelText(self.sources[:size], self.targets[:size], dict(self.skipped))


def _read_lines(path):
    """The lines of a plain or gzipped file, as bytes without their line ending."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No such file: {path}")
    with open(path, "rb") as file:
        compressed = file.read(2) == _GZIP_MAGIC
    try:
        with gzip.open(path, "rb") if compressed else open(path, "rb") as file:
            data = file.read()
    except (OSError, EOFError, zlib.error) as error:
        raise CorpusError(f"{path} is not a readable gzip file ({error})") from None
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the final newline ends the last line; it does not start a new one
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _decode_pair(source, target, skipped):
    """`(str, str)` of a pair of byte lines, or None (counted in `skipped`) if it is unusable."""
    reason = None
    if len(source) > MAX_LINE_BYTES or len(target) > MAX_LINE_BYTES:
        reason = "line_too_long"
    else:
        try:
            source, target = source.decode("utf-8").strip(), target.decode("utf-8").strip()
        except UnicodeDecodeError:
            reason = "undecodable"
        else:
            if not source or not target:
                reason = "empty"
    if reason:
        skipped[reason] = skipped.get(reason, 0) + 1
        return None
    return source, target


def _collect(pairs):
    """ParallelText of an iterable of byte pairs."""
    sources, targets, skipped = [], [], {}
    for source, target in pairs:
        decoded = _decode_pair(source, target, skipped)
        if decoded:
            sources.append(decoded[0])
            targets.append(decoded[1])
    return ParallelText(sources, targets, skipped)


def read_parallel_files(source_path, target_path):
    """Read a line-aligned pair of text files (plain or gzip, UTF-8, one sentence per line).

    Args:
        source_path: path of the source-language file (str or path-like).
        target_path: path of the target-language file; line `i` translates line `i` of `source_path`.

    Returns:
        `ParallelText`.

    Raises:
        FileNotFoundError: a file is missing.
        CorpusError: a file is empty or not valid gzip, the line counts differ, or no pair is
            usable.
    """
    source_lines, target_lines = _read_lines(source_path), _read_lines(target_path)
    for path, lines in ((source_path, source_lines), (target_path, target_lines)):
        if not lines:
            raise CorpusError(f"{path} is empty")
    if len(source_lines) != len(target_lines):
        raise CorpusError(
            f"{source_path} has {len(source_lines)} lines but {target_path} has {len(target_lines)}: "
            "parallel files must be line-aligned, one sentence per line"
        )
    text = _collect(zip(source_lines, target_lines))
    if not text.sources:
        raise CorpusError(f"No usable sentence pairs in {source_path} / {target_path} (skipped: {text.skipped})")
    return text


def load_tfds(name, split, data_dir=None, download=True):
    """Read a split of a TFDS translation dataset in its supervised (source, target) order.

    Args:
        name: TFDS name with config, e.g. `ted_hrlr_translate/pt_to_en`.
        split: TFDS split name.
        data_dir: TFDS data directory (None: TFDS's default, `~/tensorflow_datasets`).
        download: let TFDS download and prepare the dataset if it is not there yet.

    Returns:
        `ParallelText`.
    """
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir, as_supervised=True, download=download)
    except Exception as error:  # TFDS raises many types (DatasetNotFoundError, ValueError, AssertionError ...)
        raise CorpusError(f"Cannot load TFDS dataset {name!r}, split {split!r}: {error}") from None
    text = _collect(tfds.as_numpy(dataset))
    if not text.sources:
        raise CorpusError(f"TFDS dataset {name!r}, split {split!r} has no usable sentence pairs")
    return text


def load_corpus(train_config, split):
    """A split of the corpus a `TrainConfig` names.

    Each split is cut to its first `train_config.{train,validation,test}_size` pairs (0: all; the
    built-in corpus then generates its default 20,000 / 1,000 / 1,000).

    Returns:
        `ParallelText`.
    """
    check_choice("split", split, SPLITS)
    size = getattr(train_config, f"{split}_size")
    if train_config.corpus == "builtin":
        sources, targets = dates.builtin_corpus(split, size=size or None, seed=train_config.seed)
        return ParallelText(sources, targets)
    if train_config.corpus == "files":
        paths = getattr(train_config, f"{split}_files")
        return read_parallel_files(*paths).head(size)
    return load_tfds(train_config.tfds_name, split, train_config.tfds_data_dir or None).head(size)
