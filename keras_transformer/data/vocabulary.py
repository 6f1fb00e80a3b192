r"""WordPiece vocabularies: learned from text, written to and read from files, their reserved tokens.

A vocabulary is a list of tokens, token `i` having id `i`, stored one token per line (UTF-8,
`\n`). It starts with `RESERVED_TOKENS` (`<pad>` 0, `<unk>` 1, `<s>` 2, `</s>` 3); the first
piece of a word is stored as is, the following ones with the `SUFFIX_INDICATOR` prefix `##`.

- `learn_vocabulary` learns one from training text with tensorflow-text's WordPiece learner,
  after the same cleaning and word split as the tokenizer (`text_normalization.split_words`).
  Every character seen is kept in both forms, so text made of seen characters never becomes
  `<unk>`. `learn_translation_vocabularies` learns the two of a translation corpus, or one for
  both sides.
- Extra reserved tokens. `learn_vocabulary(..., extra_reserved=(MASK_TOKEN,))` puts `<mask>` at
  id 4, right after the four tokens every vocabulary starts with, for the masked language model;
  the ids 0..3 do not move. A vocabulary's reserved tokens are its first four lines and the run
  of `<name>` lines that follows them (`vocabulary_reserved_tokens`); a learned vocabulary's
  next line is a single character, so the run is never ambiguous.
- `write_vocabulary` writes the file atomically; `read_vocabulary` reads it back, checking that
  it starts with the reserved tokens and has one distinct token per line.
"""

from __future__ import annotations

import collections
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as _learner

from keras_transformer.checks import check_int
from keras_transformer.data.special_tokens import MASK_TOKEN, RESERVED_TOKENS
from keras_transformer.data.text_normalization import _LEARN_BATCH_SIZE, _batches, normalize_text, split_words

__all__ = [
    "SUFFIX_INDICATOR",
    "learn_vocabulary",
    "learn_translation_vocabularies",
    "write_vocabulary",
    "read_vocabulary",
    "vocabulary_reserved_tokens",
]

SUFFIX_INDICATOR = "##"

# The form of a reserved token beyond RESERVED_TOKENS (e.g. "<mask>"): a name in angle brackets.
_EXTRA_RESERVED_RE = re.compile(r"<[A-Za-z0-9_]+>")


def _count_words(texts: Iterable, normalize_typing: bool = False) -> tuple[collections.Counter, int]:
    """Counts words exactly as the tokenizer splits them (runs `split_words` eagerly)."""
    counts: collections.Counter = collections.Counter()
    num_texts = 0
    for batch in _batches(texts, _LEARN_BATCH_SIZE):
        num_texts += len(batch)
        words = split_words(tf.constant(batch, dtype=tf.string), normalize_typing).flat_values.numpy()
        counts.update(words.tolist())
    # Transcoding made every word valid UTF-8.
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()}), num_texts


def _check_extra_reserved(extra_reserved) -> tuple[str, ...]:
    if isinstance(extra_reserved, (str, bytes)):
        raise TypeError(f"extra_reserved must be a sequence of tokens, not a single string: {extra_reserved!r}")
    extra = tuple(extra_reserved)
    for token in extra:
        if not isinstance(token, str) or not _EXTRA_RESERVED_RE.fullmatch(token):
            raise ValueError(f"extra reserved token {token!r} must be a name in angle brackets, like {MASK_TOKEN!r}")
        if token in RESERVED_TOKENS or extra.count(token) > 1:
            raise ValueError(f"extra reserved token {token!r} is already reserved")
    return extra


def vocabulary_reserved_tokens(tokens: Sequence[str]) -> tuple[str, ...]:
    """The reserved tokens at the head of a vocabulary: `RESERVED_TOKENS` and any extra ones.

    The extra ones are the run of `<name>` tokens right after the first four (`<mask>` in a
    vocabulary learned with `extra_reserved=(MASK_TOKEN,)`). In a learned vocabulary the next
    token is a single character, which never has that form.

    Args:
      tokens: the vocabulary, in id order (as `read_vocabulary` returns it).

    Returns:
      The reserved tokens, in id order: ids `0 .. len(result) - 1`.
    """
    count = len(RESERVED_TOKENS)
    while count < len(tokens) and _EXTRA_RESERVED_RE.fullmatch(tokens[count]):
        count += 1
    return tuple(tokens[:count])


def learn_vocabulary(
    texts: Iterable[str], vocab_size: int, normalize_typing: bool = False, extra_reserved: Sequence[str] = ()
) -> list[str]:
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens from training text.

    Words are counted after the same cleaning and whitespace split as
    `SubwordTokenizer.tokenize` uses (typing-normalized too with `normalize_typing`), then fed to tensorflow-text's
    `wordpiece_tokenizer_learner_lib.learn` (with `lower_thresh=1` so that small corpora come
    close to `vocab_size`; its default of 10 leaves them far below).

    Layout: `RESERVED_TOKENS` (ids 0..3), then `extra_reserved` (ids 4, ...), every character
    seen in training as a word-initial piece, the same characters as `##` suffix pieces, then the learned pieces
    (most frequent first) up to `vocab_size`. Because every seen character is there in both
    forms, text made of seen characters never tokenizes to `<unk>`.

    Args:
      texts: iterable of `str` (or UTF-8 `bytes`); one sentence or document each.
      vocab_size: maximum number of tokens, reserved tokens included.
      normalize_typing: learn from typing-normalized text, for a `SubwordTokenizer(..., normalize_typing=True)`.
      extra_reserved: reserved tokens after the first four, each a name in angle brackets:
        `(MASK_TOKEN,)` (that is, `LM_RESERVED_TOKENS`) for a masked language model's
        vocabulary, `<mask>` at id `MASK_ID` (4). Empty for translation.

    Returns:
      The vocabulary, a list of at most `vocab_size` unique tokens.

    Raises:
      ValueError: `vocab_size` not an int or < the number of reserved tokens + 1; too small to hold every
        seen character in both forms; the corpus has no words; or an extra reserved token is
        not of the form `<name>` or repeats one.
    """
    vocab_size, reserved = _checked_size(vocab_size, extra_reserved)
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of strings, not a single string")
    counts, num_texts = _count_words(texts, bool(normalize_typing))
    if not counts:
        raise ValueError(f"cannot learn a vocabulary from an empty corpus: {num_texts} text(s) containing no words")
    required, num_chars = _required_tokens(counts, reserved, vocab_size)
    learned = _learner.learn(
        counts,
        vocab_size=vocab_size,
        reserved_tokens=list(reserved),
        lower_thresh=1,
        # Keep every word: all characters are in the vocabulary anyway (see `_required_tokens`).
        max_unique_chars=num_chars,
        include_joiner_token=True,
        joiner=SUFFIX_INDICATOR,
    )
    return _first_tokens(required, learned, vocab_size)


def _checked_size(vocab_size, extra_reserved) -> tuple[int, tuple[str, ...]]:
    """`vocab_size` as an `int` and the reserved tokens, `RESERVED_TOKENS` then `extra_reserved`.

    Raises:
      ValueError: `vocab_size` is not an int, or < the number of reserved tokens + 1, or a bad
        extra reserved token.
    """
    vocab_size = check_int("vocab_size", vocab_size)
    reserved = RESERVED_TOKENS + _check_extra_reserved(extra_reserved)
    check_int("vocab_size", vocab_size, len(reserved) + 1)  # the reserved tokens and one piece at least
    return vocab_size, reserved


def _required_tokens(counts, reserved, vocab_size) -> tuple[list[str], int]:
    """The tokens every vocabulary of a corpus holds, and the number of its distinct characters.

    Args:
      counts: `{word: count}` of the corpus.
      reserved: the reserved tokens.
      vocab_size: the vocabulary's maximum size.

    Returns:
      `(tokens, num_chars)`: the reserved tokens, then every character seen as a word-initial
      piece, then the same characters as suffix pieces.

    Raises:
      ValueError: `vocab_size` is too small to hold them.
    """
    chars = sorted({char for word in counts for char in word})
    required = list(reserved) + chars + [SUFFIX_INDICATOR + c for c in chars]
    if len(required) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for this corpus: its {len(chars)} distinct "
            f"characters need {len(required)} entries ({len(reserved)} reserved tokens "
            f"+ each character as a word-initial and as a '{SUFFIX_INDICATOR}' suffix piece)"
        )
    return required, len(chars)


def _first_tokens(required, learned, vocab_size) -> list[str]:
    """`required`, then the pieces of `learned` it lacks, in order, up to `vocab_size` tokens.

    The learner can overshoot when its threshold search bottoms out; it lists frequent pieces
    first, so cutting the tail keeps the useful ones. Words over its max_token_length (50) are
    not learned from; `required` still covers their characters.
    """
    vocab = dict.fromkeys(required)
    for token in learned:
        if len(vocab) >= vocab_size:
            break
        if token and token not in vocab:
            vocab[token] = None
    return list(vocab)


def _check_token(token, index: int) -> None:
    if not isinstance(token, str):
        raise TypeError(f"vocabulary token {index} must be str, got {type(token).__name__}")
    if not token:
        raise ValueError(f"vocabulary token {index} is empty")
    if "\n" in token or "\r" in token:
        raise ValueError(f"vocabulary token {index} contains a line break: {token!r}")


def learn_translation_vocabularies(
    sources, targets, source_size: int, target_size: int, joint: bool = False, normalize_source: bool = False
) -> dict:
    """The source and target vocabularies of a translation corpus, learned by `learn_vocabulary`.

    Args:
      sources: iterable of `str`, the training split's source side.
      targets: iterable of `str`, its target side, line-aligned with `sources`.
      source_size: maximum size of the source vocabulary; with `joint`, of the one vocabulary.
      target_size: maximum size of the target vocabulary (unused with `joint`).
      joint: learn one vocabulary from both sides' text, for both sides (a model that embeds
        both sides with one table needs it).
      normalize_source: learn the source side from typing-normalized text (a source
        `SubwordTokenizer(..., normalize_typing=True)`).

    Returns:
      `{"source": vocabulary, "target": vocabulary}` (one list twice when `joint`).
    """
    if joint:
        words = normalize_text(sources) if normalize_source else list(sources)
        vocabulary = learn_vocabulary(words + list(targets), source_size)
        return {"source": vocabulary, "target": vocabulary}
    return {
        "source": learn_vocabulary(sources, source_size, normalize_typing=normalize_source),
        "target": learn_vocabulary(targets, target_size),
    }


def write_vocabulary(tokens: Sequence[str], path) -> None:
    r"""Writes `tokens` one per line (UTF-8, `\n`) to `path`, atomically.

    The file is written to a temporary file in the same directory and moved into place with
    `os.replace`, so readers never see a half-written vocabulary.

    Args:
      tokens: the vocabulary, in id order (line `i` is token id `i`).
      path: file to write (str or path-like); an existing file is replaced.

    Raises:
      ValueError: a token is empty, contains a line break, or occurs twice (the lookup table
        needs one line per distinct token).
    """
    path = os.fspath(path)
    tokens = list(tokens)
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        _check_token(token, index)
        if token in seen:
            raise ValueError(f"duplicate vocabulary token {token!r} at lines {seen[token] + 1} and {index + 1}")
        seen[token] = index
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(prefix=".vocab-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(token + "\n" for token in tokens))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_path, 0o644)  # mkstemp makes 0600; a model server may run as another user
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except FileNotFoundError:
            pass
        raise


def read_vocabulary(path) -> list[str]:
    r"""Reads a vocabulary written by `write_vocabulary` (line `i` is token id `i`).

    Args:
      path: vocabulary file (str or path-like).

    Returns:
      The tokens, in id order.

    Raises:
      FileNotFoundError: `path` does not exist (the message names it).
      ValueError: the first lines are not `RESERVED_TOKENS`, the file is not UTF-8, or it
        has empty lines, `\r` characters or duplicate tokens.
    """
    path = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(2, f"vocabulary file not found: {path}", path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"vocabulary file {path} is not valid UTF-8: {e}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    head = tuple(lines[: len(RESERVED_TOKENS)])
    if head != RESERVED_TOKENS:
        raise ValueError(
            f"vocabulary file {path}: the first {len(RESERVED_TOKENS)} lines must "
            f"be the reserved tokens {RESERVED_TOKENS}, got {head}"
        )
    seen: dict[str, int] = {}
    for index, token in enumerate(lines):
        if not token:
            raise ValueError(f"vocabulary file {path}: line {index + 1} is empty")
        if "\r" in token:
            raise ValueError(f"vocabulary file {path}: line {index + 1} contains '\\r' (use '\\n' line endings)")
        if token in seen:
            raise ValueError(f"vocabulary file {path}: token {token!r} on lines {seen[token] + 1} and {index + 1}")
        seen[token] = index
    return lines
