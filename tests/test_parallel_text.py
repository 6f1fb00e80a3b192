"""Real corpora: line-aligned text files (plain or gzip) and TFDS datasets.

TFDS datasets are read offline, with `tfds.testing.mock_data`. Also: bad files, token-budget
batches, joint vocabularies, chrF and the per-epoch validation BLEU.
"""

import gzip
import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from conftest import TINY_MODEL, tiny_train_config

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import TrainConfig
from keras_transformer.data.dates import builtin_corpus
from keras_transformer.data.parallel_text import (
    MAX_LINE_BYTES,
    CorpusError,
    load_corpus,
    load_tfds,
    read_parallel_files,
)
from keras_transformer.data.translation_batches import EncodedPairs, make_dataset
from keras_transformer.training import averaged_weights


def write_lines(path, lines, compress=False, newline=b"\n"):
    """Write byte or str lines; return the path."""
    data = newline.join(line if isinstance(line, bytes) else line.encode("utf-8") for line in lines) + newline
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def test_plain_and_gzip_files_read_the_same_pairs(tmp_path):
    sources, targets = ["Ein Hund läuft.", "Zwei Männer « sprechen »"], ["A dog runs.", "Two men talk"]
    plain = read_parallel_files(write_lines(tmp_path / "de.txt", sources), write_lines(tmp_path / "en.txt", targets))
    # gzip is recognised by its bytes, whatever the file is called
    zipped = read_parallel_files(
        write_lines(tmp_path / "de.gz", sources, compress=True), write_lines(tmp_path / "en.data", targets, True)
    )
    assert (plain.sources, plain.targets) == (zipped.sources, zipped.targets) == (sources, targets)
    assert plain.skipped == {}


def test_only_newline_separates_sentences(tmp_path):
    r"""CRLF endings are removed, but U+2028, U+0085 and a lone `\r` inside a line stay inside it.

    Splitting on them would shift one file against the other.
    """
    sources = ["eins\u2028zwei", "drei\x85vier", "fünf\rsechs"]
    targets = ["one two", "three four", "five six"]
    text = read_parallel_files(
        write_lines(tmp_path / "s", sources, newline=b"\r\n"), write_lines(tmp_path / "t", targets, newline=b"\r\n")
    )
    assert text.sources == sources and text.targets == targets


def test_unusable_pairs_are_skipped_together_and_counted(tmp_path):
    sources = [b"gut", b"\xff\xfe kaputt", b"", b"x" * (MAX_LINE_BYTES + 1), b"auch gut", b"   "]
    targets = [b"good", b"broken", b"empty source", b"long", b"\xc3", b"blank"]
    text = read_parallel_files(write_lines(tmp_path / "s", sources), write_lines(tmp_path / "t", targets))
    assert list(zip(text.sources, text.targets)) == [("gut", "good")]
    assert text.skipped == {"undecodable": 2, "empty": 2, "line_too_long": 1}


@pytest.mark.parametrize(
    "source_lines, target_lines, message",
    [
        (["a", "b", "c"], ["x", "y"], "has 3 lines but .* has 2"),
        ([], ["x"], "is empty"),
        ([b"\xff"], [b"\xfe"], "No usable sentence pairs"),
    ],
    ids=["mismatched-lines", "empty-file", "nothing-usable"],
)
def test_bad_parallel_files_are_clear_errors(tmp_path, source_lines, target_lines, message):
    source = tmp_path / "s.txt"
    source.write_bytes(b"") if not source_lines else write_lines(source, source_lines)
    target = write_lines(tmp_path / "t.txt", target_lines)
    with pytest.raises(CorpusError, match=message):
        read_parallel_files(source, target)


def test_missing_and_corrupt_files_are_clear_errors(tmp_path):
    target = write_lines(tmp_path / "t.txt", ["x"])
    with pytest.raises(FileNotFoundError, match="No such file"):
        read_parallel_files(tmp_path / "missing.txt", target)
    corrupt = tmp_path / "bad.gz"
    corrupt.write_bytes(b"\x1f\x8b" + b"not really gzip")
    with pytest.raises(CorpusError, match="not a readable gzip file"):
        read_parallel_files(corrupt, target)


def test_tfds_translation_dataset_loads_offline_with_mock_data():
    with tfds.testing.mock_data(num_examples=12):
        text = load_tfds("ted_hrlr_translate/pt_to_en", "train")
        validation = load_tfds("wmt14_translate/de-en", "validation")
    assert len(text) == 12 and len(validation) == 12
    assert all(isinstance(s, str) and isinstance(t, str) for s, t in zip(text.sources, text.targets))


def test_unknown_tfds_dataset_is_a_clear_error():
    with pytest.raises(CorpusError, match="Cannot load TFDS dataset 'no_such_dataset'"):
        load_tfds("no_such_dataset", "train", download=False)


def test_config_requires_consistent_corpus_settings(tmp_path):
    with pytest.raises(ValueError, match="needs --validation-files, --test-files"):
        TrainConfig(corpus="files", train_files=("a", "b")).validate()
    with pytest.raises(ValueError, match="use --corpus files"):
        TrainConfig(train_files=("a", "b")).validate()
    with pytest.raises(ValueError, match="takes two paths"):
        TrainConfig(corpus="files", train_files=("a",), validation_files=("a", "b"), test_files=("a", "b")).validate()
    with pytest.raises(ValueError, match="tfds"):
        TrainConfig(corpus="tfds").validate()
    config = TrainConfig(corpus="files", train_files=("a", "b"), validation_files=("c", "d"), test_files=("e", "f"))
    config.validate().save(tmp_path / "c.json")
    assert TrainConfig.load(tmp_path / "c.json") == config  # JSON lists come back as tuples


def test_train_size_takes_the_first_pairs_of_a_file(tmp_path):
    pair_files = {}
    for split in ("train", "validation", "test"):
        sources, targets = builtin_corpus(split, size=20)
        pair_files[f"{split}_files"] = (
            str(write_lines(tmp_path / f"{split}.src", sources)),
            str(write_lines(tmp_path / f"{split}.tgt", targets)),
        )
    config = TrainConfig(corpus="files", train_size=5, **pair_files).validate()
    assert load_corpus(config, "train").sources == builtin_corpus("train", size=5)[0]
    assert len(load_corpus(config, "test")) == 20  # only the training split is cut
    config = TrainConfig(corpus="files", validation_size=7, test_size=3, **pair_files).validate()
    assert load_corpus(config, "validation").targets == builtin_corpus("validation", size=7)[1]
    assert load_corpus(config, "test").sources == builtin_corpus("test", size=3)[0]
    assert len(load_corpus(config, "train")) == 20


def test_builtin_held_out_sizes_are_prefixes_of_the_default_splits():
    config = TrainConfig(validation_size=30, test_size=10, seed=3).validate()
    for split, size in (("validation", 30), ("test", 10)):
        text = load_corpus(config, split)
        assert (text.sources, text.targets) == tuple(pairs[:size] for pairs in builtin_corpus(split, seed=3))
    with pytest.raises(ValueError, match="test_size"):
        TrainConfig(test_size=-1).validate()


def write_corpus_files(root, sizes=(300, 40, 40), compress=True):
    """The built-in corpus as gzipped parallel files, with a few bad lines in training."""
    flags = []
    for split, size in zip(("train", "validation", "test"), sizes):
        sources, targets = builtin_corpus(split, size=size)
        if split == "train":
            sources, targets = sources + [b"\xff\xfe"], targets + ["1999-01-01"]
        suffix = ".gz" if compress else ".txt"
        flags += [
            f"--{split}-files",
            str(write_lines(root / f"{split}.src{suffix}", sources, compress)),
            str(write_lines(root / f"{split}.tgt{suffix}", targets, compress)),
        ]
    return flags


def tiny_flags(root):
    config = tiny_train_config(root, beam_size=2)
    return [
        "--preset",
        "tiny",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "3",
        "--batch-size",
        "16",
        "--warmup-steps",
        "10",
        "--source-vocab-size",
        "300",
        "--target-vocab-size",
        "40",
        "--beam-size",
        str(config.beam_size),
        "--run-dir",
        config.run_dir,
        "--export-dir",
        config.export_dir,
        "--max-source-len",
        str(TINY_MODEL["max_source_len"]),
        "--max-target-len",
        str(TINY_MODEL["max_target_len"]),
    ]


@pytest.mark.slow
def test_train_on_gzipped_files_from_the_cli_with_validation_bleu_and_weight_averaging(tmp_path, capsys):
    averaging = ["--epochs", "2", "--validation-bleu-sentences", "20", "--ema-momentum", "0.9"]
    assert main(["train", *tiny_flags(tmp_path), *write_corpus_files(tmp_path), *averaging]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["train_config"]["corpus"] == "files"  # implied by --train-files
    assert summary["train_pairs"] + summary["dropped_pairs"] == 300
    assert summary["skipped_while_reading"] == {"undecodable": 1}
    assert summary["test"]["sentences"] == 40 and "chrf" in summary["test"]
    assert "chrF" in capsys.readouterr().out
    loaded = tf.saved_model.load(summary["export_path"])
    assert loaded.signatures["serving_default"](text=tf.constant(["21.03.1987"]))["translation"].shape == (1,)

    # Validation BLEU is logged every epoch, to the metrics and to TensorBoard.
    assert "val_bleu" in summary["final_metrics"]
    events = list((tmp_path / "run" / "logs" / "validation").glob("events.out.tfevents.*"))
    bleu_steps = []
    for path in events:
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            bleu_steps += [event.step for value in event.summary.value if value.tag == "epoch_bleu"]
    assert sorted(bleu_steps) == [0, 1]
    # The saved model holds the moving averages of the weights, not the last trained weights.
    model = keras.saving.load_model(summary["model_path"])
    saved = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    with averaged_weights(model) as swapped:
        assert swapped
        for got, want in zip(model.trainable_weights, saved):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-6)


@pytest.mark.slow
def test_train_on_a_tfds_dataset_offline(tmp_path):
    with tfds.testing.mock_data(num_examples=64):
        flags = tiny_flags(tmp_path) + ["--tfds-name", "ted_hrlr_translate/pt_to_en", "--source-vocab-size", "300"]
        assert main(["train", *flags, "--target-vocab-size", "300"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["train_config"]["corpus"] == "tfds"
    assert summary["train_pairs"] + summary["dropped_pairs"] == 64
    assert summary["test"]["sentences"] == 64


def test_bad_corpus_flags_print_one_error_line(tmp_path, capsys):
    flags = tiny_flags(tmp_path)
    files = write_corpus_files(tmp_path, sizes=(30, 5, 5), compress=False)
    # make the training target file one line short
    target = Path(files[2])
    target.write_text("\n".join(target.read_text().splitlines()[:-1]) + "\n")
    assert main(["train", *flags, *files]) == 2
    assert "lines but" in capsys.readouterr().err
    missing = [*files[:1], str(tmp_path / "nope.src"), *files[2:]]
    assert main(["train", *tiny_flags(tmp_path / "b"), *missing]) == 2
    assert "No such file" in capsys.readouterr().err
    assert main(["train", *tiny_flags(tmp_path / "c"), "--train-files", "a", "b"]) == 2
    assert "needs --validation-files" in capsys.readouterr().err


def test_token_budget_batches_stay_within_budget_and_cover_every_pair():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, size=200)
    source = tf.ragged.constant([list(range(4, 4 + n)) for n in lengths], dtype=tf.int32)
    target = tf.ragged.constant([[5] * max(1, n // 2) for n in lengths], dtype=tf.int32)
    pairs = EncodedPairs(source, target, num_dropped=0)
    seen = 0
    for (source_ids, target_in), _ in make_dataset(pairs, batch_size=64, batch_tokens=120):
        batch, width = source_ids.shape[0], max(source_ids.shape[1], target_in.shape[1])
        assert batch * width <= 120 or batch == 1
        seen += batch
    assert seen == 200


def test_joint_vocabulary_is_shared_by_both_sides(tmp_path):
    config = tiny_train_config(tmp_path, joint_vocab=True, source_vocab_size=150, train_size=200)
    text = load_corpus(config, "train")
    source_tokenizer, target_tokenizer = runs._tokenizers(tmp_path, config, text)
    assert (tmp_path / "source_vocab.txt").read_text() == (tmp_path / "target_vocab.txt").read_text()
    assert source_tokenizer.vocab_size == target_tokenizer.vocab_size <= 150
    # One id per piece on both sides; the source side reads the date typing-normalized.
    pieces = source_tokenizer.tokenize(["1987-03-21"]).to_list()[0]
    assert pieces == target_tokenizer.tokenize(["1987 - 03 - 21"]).to_list()[0] and 1 not in pieces
    assert target_tokenizer.tokenize(["1987-03-21"]).to_list()[0] != pieces
