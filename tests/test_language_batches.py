"""Language-model batches: text sources, `<mask>` vocabularies, causal LM packing, MLM masking.

Most tests feed random ids straight to the pipelines (no tokenizer), so that the statistics run on
a large sample in little time; the expected values are computed here with numpy, from the ids
given in, not from the pipeline's own tensors.
"""

import datetime
import gzip
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.data.causal_lm_batches import causal_lm_dataset
from keras_transformer.data.date_classification import classification_dataset, date_classification
from keras_transformer.data.date_words import MONTH_NAMES, WEEKDAY_NAMES
from keras_transformer.data.dates import builtin_corpus
from keras_transformer.data.masked_lm_batches import masked_lm_dataset
from keras_transformer.data.special_tokens import END_ID, PAD_ID, START_ID
from keras_transformer.data.texts import builtin_texts, encode_texts, load_texts, load_tfds_texts, read_text_file
from keras_transformer.data.tokenizers import LM_RESERVED_TOKENS, MASK_ID, MASK_TOKEN, RESERVED_TOKENS, SubwordTokenizer
from keras_transformer.data.vocabulary import learn_vocabulary, write_vocabulary
from keras_transformer.training import MaskedAccuracy, MaskedLabelSmoothedLoss

V = 60  # vocabulary size of the random ids
R = len(LM_RESERVED_TOKENS)  # 5: <pad> <unk> <s> </s> <mask>


def random_rows(n, low, high, seed=0, vocab_size=V):
    """`n` rows of random text-piece ids (>= R), `low .. high - 1` long, as lists and as ragged int32."""
    rng = np.random.default_rng(seed)
    rows = [rng.integers(R, vocab_size, size=rng.integers(low, high)).tolist() for _ in range(n)]
    return rows, tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1, inner_shape=())


def collect(dataset):
    """All batches of a finite dataset, concatenated: a pair of numpy arrays."""
    inputs, labels = zip(*((x.numpy(), y.numpy()) for x, y in dataset))
    return np.concatenate(inputs), np.concatenate(labels)


def take(dataset, n):
    return [(x.numpy(), y.numpy()) for x, y in dataset.take(n)]


@pytest.fixture(scope="module")
def lm_tokenizer(tmp_path_factory):
    texts = builtin_texts("train", size=300).texts + ["a <mask> b<mask> <s>"]
    vocab = learn_vocabulary(texts, 150, extra_reserved=(MASK_TOKEN,))
    path = tmp_path_factory.mktemp("vocab") / "lm.txt"
    write_vocabulary(vocab, path)
    return SubwordTokenizer(path)


# --------------------------------------------------------------------------
# <mask> vocabularies
# --------------------------------------------------------------------------
def test_mask_vocabulary_keeps_the_translation_ids(tmp_path, lm_tokenizer):
    texts = ["the 3rd of march", "21.03.1987", "a <mask> b<mask> <s>"]
    translation = learn_vocabulary(texts, 60)
    lm = learn_vocabulary(texts, 60, extra_reserved=(MASK_TOKEN,))
    assert tuple(translation[:4]) == tuple(lm[:4]) == RESERVED_TOKENS
    assert lm[MASK_ID] == MASK_TOKEN == "<mask>" and translation[MASK_ID] == "."  # the first character
    assert len(lm) == len(set(lm)) <= 60
    write_vocabulary(translation, tmp_path / "t.txt")
    plain = SubwordTokenizer(tmp_path / "t.txt")
    assert (plain.mask_id, plain.num_reserved) == (None, 4)
    assert (lm_tokenizer.mask_id, lm_tokenizer.num_reserved, lm_tokenizer.reserved_tokens) == (4, 5, LM_RESERVED_TOKENS)
    # Literal "<mask>" and "<s>" in the text never become reserved ids, and round-trip.
    for tokenizer in (plain, lm_tokenizer):
        ids = tokenizer.tokenize(["a <mask> b<mask> <s>"])
        assert ids.flat_values.numpy().min() >= tokenizer.num_reserved
        assert tokenizer.detokenize(ids).numpy().tolist() == [b"a <mask> b<mask> <s>"]


@pytest.mark.parametrize("extra", [("mask",), ("<s>",), ("<mask>", "<mask>"), ("<a b>",)])
def test_bad_extra_reserved_tokens_are_named(extra):
    with pytest.raises(ValueError, match=re.escape(repr(extra[-1]))):
        learn_vocabulary(["a b c"], 30, extra_reserved=extra)


# --------------------------------------------------------------------------
# Masked LM
# --------------------------------------------------------------------------
def within(count, n, p, sds=4.5):
    """`count` out of `n` draws is within `sds` binomial standard deviations of `n * p`."""
    sd = np.sqrt(n * p * (1 - p))
    return abs(count - n * p) <= sds * sd, (count, n * p, sd)


def test_masked_lm_statistics_on_a_large_sample():
    L = 40
    rows, ids = random_rows(4000, 1, 45)  # some rows are cut at L
    inputs, labels = collect(masked_lm_dataset(ids, L, 500, V, seed=7))
    original = np.zeros_like(inputs)
    for i, row in enumerate(rows):
        full = ([START_ID] + row + [END_ID])[:L]
        original[i, : len(full)] = full
    assert inputs.shape == labels.shape == (4000, L) and inputs.dtype == labels.dtype == np.int32

    real = original >= R
    selected = labels != 0
    assert not np.any(selected & ~real)  # padding, <s> and </s> never selected
    np.testing.assert_array_equal(labels[selected], original[selected])
    np.testing.assert_array_equal(inputs[~selected], original[~selected])  # unselected positions untouched
    assert np.all(inputs[original == PAD_ID] == PAD_ID) and np.all(inputs[:, 0] == START_ID)

    ok, detail = within(selected.sum(), real.sum(), 0.15)
    assert ok, detail
    chosen, before = inputs[selected], original[selected]
    masked, kept = chosen == MASK_ID, chosen == before
    replaced = ~masked & ~kept
    for count, p in ((masked.sum(), 0.8), (replaced.sum(), 0.1), (kept.sum(), 0.1)):
        ok, detail = within(count, selected.sum(), p)
        assert ok, detail
    # Random replacements are other text pieces, spread over the whole vocabulary.
    assert np.all((chosen[replaced] >= R) & (chosen[replaced] < V))
    assert len(np.unique(chosen[replaced])) == V - R


def test_masked_lm_is_deterministic_given_the_seed_and_resumes_by_skipping():
    _, ids = random_rows(200, 3, 20)

    def batches(seed, skip=0, n=6):
        dataset = masked_lm_dataset(ids, 24, 16, V, shuffle=True, repeat=True, seed=seed)
        return take(dataset.skip(skip), n)

    first, again = batches(3), batches(3)
    for (x1, y1), (x2, y2) in zip(first, again):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    resumed = batches(3, skip=4, n=2)
    for (x1, y1), (x2, y2) in zip(first[4:], resumed):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    other = batches(4)
    assert any(not np.array_equal(y1, y2) for (_, y1), (_, y2) in zip(first, other))


def test_each_pass_masks_the_same_texts_afresh():
    _, ids = random_rows(64, 10, 20)
    (x1, y1), (x2, y2) = take(masked_lm_dataset(ids, 24, 64, V, repeat=True, seed=0), 2)
    assert not np.array_equal(y1, y2)
    # The texts are the same: restoring the selected pieces gives the same rows in both passes.
    restored1, restored2 = np.where(y1 > 0, y1, x1), np.where(y2 > 0, y2, x2)
    np.testing.assert_array_equal(restored1, restored2)


def test_the_loss_ignores_every_position_that_is_not_selected():
    _, ids = random_rows(32, 5, 20)
    inputs, labels = take(masked_lm_dataset(ids, 24, 32, V, seed=1), 1)[0]
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(*labels.shape, V)).astype("float32")
    changed = logits.copy()
    changed[labels == 0] = rng.normal(size=((labels == 0).sum(), V)) * 10
    loss = MaskedLabelSmoothedLoss(0.1)
    np.testing.assert_allclose(float(loss(labels, changed)), float(loss(labels, logits)), rtol=1e-6)
    accuracy = [MaskedAccuracy(), MaskedAccuracy()]
    accuracy[0].update_state(labels, logits)
    accuracy[1].update_state(labels, changed)
    assert float(accuracy[0].result()) == float(accuracy[1].result())
    # ... and the selected positions alone make the loss: their mean token loss.
    picked = labels > 0
    per_token = -keras.ops.convert_to_numpy(keras.ops.log_softmax(logits[picked]))
    expected = np.mean(0.9 * per_token[np.arange(picked.sum()), labels[picked]] + 0.1 * per_token.mean(-1))
    np.testing.assert_allclose(float(loss(labels, logits)), expected, rtol=1e-5)


# --------------------------------------------------------------------------
# Causal LM
# --------------------------------------------------------------------------
@pytest.mark.parametrize("L", [7, 16])
def test_packed_windows_hold_the_stream_once_in_order_labels_shifted_by_one(L):
    rows, ids = random_rows(50, 0, 12)  # empty texts are left out
    inputs, labels = collect(causal_lm_dataset(ids, L, 8))
    assert inputs.shape[1:] == labels.shape[1:] == (L,) and inputs.dtype == labels.dtype == np.int32
    stream = [token for row in rows if row for token in [START_ID, *row, END_ID]]
    windows = []
    for x, y in zip(inputs, labels):
        n = int((y != PAD_ID).sum())
        assert n >= 1 and np.all(y[n:] == PAD_ID) and np.all(x[n:] == PAD_ID)  # padding only at the end
        np.testing.assert_array_equal(x[1:n], y[: n - 1])  # labels are the inputs shifted by one
        windows.extend([x[0], *y[:n]])
    # Every token once, in order; only a last window of one token (the final </s>) is left out.
    assert windows == stream[: len(windows)] and stream[len(windows) :] in ([], [END_ID])
    assert len(inputs) == len(stream) // (L + 1) + (len(stream) % (L + 1) >= 2)  # a 1-token tail is left out
    assert np.all(labels[:-1] != PAD_ID)  # only the last window is padded


def test_unpacked_rows_are_one_text_each_from_start():
    rows, ids = random_rows(20, 1, 12)
    inputs, labels = collect(causal_lm_dataset(ids, 8, 8, pack=False))
    for row, x, y in zip(rows, inputs, labels):
        window = ([START_ID, *row, END_ID])[:9]
        np.testing.assert_array_equal(x[: len(window) - 1], window[:-1])
        np.testing.assert_array_equal(y[: len(window) - 1], window[1:])
        assert np.all(y[len(window) - 1 :] == PAD_ID)


def test_causal_lm_shuffles_by_text_deterministically():
    _, ids = random_rows(100, 1, 12)
    first = take(causal_lm_dataset(ids, 16, 4, shuffle=True, repeat=True, seed=5), 8)
    again = take(causal_lm_dataset(ids, 16, 4, shuffle=True, repeat=True, seed=5), 8)
    other = take(causal_lm_dataset(ids, 16, 4, shuffle=True, repeat=True, seed=6), 8)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, again))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, other))


# --------------------------------------------------------------------------
# Text sources
# --------------------------------------------------------------------------
def test_builtin_text_sides():
    sources, targets = builtin_corpus("validation", size=5, seed=2)
    assert builtin_texts("validation", 5, seed=2).texts == sources
    assert builtin_texts("validation", 5, seed=2, side="target").texts == targets
    both = builtin_texts("validation", 5, seed=2, side="both").texts
    assert both[0::2] == sources and both[1::2] == targets


def batches_of(texts, tokenizer):
    return collect(masked_lm_dataset(encode_texts(texts, tokenizer), 16, 4, tokenizer.vocab_size, seed=1))


def test_line_files_give_the_batches_of_the_same_text_in_memory(tmp_path, lm_tokenizer):
    texts = builtin_texts("test", size=30).texts
    lines = "\n".join(texts[:10] + ["", "  ", *texts[10:]]) + "\n"
    (tmp_path / "plain.txt").write_text(lines, encoding="utf-8")
    (tmp_path / "packed.txt").write_bytes(gzip.compress(lines.encode("utf-8") + b"\xff\xfe bad\n"))
    plain, packed = read_text_file(tmp_path / "plain.txt"), read_text_file(tmp_path / "packed.txt")
    assert plain.texts == packed.texts == texts
    assert plain.skipped == {"empty": 2} and packed.skipped == {"empty": 2, "undecodable": 1}
    expected = batches_of(texts, lm_tokenizer)
    for got in (batches_of(plain, lm_tokenizer), batches_of(packed, lm_tokenizer)):
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    assert load_texts("files", "train", size=3, path=tmp_path / "plain.txt").texts == texts[:3]


def test_a_mocked_tfds_text_dataset_gives_the_batches_of_its_text_in_memory(lm_tokenizer):
    with tfds.testing.mock_data(num_examples=12):
        corpus = load_tfds_texts("imdb_reviews", "train", feature="text")
        in_memory = [
            example["text"].decode("utf-8").strip()
            for example in tfds.as_numpy(tfds.load("imdb_reviews", split="train"))
        ]
        with pytest.raises(ValueError, match="no feature 'sentence'.*'label', 'text'"):
            load_tfds_texts("imdb_reviews", "train", feature="sentence")
        with pytest.raises(ValueError, match="'label'.* is not a text"):
            load_tfds_texts("imdb_reviews", "train", feature="label")
    assert corpus.texts == [text for text in in_memory if text] and len(corpus) + sum(corpus.skipped.values()) == 12
    expected, got = batches_of(in_memory, lm_tokenizer), batches_of(corpus, lm_tokenizer)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


# --------------------------------------------------------------------------
# The date classification task
# --------------------------------------------------------------------------
def test_date_labels_agree_with_the_calendar():
    sources, targets = builtin_corpus("validation", size=200, seed=3)
    month = date_classification("validation", 200, seed=3, label="month")
    decade = date_classification("validation", 200, seed=3, label="decade")
    assert month.texts == decade.texts == sources and month.dates == targets
    days = [datetime.date.fromisoformat(target) for target in targets]
    assert month.labels == [day.month - 1 for day in days]
    assert [month.classes[label].lower() for label in month.labels] == [MONTH_NAMES[day.month - 1] for day in days]
    assert decade.labels == [day.year // 10 - 190 for day in days] and decade.classes[-1] == "2090s"

    weekday = date_classification("validation", 200, seed=3, label="weekday")
    assert len(weekday) == 200 and weekday.classes[0] == "Monday"
    assert weekday.labels == [datetime.datetime.strptime(d, "%Y-%m-%d").isoweekday() - 1 for d in weekday.dates]
    # The weekday is never written in the text, and each text names its date (its ISO target).
    pairs = dict(zip(*builtin_corpus("validation", size=2000, seed=3)))
    assert all(pairs[text] == date for text, date in zip(weekday.texts, weekday.dates))
    names = re.compile(r"\b(" + "|".join(name[:3] for name in WEEKDAY_NAMES) + ")")
    assert not any(names.search(text.lower()) for text in weekday.texts)
    assert date_classification("validation", 50, seed=3, label="weekday").texts == weekday.texts[:50]
    assert not set(date_classification("test", 200, seed=3).dates) & set(month.dates)


def test_classification_batches(lm_tokenizer):
    task = date_classification("train", 10, label="decade")
    ids = encode_texts(task.texts, lm_tokenizer)
    rows, labels = collect(classification_dataset(ids, task.labels, 20, 4))
    assert rows.shape == (10, 20) and labels.tolist() == task.labels and labels.dtype == np.int32
    assert np.all(rows[:, 0] == START_ID)
    for row, pieces in zip(rows, ids.to_list()):  # long texts are cut at 20 tokens
        expected = [START_ID, *pieces, END_ID][:20]
        np.testing.assert_array_equal(row[: len(expected)], expected)
        assert np.all(row[len(expected) :] == PAD_ID)
    assert np.any(rows[:, -1] != PAD_ID) and np.any(rows[:, -1] == PAD_ID)


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------
def test_bad_input_is_a_value_error_naming_the_value(lm_tokenizer):
    _, ids = random_rows(10, 1, 5)
    empty = encode_texts(["", "   "], lm_tokenizer)
    cases = [
        (lambda: causal_lm_dataset(empty, 8, 2), "2 text\\(s\\), 0 tokens"),
        (lambda: masked_lm_dataset(empty, 8, 2, V), "2 text\\(s\\), 0 tokens"),
        (lambda: causal_lm_dataset(ids, 1, 2), "`seq_len` must be an int >= 2. Received: seq_len=1"),
        (lambda: masked_lm_dataset(ids, 2, 2, V), "`seq_len` must be an int >= 3. Received: seq_len=2"),
        (lambda: causal_lm_dataset(ids, 8, 0), "`batch_size` must be an int >= 1. Received: batch_size=0"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_rate=0.0), r"`mask_rate` must be a number in \(0, 1\)\. .*=0.0"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_rate=1.0), r"`mask_rate` must be a number in \(0, 1\)\. .*=1.0"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_rate=-0.2), "Received: mask_rate=-0.2"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_token_rate=0.95), "mask_token_rate=0.95, random_token_rate=0.1"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_id=None), "no <mask>"),
        (lambda: masked_lm_dataset(ids, 8, 2, V, mask_id=2), r"`mask_id` must be an int in \[4, 4\]\. .*=2"),
        (lambda: masked_lm_dataset(ids, 8, 2, 6), "`vocab_size` must be an int >= 7. Received: vocab_size=6"),
        (lambda: classification_dataset(ids, [0, 1], 8, 2), "10 != 2"),
        (lambda: builtin_texts("train", 5, side="left"), "Received: side='left'"),
        (lambda: date_classification("train", 5, label="year"), "Received: label='year'"),
        (lambda: load_texts("web", "train"), "Received: corpus='web'"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()
