"""The exported SavedModel: TF Serving layout, atomic versions, a graph that loads and translates
without the project, with an op set TF Serving 2.12+ can run."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tensorflow as tf
from conftest import serving_op_lists

from keras_transformer import runs
from keras_transformer.export import export_translator, latest_version_dir, next_version, saved_model_op_types

pytestmark = pytest.mark.slow


def _run_python(code, timeout=300):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )


def test_export_is_in_tf_serving_layout(trained_run):
    train_config, summary = trained_run
    export_path = Path(summary["export_path"])
    assert export_path == Path(train_config.export_dir) / "dates" / "1"
    assert (export_path / "saved_model.pb").is_file()
    assert (export_path / "variables").is_dir()
    assets = {p.name for p in (export_path / "assets").iterdir()}
    assert {"source_vocab.txt", "target_vocab.txt", "model_config.json"} <= assets
    config = json.loads((export_path / "assets" / "model_config.json").read_text())
    assert config["max_target_len"] == 14
    # no staging folder left behind
    assert [p.name for p in export_path.parent.iterdir()] == ["1"]


def test_export_loads_and_translates_in_a_process_without_the_project(trained_run):
    _, summary = trained_run
    result = _run_python(
        f"""
        import sys
        import tensorflow as tf
        import tensorflow_text
        loaded = tf.saved_model.load({summary["export_path"]!r})
        translate = loaded.signatures["serving_default"]
        out = translate(text=tf.constant(["march 21, 1987", "", "the first of may two thousand and four"]))
        translation = out["translation"]
        assert translation.dtype == tf.string and translation.shape == (3,), translation
        empty = translate(text=tf.constant([], dtype=tf.string))["translation"]
        assert empty.shape == (0,), empty
        assert not any(name.startswith("keras_transformer") for name in sys.modules), "project imported"
        print("OK", [t.decode() for t in translation.numpy()])
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("OK")


def test_exported_signature_equals_the_in_process_translator(trained_run):
    train_config, summary = trained_run
    _, _, _, translator = runs.load_run(train_config.run_dir)
    texts = ["21.03.1987", "Sat 21 Mar 1987", "the twenty-first of march nineteen eighty-seven"]
    loaded = tf.saved_model.load(summary["export_path"])
    served = loaded.signatures["serving_default"](text=tf.constant(texts))["translation"].numpy()
    assert list(served) == list(translator.translate(tf.constant(texts))["translation"].numpy())


def test_export_op_set_runs_on_tf_serving_2_12(trained_run):
    _, summary = trained_run
    core, text_ops = serving_op_lists()
    used = saved_model_op_types(summary["export_path"])
    assert "WordpieceTokenizeWithOffsets" in used  # the tokenizer really is in the graph
    assert used - core - text_ops == set()


def test_saved_model_cli_shows_and_runs_the_signature(trained_run):
    _, summary = trained_run
    cli = Path(sys.executable).with_name("saved_model_cli")
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "tensorflow.python.tools.saved_model_cli"]
    shown = subprocess.run(
        command + ["show", "--dir", summary["export_path"], "--all"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "serving_default" in shown.stdout and "translation" in shown.stdout


def test_new_exports_get_increasing_versions(trained_run, tmp_path):
    train_config, _ = trained_run
    _, _, _, translator = runs.load_run(train_config.run_dir)
    first = export_translator(translator, tmp_path, "m")
    second = export_translator(translator, tmp_path, "m")
    assert (first.name, second.name) == ("1", "2")
    assert next_version(tmp_path / "m") == 3
    assert latest_version_dir(tmp_path / "m") == second
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["1", "2"]


def test_latest_version_dir_rejects_a_folder_without_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="No SavedModel"):
        latest_version_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="No SavedModel"):
        latest_version_dir(tmp_path / "missing")
