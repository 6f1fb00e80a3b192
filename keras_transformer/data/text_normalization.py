"""Text as the tokenizer sees it: cleaned, optionally typing-normalized, split into words.

`split_words` is the one text pipeline of vocabulary learning and `SubwordTokenizer.tokenize`,
run in the graph: invalid UTF-8 is replaced by U+FFFD, Unicode NFKC applied, and the text split
on runs of whitespace. "Whitespace" means exactly Python's `str.isspace` characters, so the
in-graph split agrees with `str.split()`. Case is kept by default, as are punctuation and digits.

Typing normalization, for input whose case and spacing carry no meaning (the built-in dates,
typed by people as they please): with `normalize_typing=True` the text's case is folded
(tensorflow-text's `case_fold_utf8`, i.e. Unicode NFKC_Casefold: "MARCH" and "March" both become
"march") and a space put around every run of digits and every punctuation or symbol character
("3rd,1987" becomes "3 rd , 1987"), before the whitespace split. `normalize_text` gives texts as
the split sees them, eagerly, words joined by one space.

Shapes: `split_words`: `tf.string [batch]` -> `tf.string RaggedTensor [batch, (words)]`.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import tensorflow as tf
import tensorflow_text as tf_text

__all__ = ["split_words", "normalize_text"]

# Every character for which Python's str.isspace() is true (the set str.split() splits on).
# tf.strings.split only knows ASCII whitespace, so the others are mapped to " " first.
_WHITESPACE_RUN_RE = (
    r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+"
)
# Texts per eager call of `split_words` when texts are normalized or their words counted in Python.
_LEARN_BATCH_SIZE = 1024

# Typing normalization: a run of digits, or one punctuation or symbol character, becomes a word.
_TYPED_UNIT_RE = r"(\pN+|[\pP\pS])"


def _clean(texts, normalize_typing):
    """`texts` transcoded (invalid UTF-8 -> U+FFFD), NFKC-normalized, optionally typing-normalized."""
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    texts = tf.strings.unicode_transcode(
        texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace", replacement_char=0xFFFD
    )
    texts = tf_text.normalize_utf8(texts, "NFKC")
    if normalize_typing:
        texts = tf_text.case_fold_utf8(texts)
        texts = tf.strings.regex_replace(texts, _TYPED_UNIT_RE, r" \1 ")
    # After NFKC: compatibility forms such as U+00A8 decompose to " " + combining mark.
    return tf.strings.regex_replace(texts, _WHITESPACE_RUN_RE, " ")


def split_words(texts, normalize_typing=False) -> tf.RaggedTensor:
    """The text pipeline shared by vocabulary learning and `SubwordTokenizer.tokenize`.

    Replaces invalid UTF-8 by U+FFFD, applies Unicode NFKC, optionally normalizes typing (see
    `normalize_text`), and splits on runs of whitespace (Python's `str.isspace` set).

    Args:
      texts: `tf.string [batch]`.
      normalize_typing: fold case and split digit runs, punctuation and symbols into words
        ("March 3,1987" -> "march", "3", ",", "1987"); by default case and words are kept.

    Returns:
      `tf.string` RaggedTensor `[batch, (words)]`.
    """
    return tf.strings.split(_clean(texts, normalize_typing))


def normalize_text(texts, normalize_typing=True) -> list[str]:
    """Texts as `split_words` sees them, words joined by one space (eager, in batches).

    Args:
      texts: an iterable of `str` or `bytes`.
      normalize_typing: as in `split_words`.

    Returns:
      One `str` per text: `"MARCH 3,1987"` -> `"march 3 , 1987"`.
    """
    normalized = []
    for batch in _batches(texts, _LEARN_BATCH_SIZE):
        words = split_words(tf.constant(batch, dtype=tf.string), normalize_typing)
        joined = tf.strings.reduce_join(words, axis=1, separator=" ").numpy()
        normalized.extend(text.decode("utf-8") for text in joined)
    return normalized


def _as_utf8_bytes(text) -> bytes:
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        # Lone surrogates become invalid UTF-8 here and U+FFFD in the graph.
        return text.encode("utf-8", "surrogatepass")
    raise TypeError(f"texts must contain str or bytes, got {type(text).__name__}: {text!r}")


def _batches(texts: Iterable, size: int) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for text in texts:
        batch.append(_as_utf8_bytes(text))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
