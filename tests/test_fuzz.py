"""The exported signatures and `keras-transformer translate` fed input from the wild.

Thousands of generated inputs (hypothesis, derandomized: the same inputs on every run): random
bytes, mixed scripts, emoji and combining marks, right-to-left text and bidi controls, control
characters, reserved tokens, words at and beyond `MAX_BYTES_PER_WORD`, texts at and beyond
`MAX_TEXT_BYTES`, batches of mixed lengths; ids in and out of the vocabulary, rows longer than
`max_source_len`. Every call gives a defined result (the documented shapes and dtypes, valid
UTF-8 on one line, a finite log-probability, the right `truncated` flag) or, for ids outside the
vocabulary, the documented error; the process's memory stays bounded, and the time of a text
stops growing at `MAX_TEXT_BYTES`.
"""

import io
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_transformer.cli import main
from keras_transformer.data.tokenizers import END_ID, MAX_BYTES_PER_WORD, PAD_ID, SubwordTokenizer
from keras_transformer.export import MAX_TEXT_BYTES

pytestmark = pytest.mark.slow

# Derandomized: the same examples on every run and machine, so a failure reproduces and the
# tests cannot be flaky. No example database is written.
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
# "Thousands of inputs": each fuzz test checks it sent at least this many.
MIN_INPUTS = 2000
# How much the process may grow over a fuzz loop once warmed up. A leak of a quarter of the
# input bytes of `test_memory_stays_bounded_over_a_quarter_gigabyte_of_text` exceeds it.
RSS_GROWTH_LIMIT = 64 << 20

# Pieces of text that have broken tokenizers: scripts, right-to-left text and bidi controls,
# emoji sequences, combining marks, NFKC expanders, control and format characters, noncharacters,
# a lone surrogate (invalid UTF-8 once encoded), and the reserved tokens and suffix marker.
WILD = [
    "march 21, 1987",
    "21.03.1987",
    "مارس ٢١، ١٩٨٧",
    "עברית\u200f",
    "\u202eevil\u202c",
    "\u2067rtl\u2069",
    "日本語",
    "한국어",
    "ไทย",
    "हिन्दी",
    "Ωμέγα",
    "ß",
    "ﬁ",
    "İ",
    "\ufdfa",
    "\u3300",
    "🙂",
    "👩\u200d👩\u200d👧",
    "🏳\ufe0f\u200d🌈",
    "\U0001f1fa\U0001f1f8",
    "e\u0301",
    "a" + "\u0301" * 40,
    "\u0308",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\ufeff",
    "\ufffd",
    "\U0010ffff",
    "\ud800",
    "</s>",
    "<s>",
    "<pad>",
    "<unk>",
    "##",
    "##a",
    "<unk>x",
]
SEPARATORS = [" ", "", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u200b", "\x1c", "  \t "]


def _encode(text):
    return text.encode("utf-8", "surrogatepass")


def _long_word(char, length):
    return char * max(1, length // len(_encode(char)))


words = st.one_of(
    st.sampled_from(WILD),
    st.text(st.characters(blacklist_categories=()), max_size=12),  # any code point, surrogates too
)
sentences = st.lists(st.tuples(words, st.sampled_from(SEPARATORS)), max_size=30).map(
    lambda pairs: _encode("".join(word + separator for word, separator in pairs))
)
# Words just below, at and just above MAX_BYTES_PER_WORD (the longest the tokenizer splits).
long_words = st.lists(
    st.builds(
        _long_word,
        st.sampled_from(["a", "é", "日", "🙂", "\u0301"]),
        st.sampled_from([MAX_BYTES_PER_WORD - 1, MAX_BYTES_PER_WORD, MAX_BYTES_PER_WORD + 1]),
    ),
    min_size=1,
    max_size=3,
).map(lambda words: _encode(" ".join(words)))
# Texts at and beyond MAX_TEXT_BYTES, built by repeating a chunk (cheap to generate). Each has
# more than `max_source_len` words, so each is `truncated`.
long_texts = st.builds(
    lambda chunk, length: (chunk * (length // len(chunk) + 1))[:length],
    st.sampled_from([b"a ", _encode("\ufdfa"), b"</s> ", _encode(" ".join(WILD)), b"\xff\x00 "]),
    st.sampled_from([MAX_TEXT_BYTES - 1, MAX_TEXT_BYTES, MAX_TEXT_BYTES + 1, 4 * MAX_TEXT_BYTES]),
)
LONG_TEXT = 8 << 10  # the fuzzed texts longer than this are the `long_texts`


def _wild_sentences(seed, count):
    """`count` sentences of 0 to 40 pieces of `WILD` joined by `SEPARATORS`, or random bytes."""
    rng = np.random.default_rng(seed)
    pieces = [_encode(text) for text in WILD]
    separators = [_encode(text) for text in SEPARATORS]
    batch = []
    for _ in range(count):
        if rng.random() < 0.2:
            batch.append(rng.bytes(rng.integers(0, 64)))
        else:
            size = rng.integers(0, 41)
            chosen = zip(rng.integers(len(pieces), size=size), rng.integers(len(separators), size=size))
            batch.append(b"".join(pieces[i] + separators[j] for i, j in chosen))
    return batch


def _one_in_four(strategy):
    """`[]` three times in four, else `[one example]`."""
    return st.one_of(st.just([]), st.just([]), st.just([]), strategy.map(lambda example: [example]))


# Batches of mixed lengths: drawn texts and random bytes, many seeded wild sentences, now and then
# long words and a text at or beyond MAX_TEXT_BYTES, shuffled.
text_batches = st.tuples(
    st.lists(st.one_of(sentences, st.binary(max_size=64)), max_size=12),
    st.builds(_wild_sentences, st.integers(0, 2**32 - 1), st.sampled_from([96, 64, 48, 32, 1, 0])),
    _one_in_four(long_words),
    _one_in_four(long_texts),
    st.randoms(use_true_random=False),
).map(lambda parts: parts[-1].sample(sum(parts[:-1], []), sum(map(len, parts[:-1]))))


def _rss():
    """The resident memory of this process in bytes (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


needs_proc = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc/self/statm")


@pytest.fixture(scope="module")
def export(trained_run):
    """The tiny run's text export, loaded, with its model settings and source tokenizer."""
    train_config, summary = trained_run
    path = Path(summary["export_path"])
    config = json.loads((path / "assets" / "model_config.json").read_text())
    tokenizer = SubwordTokenizer(path / "assets" / "source_vocab.txt", normalize_typing=train_config.normalizes_source)
    max_source_len = config["max_source_len"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def token_counts(texts):
        """`(pieces of each whole text, whether the first max_source_len are those the export reads)`.

        The export tokenizes only the first `max_source_len + 1` words of a text.
        """
        whole = tokenizer.tokenize(texts)
        read = tokenizer.tokenize(texts, max_words=max_source_len + 1)
        shape = [None, max_source_len]
        same = tf.equal(whole[:, :max_source_len].to_tensor(-1, shape=shape), read.to_tensor(-1, shape=shape))
        return whole.row_lengths(), tf.reduce_all(same, axis=1)

    return SimpleNamespace(
        path=path,
        loaded=tf.saved_model.load(str(path)),
        token_counts=token_counts,
        **{
            name: config[name]
            for name in ("max_source_len", "max_target_len", "source_vocab_size", "target_vocab_size")
        },
    )


def _translate(export, batch):
    outputs = export.loaded.signatures["serving_default"](text=tf.constant(batch, dtype=tf.string))
    return {name: value.numpy() for name, value in outputs.items()}


def _expected_truncation(export, batch):
    """`(truncated, no tokens)` per text: the in-process tokenizer's, on the whole text."""
    short = [text for text in batch if len(text) <= LONG_TEXT]
    lengths, same = export.token_counts(tf.constant(short, tf.string))
    assert same.numpy().all()
    lengths = iter(lengths.numpy().tolist())
    truncated, empty = [], []
    for text in batch:
        length = next(lengths) if len(text) <= LONG_TEXT else None
        truncated.append(length is None or length > export.max_source_len)
        empty.append(length == 0)
    return truncated, empty


def _check_text_outputs(export, batch, out):
    """What the text signature promises for every batch."""
    assert {name: (value.dtype, value.shape) for name, value in out.items()} == {
        "translation": (np.dtype(object), (len(batch),)),
        "score": (np.float32, (len(batch),)),
        "truncated": (np.bool_, (len(batch),)),
    }
    for translation in out["translation"]:
        line = translation.decode("utf-8")  # valid UTF-8
        assert line == " ".join(line.split())  # one line, words separated by single spaces
    assert np.isfinite(out["score"]).all() and (out["score"] <= 0).all()  # a log-probability
    truncated, empty = _expected_truncation(export, batch)
    wrong = [i for i, (flag, expected) in enumerate(zip(out["truncated"].tolist(), truncated)) if flag != expected]
    assert not wrong, f"`truncated` is wrong for {len(wrong)} of {len(batch)} texts, e.g. {batch[wrong[0]][:200]!r}"
    for i in np.flatnonzero(empty):  # nothing to translate
        assert out["translation"][i] == b"" and out["score"][i] == 0


@needs_proc
def test_text_signature_gives_a_defined_result_for_any_text(export):
    sent, rss = [], []

    @FUZZ
    @given(batch=text_batches)
    def check(batch):
        _check_text_outputs(export, batch, _translate(export, batch))
        sent.append(len(batch))
        rss.append(_rss())

    check()
    assert sum(sent) >= MIN_INPUTS
    warmed_up = len(rss) // 4
    assert max(rss[warmed_up:]) - rss[warmed_up] < RSS_GROWTH_LIMIT


def _ids_batch(seed, batch_size, length, bad, vocab_size):
    """int32 `[batch_size, length]` of ids in the vocabulary, then padding.

    Some rows have padding inside too; with `bad`, one id is set to that value.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(batch_size, length), dtype=np.int32)
    ids[np.arange(length) >= rng.integers(0, length + 1, size=(batch_size, 1))] = PAD_ID
    ids[rng.random(ids.shape) < 0.05] = PAD_ID
    if bad is not None and ids.size:
        ids.flat[rng.integers(ids.size)] = bad
    return ids


@needs_proc
def test_ids_signature_translates_ids_in_the_vocabulary_and_rejects_the_others(export):
    vocab_size, max_source_len = export.source_vocab_size, export.max_source_len
    int32 = np.iinfo(np.int32)
    translate_ids = export.loaded.signatures["translate_ids"]
    sent, rss = [], []

    @FUZZ
    @given(
        seed=st.integers(0, 2**32 - 1),
        batch_size=st.sampled_from([128, 96, 64, 33, 2, 1, 0]),  # largest first: hypothesis starts there
        # Rows shorter than, at and beyond max_source_len, a few far beyond.
        length=st.one_of(st.integers(0, 3 * max_source_len), st.just(100 * max_source_len)),
        bad=st.sampled_from([None] * 6 + [-1, vocab_size, int32.min, int32.max]),
    )
    def check(seed, batch_size, length, bad):
        source_ids = _ids_batch(seed, batch_size, length, bad, vocab_size)
        sent.append(batch_size)
        rss.append(_rss())
        if bad is not None and source_ids.size:
            with pytest.raises(tf.errors.InvalidArgumentError, match="source_ids must be"):
                translate_ids(source_ids=tf.constant(source_ids))
            return
        out = {name: value.numpy() for name, value in translate_ids(source_ids=tf.constant(source_ids)).items()}
        assert {name: (value.dtype, value.shape) for name, value in out.items()} == {
            "output_ids": (np.int32, (batch_size, export.max_target_len)),
            "score": (np.float32, (batch_size,)),
            "truncated": (np.bool_, (batch_size,)),
        }
        output_ids = out["output_ids"]
        assert ((output_ids >= 0) & (output_ids < export.target_vocab_size)).all()
        # Padding only after the first </s> or <pad>.
        ended = np.cumsum((output_ids == END_ID) | (output_ids == PAD_ID), axis=1) > 0
        after_end = np.concatenate([np.zeros((batch_size, 1), bool), ended[:, :-1]], axis=1)
        assert (output_ids[after_end] == PAD_ID).all()
        assert np.isfinite(out["score"]).all() and (out["score"] <= 0).all()
        assert out["truncated"].tolist() == (source_ids[:, max_source_len:] != PAD_ID).any(axis=1).tolist()
        empty = (source_ids[:, :max_source_len] == PAD_ID).all(axis=1)
        assert (output_ids[empty] == PAD_ID).all() and (out["score"][empty] == 0).all()

    check()
    assert sum(sent) >= MIN_INPUTS
    # Still serving after the rejected batches (the example after each one checks it too).
    assert translate_ids(source_ids=tf.constant([[5, 6, 7]], tf.int32))["output_ids"].shape == (
        1,
        export.max_target_len,
    )
    warmed_up = len(rss) // 4
    assert max(rss[warmed_up:]) - rss[warmed_up] < RSS_GROWTH_LIMIT


def test_a_huge_batch_of_mixed_lengths_gives_each_text_its_own_result(export):
    """2048 texts in one call, from empty to beyond MAX_TEXT_BYTES; each result is the text's own.

    Scores are compared, not translations: two near-equal beams could swap between batch shapes.
    """
    rng = np.random.default_rng(0)
    pool = [_encode(text) for text in WILD] + [b"", b"   ", b"\xff"]
    batch = [
        b" ".join(pool[i] for i in rng.integers(len(pool), size=rng.integers(0, 2 * export.max_source_len)))
        for _ in range(2047)
    ]
    batch.append(b"21.03.1987 " * (MAX_TEXT_BYTES // 10))
    out = _translate(export, batch)
    _check_text_outputs(export, batch, out)
    picks = rng.choice(len(batch), size=16, replace=False).tolist() + [len(batch) - 1]
    alone = _translate(export, [batch[i] for i in picks])
    np.testing.assert_allclose(alone["score"], out["score"][picks], atol=1e-4)
    assert alone["truncated"].tolist() == out["truncated"][picks].tolist()


@needs_proc
def test_memory_stays_bounded_over_a_quarter_gigabyte_of_text(export):
    """32 calls of two 4 MiB texts (random bytes, beyond MAX_TEXT_BYTES): none is kept."""
    rng = np.random.default_rng(0)
    calls, size = 32, 4 << 20
    assert calls * 2 * size // 4 >= RSS_GROWTH_LIMIT  # what the limit's comment promises
    _translate(export, [rng.bytes(size), rng.bytes(size)])
    before = _rss()
    for _ in range(calls):
        assert _translate(export, [rng.bytes(size), rng.bytes(size)])["truncated"].all()
    assert _rss() - before < RSS_GROWTH_LIMIT


def _fastest_of_three(export, text):
    times = []
    for _ in range(3):
        start = time.perf_counter()
        _translate(export, [text])
        times.append(time.perf_counter() - start)
    return min(times)


def test_time_of_a_text_stops_growing_at_max_text_bytes(export):
    """The costliest text known, at MAX_TEXT_BYTES and 16 times beyond it: about as long.

    Words of MAX_BYTES_PER_WORD bytes cost the tokenizer most; before the limit, the longer text
    took 16 times as long.
    """
    word = b"a" * MAX_BYTES_PER_WORD + b" "
    at_limit = (word * (MAX_TEXT_BYTES // len(word) + 1))[:MAX_TEXT_BYTES]
    beyond = at_limit + word * (16 * MAX_TEXT_BYTES // len(word))
    _translate(export, [at_limit])
    assert _translate(export, [beyond])["translation"][0] == _translate(export, [at_limit])["translation"][0]
    assert _fastest_of_three(export, beyond) < 4 * _fastest_of_three(export, at_limit)


def _fuzz_lines(seed, count):
    """`count` lines of wild text for the CLI, none holding a line break.

    The mix above, random bytes, NUL, CR, empty lines, and lines beyond MAX_TEXT_BYTES.
    """
    rng = np.random.default_rng(seed)
    pool = [_encode(text).replace(b"\n", b" ") for text in WILD] + [b"", b"\r", b"\x00", b"\xff\xfe", b"\xc3"]
    lines = []
    for i in range(count - 1):
        if i % 50 == 7:
            lines.append(b"21.03.1987 \xe2\x98\x83 " * (MAX_TEXT_BYTES // 10))
        elif i % 5 == 0:
            lines.append(rng.bytes(rng.integers(0, 80)).replace(b"\n", b"\r"))
        else:
            lines.append(b" ".join(pool[j] for j in rng.integers(len(pool), size=rng.integers(0, 12))))
    return [*lines, b"21.03.1987"]  # not empty: a file may end without a line break after it


def _run_translate(argv, capsysbinary, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(["translate", *argv])
    captured = capsysbinary.readouterr()
    return status, captured.out, captured.err.decode("utf-8")


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_translate_command_translates_every_line_of_wild_input(export, source, tmp_path, capsysbinary, monkeypatch):
    lines = _fuzz_lines(seed=0 if source == "file" else 1, count=400)
    data = b"\n".join(lines) + (b"" if source == "file" else b"\n")  # the last line counts either way
    if source == "file":
        (tmp_path / "in.txt").write_bytes(data)
        status, out, err = _run_translate(
            ["--model", str(export.path), "--input", str(tmp_path / "in.txt")], capsysbinary
        )
    else:
        status, out, err = _run_translate(["--model", str(export.path)], capsysbinary, data, monkeypatch)
    assert status == 0, err
    assert not [line for line in err.splitlines() if line.startswith("error")]
    expected = _translate(export, lines)
    assert out.split(b"\n") == [*expected["translation"].tolist(), b""]  # one line each, in order
    # A warning names each line that is not UTF-8 or longer than the model reads, and no other.
    invalid = {number for number, line in enumerate(lines, 1) if not _is_utf8(line)}
    truncated = {number for number, flag in enumerate(expected["truncated"], 1) if flag}
    assert invalid and truncated
    utf8_warnings = {int(line.split()[2].rstrip(":")) for line in err.splitlines() if "not valid UTF-8" in line}
    long_warnings = {int(line.split()[2].rstrip(":")) for line in err.splitlines() if "longer than" in line}
    assert (utf8_warnings, long_warnings) == (invalid, truncated)


def _is_utf8(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _FailingOn:
    """A text signature that fails, like a model error, on any batch holding `marker`."""

    def __init__(self, signature, marker):
        self.signature, self.marker = signature, marker
        self.structured_input_signature = signature.structured_input_signature

    def __call__(self, text):
        if any(self.marker in value for value in text.numpy().tolist()):
            raise tf.errors.InvalidArgumentError(None, None, f"cannot translate {self.marker!r}\nsecond line")
        return self.signature(text=text)


def test_translate_command_reports_a_bad_line_and_translates_the_rest(export, tmp_path, capsysbinary, monkeypatch):
    lines = _fuzz_lines(seed=2, count=150)
    bad = {3, 70, 150}  # line numbers
    lines = [b"BAD " + line if number in bad else line for number, line in enumerate(lines, 1)]
    (tmp_path / "in.txt").write_bytes(b"\n".join(lines) + b"\n")
    load = tf.saved_model.load

    def load_failing(path):
        loaded = load(path)
        signature = _FailingOn(loaded.signatures["serving_default"], b"BAD")
        return SimpleNamespace(signatures={"serving_default": signature})

    monkeypatch.setattr(tf.saved_model, "load", load_failing)
    status, out, err = _run_translate(["--model", str(export.path), "--input", str(tmp_path / "in.txt")], capsysbinary)
    assert status == 1
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: line {number}: not translated: cannot translate b'BAD'" for number in sorted(bad)]
    good = [line for number, line in enumerate(lines, 1) if number not in bad]
    translations = iter(_translate(export, good)["translation"].tolist())
    expected = [b"" if number in bad else next(translations) for number in range(1, len(lines) + 1)]
    assert out.split(b"\n") == [*expected, b""]


@pytest.mark.slow
def test_wild_input_benchmark_times_every_costly_input_against_a_plain_sentence(trained_run, tmp_path, capsys):
    from benchmarks.translation.wild_input import __main__ as script

    model = str(Path(trained_run[1]["export_path"]).parent)
    assert script.main(["--model", model, "--repeats", "2", "--out", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    result = json.loads((tmp_path / "wild_input.json").read_text())
    assert list(result["inputs"])[:2] == ["plain sentence", "64 KiB of random bytes"]
    assert "4 MiB of words of 1,023 bytes" in result["inputs"] and "translate_ids: 1,000,000 ids" in result["inputs"]
    for name, row in result["inputs"].items():
        assert len(row["seconds"]) == 2 and row["fastest_s"] == min(row["seconds"]) <= row["median_s"]
        assert any(line.startswith(name) and line.rstrip().endswith("x") for line in report.splitlines())
    assert result["slowest_call_s"] == max(max(row["seconds"]) for row in result["inputs"].values())
    assert result["max_text_bytes"] == MAX_TEXT_BYTES and result["machine"]["cpu"]["model"]
