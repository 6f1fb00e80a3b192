"""The CTranslate2 conversion and export: the engine computes our model's log-probabilities and translations."""

import json

import ctranslate2
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import run_main, tiny_config, tiny_model, trained_like_betas

from keras_transformer import cli, runs
from keras_transformer.config import TrainConfig
from keras_transformer.data.parallel_text import load_corpus
from keras_transformer.data.special_tokens import END_ID, RESERVED_TOKENS, START_ID
from keras_transformer.decoding import beam_search, greedy_decode
from keras_transformer.export import MODELS_CONFIG_FILE, latest_version_dir, write_models_config
from keras_transformer.export.ctranslate2_export import (
    CTranslate2Translator,
    export_ctranslate2,
    save_ctranslate2_model,
)
from keras_transformer.models import UnsupportedModelError, conversion_problems, transformer_spec
from keras_transformer.models.translation import TransformerLayers, decode, encode


def _vocabulary(size, prefix):
    return list(RESERVED_TOKENS) + [f"{prefix}{i}" for i in range(len(RESERVED_TOKENS), size)]


def _write_vocabularies(config, folder):
    """`folder/source.txt` and `folder/target.txt`, made-up vocabularies of the config's sizes."""
    for side, size in (("source", config.source_vocab_size), ("target", config.target_vocab_size)):
        (folder / f"{side}.txt").write_text("\n".join(_vocabulary(size, side[0])) + "\n")


def _engine(model, config, folder):
    source, target = _vocabulary(config.source_vocab_size, "s"), _vocabulary(config.target_vocab_size, "t")
    spec = transformer_spec(model, config, source, target)
    spec.optimize(quantization=None)
    folder.mkdir()
    spec.save(str(folder))
    return ctranslate2.Translator(str(folder), intra_threads=1), source, target


def _our_log_probs(model, source_ids, target_ids):
    """Log-probabilities of each target token then `</s>`, by the model (float32, no dropout)."""
    layers = TransformerLayers.from_model(model)
    target_in = np.concatenate([np.full((1, 1), START_ID), target_ids], axis=1)
    target_out = np.concatenate([target_ids, np.full((1, 1), END_ID)], axis=1)
    memory, source_mask = encode(layers, source_ids, training=False)
    logits = keras.ops.convert_to_numpy(decode(layers, target_in, memory, source_mask, training=False))[0]
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), -1, keepdims=True))
    return log_probs[np.arange(target_out.shape[1]), target_out[0]]


CONVERTIBLE = {
    "library": {},
    "paper (one shared table)": dict(variant="paper", target_vocab_size=23, source_vocab_size=23),
    "decoder table computes the logits": dict(embedding_sharing="decoder"),
    "no output projection W^O": dict(use_output_projection=False),
    "learned positions": dict(learned_positions=True),
    "tutorial frequencies": dict(positional_frequencies="tutorial"),
    "per-head initialization": dict(attention_initialization="per_head"),
}


@pytest.mark.parametrize("overrides", CONVERTIBLE.values(), ids=CONVERTIBLE.keys())
def test_engine_scores_equal_the_models_log_probabilities(overrides, tmp_path):
    model = trained_like_betas(tiny_model(seed=3, **overrides), shift=0.3)
    config = tiny_config(**overrides)
    engine, source, target = _engine(model, config, tmp_path / "engine")
    rng = np.random.default_rng(0)
    for source_len, target_len in ((5, 7), (12, 11), (1, 1)):
        source_ids = rng.integers(4, config.source_vocab_size, size=(1, source_len))
        target_ids = rng.integers(4, config.target_vocab_size, size=(1, target_len))
        scored = engine.score_batch([[source[i] for i in source_ids[0]]], [[target[i] for i in target_ids[0]]])
        np.testing.assert_allclose(
            scored[0].log_probs, _our_log_probs(model, source_ids, target_ids), rtol=0, atol=2e-4
        )


UNSUPPORTED = {
    "document": (dict(variant="document"), ["normalize=False", "padding_masks='abs_sum'"]),
    "repository": (dict(variant="repository"), ["projection_activation='relu'", "padding_masks='sum'"]),
    "additive score": (dict(attention_score="additive"), ["attention_score='additive'"]),
}


@pytest.mark.parametrize("overrides, named", UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_a_model_the_engine_cannot_run_is_refused_by_name(overrides, named):
    config = tiny_config(**overrides)
    problems = "; ".join(conversion_problems(config))
    for name in named:
        assert name in problems
    model = tiny_model(**overrides)
    with pytest.raises(UnsupportedModelError, match="CTranslate2 cannot run this model") as raised:
        transformer_spec(model, config, _vocabulary(config.source_vocab_size, "s"), _vocabulary(23, "t"))
    for name in named:
        assert name in str(raised.value)


def test_a_vocabulary_of_another_size_is_refused():
    config = tiny_config()
    with pytest.raises(ValueError, match="target vocabulary has 5 tokens; the model has"):
        transformer_spec(tiny_model(), config, _vocabulary(config.source_vocab_size, "s"), _vocabulary(5, "t"))


def _decoded_ids(output_ids):
    """Each row's ids up to (not including) `</s>`."""
    rows = []
    for row in np.asarray(output_ids):
        ends = np.flatnonzero(row == END_ID)
        rows.append([int(i) for i in row[: ends[0] if len(ends) else len(row)] if i])
    return rows


def _export(loaded_run, folder, beam_size):
    """The CTranslate2 export of the shared tiny run, into `folder`: its version folder."""
    _, model_config, model, translator = loaded_run
    source, target = translator.source_tokenizer, translator.target_tokenizer
    return export_ctranslate2(
        model, model_config, source, target, translator._config_path, folder, "dates", beam_size=beam_size
    )


@pytest.mark.slow
def test_the_export_translates_the_built_in_corpus_as_our_decoders_do(loaded_run, tmp_path):
    """Greedy and beam 4 (ranked by log-probability, the export's setting), sentence by sentence."""
    train_config, model_config, model, translator = loaded_run
    version = _export(loaded_run, tmp_path, beam_size=4)
    sources = load_corpus(train_config, "test").sources
    source_ids = translator.source_tokenizer.tokenize(tf.constant(sources)).to_tensor().numpy()
    max_length = model_config.max_target_len
    for beam_size in (1, 4):
        engine = CTranslate2Translator(version, beam_size=beam_size)
        if beam_size == 1:
            ours, _ = greedy_decode(model, source_ids, max_length)
        else:
            ours, _ = beam_search(model, source_ids, max_length, beam_size=4, alpha=0.0)
        theirs = engine.translate_ids(source_ids)["output_ids"]
        assert _decoded_ids(theirs) == _decoded_ids(ours), f"beam {beam_size}"
    texts = engine.translate(sources[:20])["translation"]
    expected = translator.target_tokenizer.detokenize(tf.constant(ours[:20])).numpy().tolist()
    assert texts == expected


@pytest.mark.slow
def test_awkward_text_gets_the_savedmodels_defined_results(loaded_run, tmp_path):
    _, model_config, model, translator = loaded_run
    version = _export(loaded_run, tmp_path, beam_size=1)
    texts = ["", "   ", "3/4/21 " * 40, b"\xff\xfe 2021", "March 3, 2021"]
    theirs = CTranslate2Translator(version).translate(texts)
    ours = translator.translate(tf.constant(texts))
    assert theirs["translation"][:2] == [b"", b""]
    assert list(theirs["score"][:2]) == [0.0, 0.0]
    assert list(theirs["truncated"]) == list(ours["truncated"].numpy()) == [False, False, True, False, False]
    assert all(isinstance(text, bytes) for text in theirs["translation"])
    empty = CTranslate2Translator(version).translate_ids(np.zeros((2, 3), "int32"))
    assert not empty["output_ids"].any() and not empty["score"].any()


def test_an_export_is_a_checked_version_beside_the_savedmodels_and_never_in_models_config(tmp_path):
    config = tiny_config()
    model = tiny_model()
    _write_vocabularies(config, tmp_path)
    config_path = tmp_path / "model_config.json"
    config.save(config_path)

    class Tokenizer:
        def __init__(self, path):
            self.vocab_path, self.normalize_typing = str(path), False

    exports = tmp_path / "exports"
    versions = [
        export_ctranslate2(
            model,
            config,
            Tokenizer(tmp_path / "source.txt"),
            Tokenizer(tmp_path / "target.txt"),
            config_path,
            exports,
            "dates",
            beam_size=2,
        )
        for _ in range(2)
    ]
    assert [v.name for v in versions] == ["1", "2"] and versions[0].parent.name == "dates_ctranslate2"
    assert not [p for p in versions[0].parent.iterdir() if p.name.startswith(".staging")]
    options = json.loads((versions[1] / "translation_options.json").read_text())
    assert options["beam_size"] == 2 and options["length_penalty"] == 0.0
    assert "dates_ctranslate2" not in write_models_config(exports).read_text()
    assert (exports / MODELS_CONFIG_FILE).is_file()

    assert latest_version_dir(versions[0].parent, export_format="ctranslate2") == versions[1]
    with open(versions[1] / "model.bin", "r+b") as weights:
        weights.truncate(100)
    with pytest.warns(UserWarning, match="model.bin does not match its checksum"):
        assert latest_version_dir(versions[0].parent, export_format="ctranslate2") == versions[0]


def test_save_refuses_a_folder_that_holds_files(tmp_path):
    config = tiny_config()
    _write_vocabularies(config, tmp_path)
    folder = tmp_path / "engine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not empty"):
        save_ctranslate2_model(tiny_model(), config, tmp_path / "source.txt", tmp_path / "target.txt", folder)
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_the_cli_exports_for_the_engine_and_translates_with_it(trained_run, loaded_run, tmp_path, capsys):
    train_config, _ = trained_run
    _, model_config, model, translator = loaded_run
    status, printed = run_main(
        cli.main,
        ["export", "--run-dir", train_config.run_dir, "--export-dir", str(tmp_path), "--format", "ctranslate2"],
        capsys,
    )
    model_dir = tmp_path / "dates_ctranslate2"
    assert status == 0 and printed == f"Exported to {model_dir / '1'}\n"
    assert not (tmp_path / MODELS_CONFIG_FILE).exists()  # nothing TF Serving could load

    sources = load_corpus(train_config, "test").sources[:6]
    status, printed = run_main(cli.main, ["translate", "--model", str(model_dir), *sources, ""], capsys)
    source_ids = translator.source_tokenizer.tokenize(tf.constant(sources)).to_tensor().numpy()
    ours, _ = beam_search(model, source_ids, model_config.max_target_len, beam_size=train_config.beam_size, alpha=0.0)
    expected = [text.decode() for text in translator.target_tokenizer.detokenize(ours).numpy()]
    assert status == 0 and printed.split("\n") == [*expected, "", ""]

    assert cli.main(["generate", "--model", str(model_dir), "a prompt"]) == 2
    assert "holds a translation model (task translate, version 1); generate needs" in capsys.readouterr().err


def test_the_cli_refuses_an_ids_only_engine_export(trained_run, tmp_path, capsys):
    train_config, _ = trained_run
    argv = ["export", "--run-dir", train_config.run_dir, "--export-dir", str(tmp_path), "--format", "ctranslate2"]
    assert cli.main([*argv, "--ids-only"]) == 2
    assert "--ids-only is a SavedModel export" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_an_engine_export_of_a_language_model_run_is_refused(tmp_path):
    lm = TrainConfig(task="lm", run_dir=str(tmp_path / "lm"))
    with pytest.raises(runs.RunError, match="a CTranslate2 export is of a translation run"):
        runs.export_run(None, lm, tmp_path, export_format="ctranslate2")
