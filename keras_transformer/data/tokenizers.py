"""Subword tokenization for the translation Transformer: whitespace split + WordPiece, in-graph.

Why whitespace + WordPiece:

- Lossless round trip. Text is cleaned (invalid UTF-8 replaced by U+FFFD, Unicode NFKC), split
  on whitespace, and each word is cut into WordPiece pieces: the first piece of a word is stored
  as is, the following ones with a `##` prefix. Nothing but whitespace is thrown away, so
  `detokenize` can rebuild the text exactly: glue `##` pieces to the previous piece, separate
  words with one space. For any text whose characters were all seen when the vocabulary was
  learned:

      detokenize(tokenize([x])) == [" ".join(unicodedata.normalize("NFKC", x).split())]

  (for NFKC-normal text, that is just `" ".join(x.split())`). "Whitespace" means exactly
  Python's `str.isspace` characters, so the in-graph split agrees with `str.split()`.
  Case is kept (no lowercasing) by default, as are punctuation and digits.
- Optional typing normalization, for input whose case and spacing carry no meaning (the
  built-in dates, typed by people as they please). `SubwordTokenizer(..., normalize_typing=True)`
  folds case (tensorflow-text's `case_fold_utf8`, i.e. Unicode NFKC_Casefold: "MARCH" and "March"
  both become "march") and puts a space around every run of digits and every punctuation or
  symbol character ("3rd,1987" becomes "3 rd , 1987"), in-graph, before the whitespace split;
  `learn_vocabulary(..., normalize_typing=True)` learns from text normalized the same way
  (`normalize_text`). The round trip is then lossless up to case and spacing:
  `detokenize(tokenize([x])) == normalize_text([x])` (whitespace runs collapsed) for NFKC-normal
  `x`. Real corpora keep it off.
- Ops a model server has. Tokenization runs inside the exported graph: core TensorFlow ops
  plus two tensorflow-text ops (`NormalizeUTF8`, `WordpieceTokenizeWithOffsets`; with typing
  normalization also `CaseFoldUTF8`) that the TF Text build linked into TF Serving 2.12 to 2.19
  provides. `saved_model_op_types` (in `keras_transformer.export`) lists the op types of an
  export so tests can check them against the server's op list.
- The vocabulary travels with the model. Both lookup tables read the vocabulary file through
  one `tf.saved_model.Asset`, so `tf.saved_model.save` copies it into `assets/` and the
  loaded model reads it from there.

Special cases (all handled in-graph, documented here once):

- Unknown characters (not seen when the vocabulary was learned) become `<unk>` (id
  `UNK_ID`), one per character; the known rest of the word is kept. `detokenize` writes
  `<unk>` as a word-initial piece, so an unknown character inside a word comes back with a
  space before it: `"a☃b"` -> `"a <unk>b"`, `"x ☃ y"` -> `"x <unk> y"`. A word longer
  than `MAX_BYTES_PER_WORD` UTF-8 bytes becomes a single `<unk>`.
- Literal reserved strings or a leading `##` in the text (`"</s>"`, `"<s>x"`,
  `"##tag"`) would be ambiguous with the special tokens / the suffix marker, so such a
  word-initial piece is re-emitted character by character (`"<"`, `"##/"`, `"##s"`, ...).
  They therefore never turn into `<pad>`/`<s>`/`</s>` ids and round-trip exactly.
- `tokenize` adds no `<s>`/`</s>`; the model code adds them.
- Extra reserved tokens. `learn_vocabulary(..., extra_reserved=(MASK_TOKEN,))` puts `<mask>` at
  id 4, right after the four tokens every vocabulary starts with, for the masked language model;
  the ids 0..3 do not move. A vocabulary's reserved tokens are its first four lines and the run
  of `<name>` lines that follows them (`vocabulary_reserved_tokens`); a learned vocabulary's
  next line is a single character, so the run is never ambiguous. The tokenizer treats every
  reserved token like `<s>` above: a literal `"<mask>"` in the text is re-emitted character by
  character and never becomes the mask id. `SubwordTokenizer.mask_id` is 4 for such a
  vocabulary and None for a translation vocabulary.

Shapes: `tokenize`: `tf.string [batch]` -> `int32 RaggedTensor [batch, (pieces)]`;
`detokenize`: `int [batch, T]` (dense or ragged `[batch, (T)]`) -> `tf.string [batch]`.
"""

from __future__ import annotations

import collections
import numbers
import os
import re
import tempfile
import uuid
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as _learner

from keras_transformer.data.special_tokens import (
    END_ID,
    LM_RESERVED_TOKENS,
    MASK_ID,
    MASK_TOKEN,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
)

__all__ = [
    "RESERVED_TOKENS",
    "PAD_ID",
    "UNK_ID",
    "START_ID",
    "END_ID",
    "MASK_TOKEN",
    "MASK_ID",
    "LM_RESERVED_TOKENS",
    "SUFFIX_INDICATOR",
    "MAX_BYTES_PER_WORD",
    "learn_vocabulary",
    "write_vocabulary",
    "read_vocabulary",
    "vocabulary_reserved_tokens",
    "split_words",
    "SubwordTokenizer",
]


SUFFIX_INDICATOR = "##"
# Longer words are not split into pieces but become one <unk>. Bounds the greedy search per word.
MAX_BYTES_PER_WORD = 1024

# Every character for which Python's str.isspace() is true (the set str.split() splits on).
# tf.strings.split only knows ASCII whitespace, so the others are mapped to " " first.
_WHITESPACE_RUN_RE = (
    r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+"
)
# The form of a reserved token beyond RESERVED_TOKENS (e.g. "<mask>"): a name in angle brackets.
_EXTRA_RESERVED_RE = re.compile(r"<[A-Za-z0-9_]+>")


def _ambiguous_piece_re(reserved_tokens):
    """A word-initial piece that reads as a reserved token or as a suffix piece: re-emit per character."""
    return "|".join([re.escape(SUFFIX_INDICATOR) + ".*"] + [re.escape(token) for token in reserved_tokens])


# What the WordPiece op emits for an unknown character. 0xFF never occurs in valid UTF-8, and the
# text is valid UTF-8 after transcoding, so this cannot be confused with a piece of real text.
# It is not in the vocabulary, so the id lookup maps it (and "##" + it) to UNK_ID.
_UNKNOWN_SENTINEL = b"\xff"

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
      ValueError: `vocab_size` < the number of reserved tokens + 1; too small to hold every
        seen character in both forms; the corpus has no words; or an extra reserved token is
        not of the form `<name>` or repeats one.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}: {vocab_size!r}")
    vocab_size = int(vocab_size)
    reserved = RESERVED_TOKENS + _check_extra_reserved(extra_reserved)
    min_size = len(reserved) + 1
    if vocab_size < min_size:
        raise ValueError(
            f"vocab_size must be at least {min_size} (the {len(reserved)} reserved tokens + 1), got {vocab_size}"
        )
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be an iterable of strings, not a single string")

    counts, num_texts = _count_words(texts, bool(normalize_typing))
    if not counts:
        raise ValueError(f"cannot learn a vocabulary from an empty corpus: {num_texts} text(s) containing no words")

    chars = sorted({char for word in counts for char in word})
    required = list(reserved) + chars + [SUFFIX_INDICATOR + c for c in chars]
    if len(required) > vocab_size:
        raise ValueError(
            f"vocab_size={vocab_size} is too small for this corpus: its {len(chars)} distinct "
            f"characters need {len(required)} entries ({len(reserved)} reserved tokens "
            f"+ each character as a word-initial and as a '{SUFFIX_INDICATOR}' suffix piece)"
        )

    learned = _learner.learn(
        counts,
        vocab_size=vocab_size,
        reserved_tokens=list(reserved),
        lower_thresh=1,
        # Keep every word: all characters are in the vocabulary anyway (see `required`).
        max_unique_chars=len(chars),
        include_joiner_token=True,
        joiner=SUFFIX_INDICATOR,
    )

    # The learner can overshoot when its threshold search bottoms out; it lists frequent pieces
    # first, so cutting the tail keeps the useful ones. Words over its max_token_length (50) are
    # not learned from; `required` still covers their characters.
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


class _UniqueTextFileInitializer(tf.lookup.TextFileInitializer):
    """`TextFileInitializer` whose table has a shared name of its own.

    TensorFlow names the table after the file argument; for a `tf.saved_model.Asset` that is the
    object's repr, i.e. its memory address, so a new tokenizer could silently reuse the still-alive
    table of an old one at the same address, old vocabulary and all. A random suffix prevents it
    (anonymous tables would too, but TF1-style loaders such as TF Serving's cannot restore them).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._unique_suffix = uuid.uuid4().hex

    @property
    def _shared_name(self):
        return f"hash_table_{self._unique_suffix}_{self._key_index}_{self._value_index}"


class SubwordTokenizer(tf.Module):
    """In-graph WordPiece tokenizer over a vocabulary file; safe to save in a SavedModel.

    Both directions use lookup tables built from the vocabulary file through one
    `tf.saved_model.Asset`, so a SavedModel containing the tokenizer carries the file in
    `assets/`. `tokenize` and `detokenize` work eagerly and inside `tf.function`.

    Args:
      vocab_path: vocabulary file (see `read_vocabulary`); it is validated here.
      name: module name.
      normalize_typing: fold case and split digit runs, punctuation and symbols into words in
        `tokenize` (in-graph, so an export does too; see `split_words`); use it with a vocabulary
        learned by `learn_vocabulary(..., normalize_typing=True)`.
        Off by default: tokenization is lossless, case and spacing included.

    The vocabulary's reserved tokens (`vocabulary_reserved_tokens`: the first four, and
    `<mask>` in a language-model vocabulary) never come out of `tokenize`: text that spells one
    is re-emitted character by character.
    """

    def __init__(self, vocab_path, name=None, normalize_typing=False):
        super().__init__(name=name)
        if not isinstance(normalize_typing, bool):
            kind = type(normalize_typing).__name__
            raise TypeError(f"normalize_typing must be a bool, got {kind}: {normalize_typing!r}")
        self._normalize_typing = normalize_typing
        vocab_path = os.fspath(vocab_path)
        tokens = read_vocabulary(vocab_path)
        self._vocab_path = vocab_path
        self._vocab_size = len(tokens)
        self._reserved_tokens = vocabulary_reserved_tokens(tokens)
        self._ambiguous_piece_re = _ambiguous_piece_re(self._reserved_tokens)
        self._vocab_asset = tf.saved_model.Asset(vocab_path)
        # Line number -> id. The default (UNK_ID) applies to unknown-character pieces.
        self._token_to_id = tf.lookup.StaticHashTable(
            _UniqueTextFileInitializer(
                self._vocab_asset,
                key_dtype=tf.string,
                key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                value_dtype=tf.int64,
                value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            ),
            default_value=UNK_ID,
        )
        self._id_to_token = tf.lookup.StaticHashTable(
            _UniqueTextFileInitializer(
                self._vocab_asset,
                key_dtype=tf.int64,
                key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
                value_dtype=tf.string,
                value_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            ),
            default_value=RESERVED_TOKENS[UNK_ID],
        )
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._token_to_id,
            suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=MAX_BYTES_PER_WORD,
            # Longest piece in characters: bounds the greedy longest-match search.
            max_chars_per_token=max(len(token) for token in tokens),
            token_out_type=tf.string,
            unknown_token=_UNKNOWN_SENTINEL,
            split_unknown_characters=True,
        )

    @property
    def vocab_size(self) -> int:
        """Number of tokens in the vocabulary (ids are `0 .. vocab_size - 1`)."""
        return self._vocab_size

    @property
    def reserved_tokens(self) -> tuple[str, ...]:
        """The vocabulary's reserved tokens, ids `0 .. num_reserved - 1` (see `vocabulary_reserved_tokens`)."""
        return self._reserved_tokens

    @property
    def num_reserved(self) -> int:
        """Number of reserved ids; the ids of text pieces are `num_reserved .. vocab_size - 1`."""
        return len(self._reserved_tokens)

    @property
    def mask_id(self) -> int | None:
        """Id of `<mask>` in the vocabulary (`MASK_ID`, 4, when learned with `LM_RESERVED_TOKENS`); None without one."""
        return self._reserved_tokens.index(MASK_TOKEN) if MASK_TOKEN in self._reserved_tokens else None

    @property
    def normalize_typing(self) -> bool:
        """Whether `tokenize` normalizes typing ("MARCH 3,1987" tokenizes as "march 3 , 1987")."""
        return self._normalize_typing

    @property
    def vocab_path(self) -> str:
        """Path of the vocabulary file this tokenizer was built from."""
        return self._vocab_path

    @property
    def vocab_asset(self) -> tf.saved_model.Asset:
        """The `tf.saved_model.Asset` wrapping `vocab_path` (read by both tables)."""
        return self._vocab_asset

    def tokenize(self, texts, max_words=None) -> tf.RaggedTensor:
        """Splits sentences into subword ids.

        Args:
          texts: `tf.string [batch]` (or a list of str/bytes).
          max_words: optional int; only the first `max_words` words of each text are cut into
            pieces, the rest are dropped. It bounds the WordPiece work on a long text, and it
            loses nothing in front of the cut: every word gives at least one piece, so with
            `max_words = n + 1` the first `n` pieces are those of the whole text, and a row
            longer than `n` pieces means the whole text had more than `n` pieces.

        Returns:
          `int32` RaggedTensor `[batch, (pieces)]`, all words of a sentence in one row; no
          `<s>`/`</s>`. An empty or all-whitespace text gives an empty row. With
          `normalize_typing`, text differing only in case or in spacing around digits and
          punctuation gives the same ids.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank is not None and texts.shape.rank != 1:
            raise ValueError(f"texts must have shape [batch], got {texts.shape}")
        words = split_words(texts, self._normalize_typing)  # [batch, (words)]
        if max_words is not None:
            words = words[:, :max_words]  # [batch, (words <= max_words)]
        pieces, starts, _ = self._wordpiece.tokenize_with_offsets(words)
        pieces = pieces.merge_dims(1, 2)  # [batch, (pieces)]
        starts = starts.merge_dims(1, 2)
        flat = pieces.values  # [n]

        # Word-initial pieces that would read as <pad>/<unk>/<s>/</s> (<mask>) or as a '##' suffix piece
        # are rewritten as "c1 ##c2 ##c3 ..." and split on " " (pieces never contain spaces).
        ambiguous = tf.logical_and(
            tf.equal(starts.values, 0), tf.strings.regex_full_match(flat, self._ambiguous_piece_re)
        )
        per_char = tf.strings.regex_replace(
            tf.strings.regex_replace(flat, "(.)", " " + SUFFIX_INDICATOR + r"\1"),
            "^ " + re.escape(SUFFIX_INDICATOR),
            "",
        )
        flat = tf.where(ambiguous, per_char, flat)
        split = tf.strings.split(flat, sep=" ")  # [n, (1 or chars)]
        pieces = tf.RaggedTensor.from_row_splits(split, pieces.row_splits, validate=False).merge_dims(1, 2)

        ids = self._token_to_id.lookup(pieces)  # unknown -> UNK_ID
        return tf.cast(ids, tf.int32)

    def detokenize(self, ids) -> tf.Tensor:
        """Turns subword ids back into text.

        Per row: everything from the first `</s>` on is ignored, `<pad>` and `<s>` are
        dropped, `##` pieces are glued to the previous piece and word-initial pieces are
        separated by one space. `<unk>` (and any id outside the vocabulary) is written as the
        word `<unk>`.

        Args:
          ids: `int32`/`int64` `[batch, T]` dense (padded with `<pad>`) or RaggedTensor
            `[batch, (T)]`.

        Returns:
          `tf.string [batch]`; an empty row gives `""`.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=tf.cast(PAD_ID, ids.dtype))
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int64)  # [batch, T]
        if ids.shape.rank is not None and ids.shape.rank != 2:
            raise ValueError(f"ids must have shape [batch, T], got {ids.shape}")
        seen_end = tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1) > 0
        keep = tf.logical_not(seen_end)
        keep = tf.logical_and(keep, tf.not_equal(ids, PAD_ID))
        keep = tf.logical_and(keep, tf.not_equal(ids, START_ID))
        tokens = self._id_to_token.lookup(ids)
        # " piece" for a word-initial piece, "x" for "##x".
        pieces = tf.strings.regex_replace(tf.strings.join([" ", tokens]), "^ " + re.escape(SUFFIX_INDICATOR), "")
        pieces = tf.where(keep, pieces, "")
        text = tf.strings.reduce_join(pieces, axis=1)
        return tf.strings.regex_replace(text, "^ ", "")
