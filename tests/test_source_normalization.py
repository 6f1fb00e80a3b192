"""Source typing normalization: `--source-normalization`, on for the built-in dates and off for real corpora."""

import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import TrainConfig
from keras_transformer.data.parallel_text import ParallelText
from keras_transformer.data.vocabulary import read_vocabulary
from keras_transformer.export import saved_model_op_types

FILES = dict(
    corpus="files",
    train_files=("train.src", "train.tgt"),
    validation_files=("valid.src", "valid.tgt"),
    test_files=("test.src", "test.tgt"),
)


@pytest.mark.parametrize(
    "values, folds",
    [
        (dict(), True),
        (dict(source_normalization="off"), False),
        (FILES, False),
        (dict(FILES, source_normalization="on"), True),
        (dict(corpus="tfds", tfds_name="ted_hrlr_translate/pt_to_en"), False),
    ],
)
def test_auto_normalizes_the_builtin_dates_only(values, folds):
    assert TrainConfig(**values).validate().normalizes_source is folds


def test_invalid_choice_is_rejected_and_old_configs_load_as_auto():
    with pytest.raises(ValueError, match="source_normalization"):
        TrainConfig(source_normalization="yes").validate()
    saved = TrainConfig().to_dict()
    del saved["source_normalization"]  # a run saved before the setting existed
    assert TrainConfig.from_dict(saved).source_normalization == "auto"


def test_train_help_offers_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--source-normalization {auto,on,off}" in out
    assert "auto (on for the built-in dates, off for files and tfds)" in out


@pytest.mark.parametrize("folding, has_upper", [("auto", True), ("on", False)])
def test_files_corpus_keeps_case_unless_asked(tmp_path, folding, has_upper):
    config = TrainConfig(**FILES, source_normalization=folding, source_vocab_size=200, target_vocab_size=200)
    text = ParallelText(["Hello World", "The CAT sat", "hello world"] * 5, ["Hallo Welt", "Die Katze", "x"] * 5, {})
    source, target = runs._tokenizers(tmp_path, config.validate(), text)
    assert source.normalize_typing is not has_upper and not target.normalize_typing
    assert any(token != token.lower() for token in read_vocabulary(tmp_path / "source_vocab.txt")) is has_upper
    assert any(token != token.lower() for token in read_vocabulary(tmp_path / "target_vocab.txt"))
    ids = source.tokenize(["HELLO world", "hello world"]).to_list()
    assert (ids[0] == ids[1]) is not has_upper


def test_builtin_run_normalizes_typing_in_its_export(trained_run, loaded_run, loaded_export):
    train_config, summary = trained_run
    assert train_config.normalizes_source
    _, _, _, translator = loaded_run
    assert translator.source_tokenizer.normalize_typing and not translator.target_tokenizer.normalize_typing
    assert "CaseFoldUTF8" in saved_model_op_types(summary["export_path"])
    texts = ["MARCH 21, 1987", "march 21 ,1987", "March 21,1987", "SAT 21 MAR 1987", "sat 21 mar 1987"]
    served = loaded_export.signatures["serving_default"](text=tf.constant(texts))["translation"].numpy().tolist()
    assert served[0] == served[1] == served[2] and served[3] == served[4]
    assert served == translator.translate(tf.constant(texts))["translation"].numpy().tolist()
