"""Subword tokenization for the translation Transformer: whitespace split + WordPiece, in-graph.

Why whitespace + WordPiece:

- Lossless round trip. Text is cleaned (invalid UTF-8 replaced by U+FFFD, Unicode NFKC), split
  on whitespace, and each word is cut into WordPiece pieces: the first piece of a word is stored
  as is, the following ones with a `##` prefix. Nothing but whitespace is thrown away, so
  `detokenize` can rebuild the text exactly: glue `##` pieces to the previous piece, separate
  words with one space. For any text whose characters were all seen when the vocabulary was
  learned:

      detokenize(tokenize([x])) == [" ".join(unicodedata.normalize("NFKC", x).split())]

  (for NFKC-normal text, that is just `" ".join(x.split())`). The cleaning and the split are
  `text_normalization.split_words`, shared with vocabulary learning (`vocabulary`); case is kept
  (no lowercasing) by default, as are punctuation and digits.
- Optional typing normalization, for input whose case and spacing carry no meaning (the
  built-in dates, typed by people as they please). `SubwordTokenizer(..., normalize_typing=True)`
  folds case and puts a space around every run of digits and every punctuation or symbol
  character (see `text_normalization`), in-graph, before the whitespace split;
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
- Extra reserved tokens: `<mask>` at id 4 in a vocabulary learned with
  `learn_vocabulary(..., extra_reserved=(MASK_TOKEN,))`, for the masked language model (see
  `vocabulary`; the ids 0..3 do not move). The tokenizer reads a vocabulary's reserved tokens
  with `vocabulary_reserved_tokens` and treats every one like `<s>` above: a literal
  `"<mask>"` in the text is re-emitted character by character and never becomes the mask id.
  `SubwordTokenizer.mask_id` is 4 for such a vocabulary and None for a translation vocabulary.

Shapes: `tokenize`: `tf.string [batch]` -> `int32 RaggedTensor [batch, (pieces)]`;
`detokenize`: `int [batch, T]` (dense or ragged `[batch, (T)]`) -> `tf.string [batch]`.
"""

from __future__ import annotations

import os
import re
import uuid

import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.checks import check_bool
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
from keras_transformer.data.text_normalization import split_words
from keras_transformer.data.vocabulary import SUFFIX_INDICATOR, read_vocabulary, vocabulary_reserved_tokens

__all__ = [
    "RESERVED_TOKENS",
    "PAD_ID",
    "UNK_ID",
    "START_ID",
    "END_ID",
    "MASK_TOKEN",
    "MASK_ID",
    "LM_RESERVED_TOKENS",
    "MAX_BYTES_PER_WORD",
    "SubwordTokenizer",
]

# Longer words are not split into pieces but become one <unk>. Bounds the greedy search per word.
MAX_BYTES_PER_WORD = 1024


def _ambiguous_piece_re(reserved_tokens):
    """A word-initial piece that reads as a reserved token or as a suffix piece: re-emit per character."""
    return "|".join([re.escape(SUFFIX_INDICATOR) + ".*"] + [re.escape(token) for token in reserved_tokens])


# What the WordPiece op emits for an unknown character. 0xFF never occurs in valid UTF-8, and the
# text is valid UTF-8 after transcoding, so this cannot be confused with a piece of real text.
# It is not in the vocabulary, so the id lookup maps it (and "##" + it) to UNK_ID.
_UNKNOWN_SENTINEL = b"\xff"


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
        self._normalize_typing = check_bool("normalize_typing", normalize_typing)
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
