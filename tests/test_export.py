"""The exported SavedModel: TF Serving layout, atomic versions, a graph that runs without the project.

The graph loads and translates without the project's code, with an op set TF Serving 2.12+ can run.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY_MODEL, serving_op_lists, tiny_train_config
from google.protobuf import text_format
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.config import model_server_config_pb2

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.export import (
    WARMUP_FILE,
    export_translator,
    latest_version_dir,
    next_version,
    saved_model_op_types,
)

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
    assert (export_path / WARMUP_FILE).is_file()
    config = json.loads((export_path / "assets" / "model_config.json").read_text())
    assert config["max_target_len"] == 14
    # no staging folder left behind
    assert [p.name for p in export_path.parent.iterdir()] == ["1"]


def test_models_config_lists_every_exported_model_for_the_model_server(loaded_run, tmp_path):
    train_config, _, _, translator = loaded_run
    runs.export_run(translator, train_config, tmp_path)
    runs.export_run(translator, train_config, tmp_path, ids_only=True)
    (tmp_path / "not_a_model").mkdir()
    config = text_format.Parse((tmp_path / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())
    served = {c.name: (c.base_path, c.model_platform) for c in config.model_config_list.config}
    assert served == {"dates": ("/models/dates", "tensorflow"), "dates_ids": ("/models/dates_ids", "tensorflow")}


def test_warmup_requests_are_prediction_logs_the_model_answers(trained_run, loaded_export):
    """TF Serving replays assets.extra/tf_serving_warmup_requests before serving.

    Every record must parse as a PredictionLog whose request the export's signature answers.
    """
    _, summary = trained_run
    signatures = []
    for record in tf.data.TFRecordDataset(str(Path(summary["export_path"]) / WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        assert request.model_spec.name == "dates"
        inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
        outputs = loaded_export.signatures[request.model_spec.signature_name](**inputs)
        assert outputs["score"].shape[0] == inputs[next(iter(inputs))].shape[0] > 0
        signatures.append(request.model_spec.signature_name)
    assert sorted(signatures) == ["serving_default", "translate_ids"]


def _then_saved_model_cli(*commands):
    """Script lines that end the script by running TensorFlow's `saved_model_cli` once per command.

    Each command is a tuple of the tool's arguments (`("show", "--dir", ...)`); its output follows
    a line `### saved_model_cli COMMAND` (`_saved_model_cli_outputs` splits them apart).
    """
    return f"""
        from tensorflow.python.tools import saved_model_cli
        for command in {[list(command) for command in commands]!r}:
            print("### saved_model_cli", command[0], flush=True)
            sys.argv = ["saved_model_cli", *command]
            try:
                saved_model_cli.main()
            except SystemExit as stopped:  # the tool ends by exiting
                assert not stopped.code, stopped.code
        """


def _saved_model_cli_outputs(stdout):
    """`(what the script printed before, {command: its output})` of a `_then_saved_model_cli` process."""
    before, *outputs = stdout.split("### saved_model_cli ")
    return before, dict(output.split("\n", 1) for output in outputs)


def test_text_export_translates_in_a_process_without_the_project_and_saved_model_cli_shows_and_runs_it(
    trained_run,
):
    _, summary = trained_run
    path = summary["export_path"]
    run = ("run", "--dir", path, "--tag_set", "serve", "--signature_def", "serving_default")
    result = _run_python(
        f"""
        import sys
        import tensorflow as tf
        import tensorflow_text  # registers the ops the text export needs
        loaded = tf.saved_model.load({path!r})
        translate = loaded.signatures["serving_default"]
        out = translate(text=tf.constant(["march 21, 1987", "", "the first of may two thousand and four"]))
        translation = out["translation"]
        assert translation.dtype == tf.string and translation.shape == (3,), translation
        assert out["score"].dtype == tf.float32 and out["truncated"].dtype == tf.bool, out
        ids = loaded.signatures["translate_ids"](source_ids=tf.constant([[5, 6, 7, 0]], tf.int32))
        assert ids["output_ids"].dtype == tf.int32 and ids["output_ids"].shape == (1, 14), ids
        empty = translate(text=tf.constant([], dtype=tf.string))["translation"]
        assert empty.shape == (0,), empty
        assert not any(name.startswith("keras_transformer") for name in sys.modules), "project imported"
        print("OK", [t.decode() for t in translation.numpy()], flush=True)
        """
        + _then_saved_model_cli(("show", "--dir", path, "--all"), (*run, "--input_exprs", "text=['21.03.1987', '']"))
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ours, cli = _saved_model_cli_outputs(result.stdout)
    assert ours.startswith("OK")
    for name in ("serving_default", "translate_ids", "translation", "output_ids", "score", "truncated"):
        assert name in cli["show"]
    assert "translation" in cli["run"] and "truncated" in cli["run"]


def test_exported_signature_equals_the_in_process_translator(loaded_run, loaded_export):
    _, _, _, translator = loaded_run
    texts = ["21.03.1987", "Sat 21 Mar 1987", "the twenty-first of march nineteen eighty-seven"]
    served = loaded_export.signatures["serving_default"](text=tf.constant(texts))["translation"].numpy()
    assert list(served) == list(translator.translate(tf.constant(texts))["translation"].numpy())


def test_export_op_set_runs_on_tf_serving_2_12(trained_run):
    _, summary = trained_run
    core, text_ops = serving_op_lists()
    used = saved_model_op_types(summary["export_path"])
    assert "WordpieceTokenizeWithOffsets" in used  # the tokenizer really is in the graph
    assert "TopKV2" in used  # and so is beam search
    assert used - core - text_ops == set()


def test_one_shared_table_refuses_two_vocabularies_and_says_so_before_making_the_run(tmp_path):
    config = tiny_train_config(tmp_path, joint_vocab=False)
    with pytest.raises(runs.RunError, match="drop --joint-vocab false"):
        runs.train(config, {**TINY_MODEL, "embedding_sharing": "all"}, log=lambda line: None, verbose=0)
    assert not Path(config.run_dir).exists()


def test_a_run_with_one_shared_table_exports_a_servable_translator(tmp_path):
    """Unset, --joint-vocab follows the one table: the run learns one vocabulary for both sides."""
    config = tiny_train_config(tmp_path, source_vocab_size=150, epochs=1)
    summary = runs.train(config, {**TINY_MODEL, "embedding_sharing": "all"}, log=lambda line: None, verbose=0)
    model_config = ModelConfig.load(Path(config.run_dir) / runs.MODEL_CONFIG_FILE)
    assert model_config.embedding_sharing == "all"
    assert TrainConfig.load(Path(config.run_dir) / runs.TRAIN_CONFIG_FILE).joint_vocab is True
    assert model_config.source_vocab_size == model_config.target_vocab_size <= 150
    _, _, model, translator = runs.load_run(config.run_dir)
    tables = [weight for weight in model.weights if weight.path.endswith("embeddings")]
    assert [tuple(table.shape) for table in tables] == [(model_config.target_vocab_size, model_config.d_model)]
    texts = ["21.03.1987", "Sat 21 Mar 1987", ""]
    served = tf.saved_model.load(summary["export_path"]).signatures["serving_default"](text=tf.constant(texts))
    assert list(served["translation"].numpy()) == list(translator.translate(tf.constant(texts))["translation"].numpy())
    core, text_ops = serving_op_lists()
    assert saved_model_op_types(summary["export_path"]) - core - text_ops == set()


@pytest.fixture(scope="module")
def ids_export(loaded_run, tmp_path_factory):
    train_config, _, _, translator = loaded_run
    return runs.export_run(translator, train_config, tmp_path_factory.mktemp("ids"), ids_only=True)


def test_ids_only_export_has_core_ops_only(ids_export):
    core, _ = serving_op_lists()
    assert ids_export.parent.name == "dates_ids"
    assert saved_model_op_types(ids_export) - core == set()
    assets = {p.name for p in (ids_export / "assets").iterdir()}
    assert {"source_vocab.txt", "target_vocab.txt", "model_config.json"} <= assets


def test_ids_only_export_runs_in_a_process_that_never_imports_tensorflow_text_and_in_saved_model_cli(
    loaded_export, ids_export
):
    source_ids = [[7, 8, 9, 10, 0], [11, 12, 0, 0, 0]]
    run = ("run", "--dir", str(ids_export), "--tag_set", "serve", "--signature_def", "serving_default")
    result = _run_python(
        f"""
        import sys
        import tensorflow as tf
        loaded = tf.saved_model.load({str(ids_export)!r})
        out = loaded.signatures["serving_default"](source_ids=tf.constant({source_ids}, tf.int32))
        assert "tensorflow_text" not in sys.modules and not any(m.startswith("keras_transformer") for m in sys.modules)
        print("OK", out["output_ids"].numpy().tolist(), out["score"].numpy().tolist(), flush=True)
        """
        + _then_saved_model_cli((*run, "--input_exprs", "source_ids=[[7, 8, 9, 0]]"))
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ours, cli = _saved_model_cli_outputs(result.stdout)
    ids_out, scores = json.loads("[" + ours.split("OK ", 1)[1].replace("] [", "], [") + "]")
    # The same model and decoding as the text export's translate_ids.
    expected = loaded_export.signatures["translate_ids"](source_ids=tf.constant(source_ids, tf.int32))
    assert ids_out == expected["output_ids"].numpy().tolist()
    np.testing.assert_allclose(scores, expected["score"].numpy(), atol=1e-5)
    assert "output_ids" in cli["run"] and "score" in cli["run"]  # saved_model_cli ran it too


def test_translate_command_refuses_the_ids_only_export_with_one_error_line(ids_export, capsys):
    assert main(["translate", "--model", str(ids_export), "21.03.1987"]) == 2
    assert capsys.readouterr().err == (
        f"error: {ids_export} takes no text (an ids-only export?); translate needs the text export\n"
    )


def test_new_exports_get_increasing_versions(loaded_run, tmp_path):
    _, _, _, translator = loaded_run
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
