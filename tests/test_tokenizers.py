"""Tests for keras_transformer.data.tokenizers, vocabulary and text_normalization: learning, round trips, export.

Expected round-trip strings are computed here with Python's `unicodedata` + `str.split`, not
with the module's TF pipeline, so a wrong normalisation or split cannot check itself.
"""

import collections
import os
import random
import shutil
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from conftest import serving_op_lists
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from keras_transformer.data import tokenizers
from keras_transformer.data.text_normalization import normalize_text, split_words
from keras_transformer.data.tokenizers import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    SubwordTokenizer,
)
from keras_transformer.data.vocabulary import learn_vocabulary, read_vocabulary, write_vocabulary
from keras_transformer.export import saved_model_op_types

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "Pack my box with five dozen liquor jugs; then wait 10 minutes.",
    "Le café est fermé le lundi, mais la boulangerie reste ouverte.",
    "Elle a une vision naïve du monde, n'est-ce pas ?",
    "Où est la gare ? À gauche, après l'hôtel de ville.",
    "Ça coûte 12,50 € ; c'est cher pour un croissant !",
    "Die Straße ist lang, und die Bäume sind grün.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Él comió piñata y jamón en España el año pasado.",
    "¿Dónde está la biblioteca? ¡Allí, junto al museo!",
    "A tradução do livro ficou pronta em março de 2023.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9, 3.14159 and 2,718 (approx.).",
    "Prices rose by 7% in 1999 [see table 4] - or did they?",
    'She said: "Hello, world" and left at 5:45 p.m.',
    "Use #tags, @mentions & <b>bold</b> markup / slashes \\ pipes | too.",
    "Email me at someone@example.com or visit https://example.org/a_b?c=d.",
    "Tokenization splits words into subword pieces like token ##ization.",
    "The translation model learns from parallel sentences in many languages.",
    "Attention is all you need, wrote Vaswani et al. in 2017.",
    "Machine translation has improved dramatically over the last decade.",
    "Les étudiants étudient la traduction automatique à l'université.",
    "Die Übersetzung dieses Satzes ist überraschend schwierig.",
    "Los niños juegan en el parque mientras sus padres conversan.",
    "O coração da cidade é a praça principal, cheia de gente.",
    "Encoder and decoder stacks share the same embedding size.",
    "Training runs for 20 epochs with a warm-up of 4000 steps.",
    "Is it 'single' or \"double\" quoting? Both {work} fine~",
    "Mixed CaSe WoRdS aNd CamelCaseIdentifiers appear in code.",
    "x = y + z * 2 ^ 3 ; print(x) # comment",
] * 3

# A small model-sized vocabulary request, as in the brief.
REQUESTED_VOCAB_SIZE = 1000


def _clean(text: str) -> str:
    """The round-trip target, computed independently of TF."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _np_strings(tensor) -> list[str]:
    return [b.decode("utf-8") for b in tensor.numpy().tolist()]


@pytest.fixture(scope="module")
def vocab():
    return learn_vocabulary(CORPUS, REQUESTED_VOCAB_SIZE)


@pytest.fixture(scope="module")
def vocab_file(vocab, tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_vocabulary(vocab, path)
    return path


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return SubwordTokenizer(str(vocab_file))


def _round_trip(tokenizer, texts):
    ids = tokenizer.tokenize(tf.constant(texts, dtype=tf.string))
    return ids, _np_strings(tokenizer.detokenize(ids))


# ---------------------------------------------------------------------------
# Constants and vocabulary learning
# ---------------------------------------------------------------------------
def test_reserved_tokens_and_ids():
    assert RESERVED_TOKENS == ("<pad>", "<unk>", "<s>", "</s>")
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)


def test_learned_vocabulary_layout(vocab):
    assert len(vocab) <= REQUESTED_VOCAB_SIZE
    assert tuple(vocab[:4]) == RESERVED_TOKENS
    assert len(set(vocab)) == len(vocab)
    assert all(token and not any(c.isspace() for c in token) for token in vocab)
    seen_chars = {c for text in CORPUS for c in _clean(text) if not c.isspace()}
    for char in seen_chars:
        assert char in vocab, char
        assert "##" + char in vocab, char
    # The TF-counted alphabet is exactly the one Python's NFKC + str.split() sees.
    assert {t for t in vocab[4:] if len(t) == 1} == seen_chars


def test_lowered_threshold_learns_more_than_learner_defaults(vocab):
    # With the learner's default lower_thresh (10) this small corpus gives far fewer pieces.
    counts = collections.Counter(w for t in CORPUS for w in unicodedata.normalize("NFKC", t).split())
    default = wordpiece_tokenizer_learner_lib.learn(counts, REQUESTED_VOCAB_SIZE, list(RESERVED_TOKENS))
    assert len(vocab) > len(default) + 100, (len(vocab), len(default))


def _syllable_corpus():
    rng = random.Random(0)
    syllables = ["ka", "to", "ri", "men", "sa", "lu", "no", "vi", "der", "ix", "pa", "qu", "ette", "ing", "ed", "s"]
    return [
        " ".join("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(12))
        for _ in range(300)
    ]


@pytest.mark.parametrize("vocab_size", [300, 1000])
def test_learned_vocabulary_size_approaches_request(vocab_size):
    # A corpus with enough distinct substrings fills the request (up to the learner's slack).
    vocab = learn_vocabulary(_syllable_corpus(), vocab_size)
    assert 0.85 * vocab_size <= len(vocab) <= vocab_size, len(vocab)


@pytest.mark.parametrize("vocab_size", [16, 20, 30, 60, 500])
def test_learned_vocabulary_never_exceeds_request(vocab_size):
    corpus = ["abc abd abe", "bad cab dab", "eddie bed", "abcdeabcde"] * 4  # 6 characters
    vocab = learn_vocabulary(corpus, vocab_size)
    assert 16 <= len(vocab) <= vocab_size
    assert tuple(vocab[:4]) == RESERVED_TOKENS


def test_learn_vocabulary_rejects_vocab_size_below_alphabet():
    # 6 characters need 4 reserved + 6 + 6 "##" pieces = 16 entries.
    corpus = ["abc abd abe", "bad cab dab", "eddie bed"]
    with pytest.raises(ValueError, match="vocab_size=15 is too small.*6 distinct characters"):
        learn_vocabulary(corpus, 15)


def test_learned_vocabulary_between_alphabet_and_request():
    alphabet = len({c for text in CORPUS for c in _clean(text) if not c.isspace()})
    minimum = 4 + 2 * alphabet
    for vocab_size in (minimum, minimum + 50, minimum + 300):
        vocab = learn_vocabulary(CORPUS, vocab_size)
        assert minimum <= len(vocab) <= vocab_size
        assert tuple(vocab[:4]) == RESERVED_TOKENS


def test_learn_vocabulary_accepts_generators_and_bytes():
    vocab = learn_vocabulary((t for t in ["naïve café", "café"]), 50)
    assert "é" in vocab and "##é" in vocab
    vocab_b = learn_vocabulary([b"abc\xff", "abc"], 50)
    # Invalid UTF-8 was replaced by U+FFFD, which is then an ordinary seen character.
    assert "\ufffd" in vocab_b and "##\ufffd" in vocab_b


@pytest.mark.parametrize("vocab_size", [-1, 0, 4])
def test_learn_vocabulary_rejects_tiny_vocab_size(vocab_size):
    with pytest.raises(ValueError, match=f"`vocab_size` must be an int >= 5. Received: vocab_size={vocab_size}"):
        learn_vocabulary(CORPUS, vocab_size)


def test_learn_vocabulary_rejects_non_int_vocab_size():
    with pytest.raises(ValueError, match="`vocab_size` must be an int. Received: vocab_size="):
        learn_vocabulary(CORPUS, 100.0)
    with pytest.raises(ValueError, match="`vocab_size` must be an int. Received: vocab_size="):
        learn_vocabulary(CORPUS, True)


@pytest.mark.parametrize("corpus", [[], [""], ["   ", "\t\n"]])
def test_learn_vocabulary_rejects_empty_corpus(corpus):
    with pytest.raises(ValueError, match=f"empty corpus: {len(corpus)} text"):
        learn_vocabulary(corpus, 100)


def test_learn_vocabulary_rejects_single_string():
    with pytest.raises(TypeError, match="not a single string"):
        learn_vocabulary("just one text", 100)


# ---------------------------------------------------------------------------
# The shared text pipeline agrees with Python's NFKC + str.split()
# ---------------------------------------------------------------------------
PYTHON_WHITESPACE = "".join(chr(i) for i in range(0x3001) if chr(i).isspace())


@pytest.mark.parametrize(
    "text",
    [
        "café, naïve",
        "cafe\u0301 (decomposed é)",
        "ﬁne ﬂour ① ＡＢＣ ｶﾀｶﾅ x²",  # compatibility forms NFKC rewrites
        "acute´ diaeresis¨ macron¯",  # NFKC turns these into space + combining mark
        "no\u00a0break\u2003em\u3000ideographic",
        "a" + PYTHON_WHITESPACE.join("bcdefghijklmnopqrstuvwxyzABCDEFGHIJ") + "z",
        PYTHON_WHITESPACE,
        "",
        "tab\tnewline\nreturn\r\nvt\x0bff\x0c end",
        "zero\u200bwidth space (not whitespace)",
    ],
)
def test_split_words_matches_python(text):
    words = split_words(tf.constant([text]))
    got = [w.decode("utf-8") for w in words.flat_values.numpy().tolist()]
    assert got == unicodedata.normalize("NFKC", text).split()


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------
ROUND_TRIP_TEXTS = [
    "café, naïve",
    "Le café est fermé, n'est-ce pas ?",
    "Die Straße ist grün; Über 2023 Bäume!",
    "Numbers 0123456789 and 3.14159, 2,718 (approx.) 7%",
    "MiXeD CaSe WORDS and lower and UPPER",
    "  leading and trailing spaces  ",
    "multiple     spaces\tand\t\ttabs\nand\n\nnew\r\nlines",
    "punctuation!?.,;:'\"()[]{}-_/\\|@#&*+=^~<>",
    "x",
    "quickbrownfoxjumpsoverthelazydog",  # a word never seen whole
    "##tags ###x #one ## a##b",  # leading ## must not read as a suffix
    "</s> <s> <pad> <unk> </s>x <s>y <pad>z",  # literal special-token text
]


def test_round_trip_examples(tokenizer):
    ids, back = _round_trip(tokenizer, ROUND_TRIP_TEXTS)
    assert back == [_clean(t) for t in ROUND_TRIP_TEXTS]
    flat = ids.flat_values.numpy()
    assert UNK_ID not in flat, "all characters were seen in training"
    # Literal special-token text never becomes a special id.
    assert not np.isin(flat, [PAD_ID, START_ID, END_ID]).any()
    assert ids.dtype == tf.int32
    assert ids.shape.rank == 2 and ids.shape[0] == len(ROUND_TRIP_TEXTS)


def test_round_trip_random_texts(tokenizer, vocab):
    chars = sorted(t for t in vocab[4:] if len(t) == 1)
    spaces = [" ", "  ", "\t", "\n", " \t\n ", "\u3000", "\u00a0"]
    rng = random.Random(1234)
    texts = []
    for _ in range(200):
        words = ["".join(rng.choice(chars) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(0, 8))]
        text = rng.choice(["", " "])
        for word in words:
            text += word + rng.choice(spaces)
        texts.append(text)
    ids, back = _round_trip(tokenizer, texts)
    for text, got in zip(texts, back):
        assert got == _clean(text), repr(text)
    assert UNK_ID not in ids.flat_values.numpy()


def test_tokenize_splits_into_known_pieces(tokenizer, vocab):
    ids = tokenizer.tokenize(tf.constant(["café naïve"]))[0].numpy().tolist()
    pieces = [vocab[i] for i in ids]
    assert "".join(p[2:] if p.startswith("##") else " " + p for p in pieces).strip() == "café naïve"
    assert not pieces[0].startswith("##")
    # No <s>/</s> added.
    assert START_ID not in ids and END_ID not in ids


def test_vocab_size_and_path(tokenizer, vocab, vocab_file):
    assert tokenizer.vocab_size == len(vocab)
    assert isinstance(tokenizer.vocab_size, int)
    assert tokenizer.vocab_path == str(vocab_file)
    assert isinstance(tokenizer.vocab_asset, tf.saved_model.Asset)


def test_empty_string_and_empty_batch(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["", "   \t\n", "a"]))
    assert ids.row_lengths().numpy().tolist()[:2] == [0, 0]
    assert _np_strings(tokenizer.detokenize(ids)) == ["", "", "a"]
    empty = tokenizer.tokenize(tf.constant([], dtype=tf.string))
    assert empty.shape[0] == 0
    assert tokenizer.detokenize(empty).shape == (0,)
    assert _np_strings(tokenizer.detokenize(tf.zeros([2, 0], tf.int32))) == ["", ""]


def test_unknown_characters_become_unk(tokenizer, vocab):
    # "☃" and "中" never occur in CORPUS. Each unknown character is one <unk> (id 1); the
    # known rest of the word is kept. <unk> is written back as a word-initial piece, so an
    # unknown character inside a word comes back with a space before it (documented).
    ids, back = _round_trip(tokenizer, ["x ☃ y", "a☃b", "中中", "☃"])
    rows = ids.to_list()
    assert rows[0] == [vocab.index("x"), UNK_ID, vocab.index("y")]
    assert rows[1] == [vocab.index("a"), UNK_ID, vocab.index("##b")]
    assert rows[2] == [UNK_ID, UNK_ID]
    assert rows[3] == [UNK_ID]
    assert back == ["x <unk> y", "a <unk>b", "<unk> <unk>", "<unk>"]


def test_invalid_utf8_does_not_raise(tokenizer):
    ids = tokenizer.tokenize(tf.constant([b"abc\xff", b"\xc3", b"ok \xe2\x82 ok"]))
    # U+FFFD (the replacement) is not in this vocabulary, so it is <unk>.
    assert _np_strings(tokenizer.detokenize(ids)) == ["abc <unk>", "<unk>", "ok <unk> ok"]


def test_tokenize_accepts_python_list_and_rejects_bad_rank(tokenizer):
    from_list = tokenizer.tokenize(["café", b"na\xc3\xafve"])
    from_tensor = tokenizer.tokenize(tf.constant(["café", "naïve"]))
    assert from_list.to_list() == from_tensor.to_list()
    with pytest.raises(ValueError, match=r"shape \[batch\]"):
        tokenizer.tokenize(tf.constant("scalar"))
    with pytest.raises(ValueError, match=r"shape \[batch, T\]"):
        tokenizer.detokenize(tf.constant([1, 2, 3]))


def test_very_long_word_is_one_unk(tokenizer):
    word = "ab" * (tokenizers.MAX_BYTES_PER_WORD // 2 + 1)
    ids = tokenizer.tokenize(tf.constant([f"x {word} y"])).to_list()[0]
    assert ids[1] == UNK_ID and len(ids) == 3
    ok_word = "ab" * (tokenizers.MAX_BYTES_PER_WORD // 2)
    _, back = _round_trip(tokenizer, [ok_word])
    assert back == [ok_word]


# ---------------------------------------------------------------------------
# detokenize: </s>, <pad>, <s>, dtypes, ragged input
# ---------------------------------------------------------------------------
def test_detokenize_stops_at_end_and_drops_pad_and_start(tokenizer, vocab):
    a, b, c = vocab.index("t"), vocab.index("##h"), vocab.index("f")
    rows = [
        [START_ID, a, PAD_ID, c, END_ID, a, c, PAD_ID],  # pad mid-row dropped, stop at </s>
        [a, b, END_ID, END_ID, c, PAD_ID, PAD_ID, PAD_ID],
        [END_ID, a, b, c, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
        [PAD_ID] * 8,
        [START_ID, START_ID, c, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
    ]
    want = ["t f", "th", "", "", "f"]
    for dtype in (tf.int32, tf.int64):
        dense = tf.constant(rows, dtype=dtype)
        assert _np_strings(tokenizer.detokenize(dense)) == want
        ragged = tf.ragged.constant([r[:6] for r in rows], dtype=dtype)
        assert _np_strings(tokenizer.detokenize(ragged)) == want
    ragged_short = tf.ragged.constant([[a, c], [], [c, END_ID, a]], dtype=tf.int64)
    assert _np_strings(tokenizer.detokenize(ragged_short)) == ["t f", "", "f"]


def test_detokenize_padded_tokenize_output(tokenizer):
    texts = ["a much longer sentence than the others", "short", ""]
    ids = tokenizer.tokenize(tf.constant(texts))
    assert _np_strings(tokenizer.detokenize(ids.to_tensor())) == [_clean(t) for t in texts]
    with_markers = tf.concat(
        [tf.fill([3, 1], START_ID), ids.to_tensor(), tf.fill([3, 1], END_ID), tf.fill([3, 2], 10)], axis=1
    )  # pieces after </s> are ignored
    assert _np_strings(tokenizer.detokenize(with_markers)) == [_clean(t) for t in texts]


def test_detokenize_out_of_range_ids_are_unk(tokenizer):
    big = tokenizer.vocab_size + 5
    out = tokenizer.detokenize(tf.constant([[big, -7]], dtype=tf.int64))
    assert _np_strings(out) == ["<unk> <unk>"]


def test_tokenize_inside_tf_function(tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(texts):
        return tokenizer.detokenize(tokenizer.tokenize(texts))

    texts = ["café, naïve", "  Hello\tWorld  ", ""]
    assert _np_strings(round_trip(tf.constant(texts))) == [_clean(t) for t in texts]


# ---------------------------------------------------------------------------
# Vocabulary files
# ---------------------------------------------------------------------------
def test_write_read_vocabulary_round_trip(tmp_path, vocab):
    path = tmp_path / "sub" / "v.txt"
    path.parent.mkdir()
    write_vocabulary(vocab, path)
    assert read_vocabulary(path) == vocab
    assert read_vocabulary(str(path)) == vocab
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw
    assert raw.decode("utf-8").split("\n")[:-1] == vocab
    assert os.listdir(path.parent) == ["v.txt"], "no temporary file left behind"
    # Overwrite in place (atomic replace of an existing file).
    write_vocabulary(list(RESERVED_TOKENS) + ["x"], path)
    assert read_vocabulary(path) == list(RESERVED_TOKENS) + ["x"]
    assert os.listdir(path.parent) == ["v.txt"]


def test_write_vocabulary_rejects_bad_tokens(tmp_path):
    path = tmp_path / "v.txt"
    for bad, message in [
        (list(RESERVED_TOKENS) + ["a\nb"], "line break"),
        (list(RESERVED_TOKENS) + [""], "empty"),
        (list(RESERVED_TOKENS) + ["a", "a"], "duplicate vocabulary token 'a'"),
    ]:
        with pytest.raises(ValueError, match=message):
            write_vocabulary(bad, path)
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_read_vocabulary_missing_file(tmp_path):
    missing = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(FileNotFoundError, match="vocabulary file not found.*nope"):
        read_vocabulary(missing)
    with pytest.raises(FileNotFoundError, match=str(missing).replace("\\", "\\\\")):
        SubwordTokenizer(str(missing))


def test_read_vocabulary_rejects_bad_header_and_lines(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("<unk>\n<pad>\n<s>\n</s>\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="first 4 lines must be the reserved tokens"):
        read_vocabulary(path)
    path.write_text("<pad>\n<unk>\n<s>\n", encoding="utf-8")
    with pytest.raises(ValueError, match="reserved tokens"):
        SubwordTokenizer(str(path))
    path.write_text("<pad>\n<unk>\n<s>\n</s>\na\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'a' on lines 5 and 6"):
        read_vocabulary(path)
    path.write_bytes(b"<pad>\r\n<unk>\r\n<s>\r\n</s>\r\n")
    with pytest.raises(ValueError, match="reserved tokens"):
        read_vocabulary(path)


# ---------------------------------------------------------------------------
# SavedModel export: assets, reload, op budget for TF Serving 2.12
# ---------------------------------------------------------------------------
def assert_ops_servable(op_types):
    """Every op type must be core TF 2.12.1 or one of the TF Text 2.12.1 ops TF Serving links.

    Returns the op types that are not core (the TF Text ops the export needs).
    """
    core, tftext = serving_op_lists()
    unknown = sorted(set(op_types) - core - tftext)
    assert not unknown, f"ops TF Serving 2.12 cannot run: {unknown}"
    return sorted(set(op_types) - core)


class _RoundTrip(tf.Module):
    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(self, texts):
        ids = self.tokenizer.tokenize(texts)  # [batch, (pieces)]
        return {
            "ids": ids.to_tensor(default_value=PAD_ID),  # [batch, max_pieces]
            "lengths": ids.row_lengths(),
            "text": self.tokenizer.detokenize(ids),
        }


def test_saved_model_assets_reload_and_ops(tmp_path, vocab):
    vocab_dir = tmp_path / "vocab_src"
    vocab_dir.mkdir()
    vocab_path = vocab_dir / "target_vocab.txt"
    write_vocabulary(vocab, vocab_path)
    module = _RoundTrip(SubwordTokenizer(str(vocab_path)))
    texts = ROUND_TRIP_TEXTS + ["x ☃ y", ""]
    before = module.round_trip(tf.constant(texts))

    export_dir = tmp_path / "export"
    tf.saved_model.save(module, str(export_dir), signatures={"serving_default": module.round_trip})

    # The vocabulary is an asset: one copy under assets/, referenced by the meta graph.
    assets = sorted(p.name for p in (export_dir / "assets").iterdir())
    assert assets == ["target_vocab.txt"]
    assert (export_dir / "assets" / "target_vocab.txt").read_bytes() == vocab_path.read_bytes()
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    asset_files = {a.filename for mg in proto.meta_graphs for a in mg.asset_file_def}
    assert asset_files == {"target_vocab.txt"}

    op_types = saved_model_op_types(export_dir)
    assert {
        "WordpieceTokenizeWithOffsets",
        "NormalizeUTF8",
        "InitializeTableFromTextFileV2",
        "LookupTableFindV2",
    } <= op_types
    assert all(not name.startswith("__inference") for name in op_types)
    non_core = assert_ops_servable(op_types)
    assert non_core == ["NormalizeUTF8", "WordpieceTokenizeWithOffsets"]

    # Reload from a moved copy with the original vocabulary gone: the asset is what is read.
    shutil.rmtree(vocab_dir)
    moved = tmp_path / "moved"
    shutil.move(str(export_dir), str(moved))
    loaded = tf.saved_model.load(str(moved))
    after = loaded.signatures["serving_default"](texts=tf.constant(texts))
    for key in ("ids", "lengths", "text"):
        np.testing.assert_array_equal(after[key].numpy(), before[key].numpy())
    assert _np_strings(after["text"]) == [_clean(t) for t in ROUND_TRIP_TEXTS] + ["x <unk> y", ""]
    direct = loaded.round_trip(tf.constant(texts))
    np.testing.assert_array_equal(direct["ids"].numpy(), before["ids"].numpy())


def test_saved_model_op_types_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved_model.pb"):
        saved_model_op_types(tmp_path)


# ---------------------------------------------------------------------------
# Typing normalization (on for the built-in dates, off by default)
# ---------------------------------------------------------------------------
CASE_TEXTS = ["MARCH 21, 1987", "March 21, 1987", "march 21 ,1987", "mArCh  21,1987", "Die STRASSE Über 21st"]


def _typing_normalized(text):
    """Python reference: casefold; digit runs, punctuation and symbols become words."""
    spaced, previous = "", None
    for char in text.casefold():
        kind = unicodedata.category(char)[0]
        kind = kind if kind in "NPS" else "other"
        if kind in "PS" or (kind != previous and "N" in (kind, previous)):
            spaced += " "
        spaced += char + (" " if kind in "PS" else "")
        previous = kind
    return " ".join(spaced.split())


@pytest.fixture(scope="module")
def folding_vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("folded") / "source_vocab.txt"
    write_vocabulary(learn_vocabulary(CORPUS, REQUESTED_VOCAB_SIZE, normalize_typing=True), path)
    return path


def test_normalized_vocabulary_has_no_upper_case_and_no_digits_inside_words(folding_vocab_file):
    tokens = read_vocabulary(folding_vocab_file)[len(RESERVED_TOKENS) :]
    assert not [token for token in tokens if token != token.lower()]
    assert "the" in tokens and "fox" in tokens
    mixed = [t for t in tokens if any(c.isdigit() for c in t) and not t.removeprefix("##").isdigit()]
    assert not mixed


def test_normalize_typing_tokenizes_any_case_and_spacing_alike(folding_vocab_file):
    tokenizer = SubwordTokenizer(str(folding_vocab_file), normalize_typing=True)
    assert tokenizer.normalize_typing
    ids, texts = _round_trip(tokenizer, CASE_TEXTS)
    rows = ids.to_list()
    assert rows[0] == rows[1] == rows[2] == rows[3]
    assert UNK_ID not in [i for row in rows for i in row]
    assert texts == [_typing_normalized(t) for t in CASE_TEXTS] == normalize_text(CASE_TEXTS)
    assert texts[-1] == "die strasse über 21 st"


def test_normalize_text_matches_the_python_reference_on_mixed_scripts():
    texts = ["Ünïcode: 12€/٣٤ x_y «quoted» — 3.5", "tab\there!!", "", "日本語、2024年"]
    assert normalize_text(texts) == [_typing_normalized(t) for t in texts]
    assert normalize_text(texts, normalize_typing=False) == [" ".join(t.split()) for t in texts]


def test_default_tokenizer_keeps_case(tokenizer):
    assert not tokenizer.normalize_typing
    ids, texts = _round_trip(tokenizer, CORPUS[:2] + ["Mixed CaSe WoRdS"])
    assert texts == [_clean(t) for t in CORPUS[:2]] + ["Mixed CaSe WoRdS"]
    assert ids.to_list()[0] != ids.to_list()[1]


def test_normalize_typing_must_be_a_bool(folding_vocab_file):
    with pytest.raises(ValueError, match="`normalize_typing` must be a bool. Received: normalize_typing='on'"):
        SubwordTokenizer(str(folding_vocab_file), normalize_typing="on")


def test_normalize_typing_saved_model_folds_in_graph(tmp_path, folding_vocab_file):
    module = _RoundTrip(SubwordTokenizer(str(folding_vocab_file), normalize_typing=True))
    tf.saved_model.save(module, str(tmp_path / "export"), signatures={"serving_default": module.round_trip})
    assert assert_ops_servable(saved_model_op_types(tmp_path / "export")) == [
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "WordpieceTokenizeWithOffsets",
    ]
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    served = loaded.signatures["serving_default"](texts=tf.constant(CASE_TEXTS))
    assert _np_strings(served["text"]) == [_typing_normalized(t) for t in CASE_TEXTS]
    np.testing.assert_array_equal(served["ids"].numpy()[0], served["ids"].numpy()[1])
