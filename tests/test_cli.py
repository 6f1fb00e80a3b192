"""The command line: every flag documented, user errors as one line, runs that resume."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import keras
import pytest
from conftest import TINY_MODEL, tiny_train_config

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.export import saved_model_op_types

REPO = Path(__file__).resolve().parents[1]


def _flag(name):
    return "--" + name.replace("_", "-")


def test_train_help_documents_every_config_field(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for config_class in (TrainConfig, ModelConfig):
        for field in dataclasses.fields(config_class):
            if field.metadata["cli"]:
                assert _flag(field.name) in text
                assert field.metadata["help"].split()[0] in text
    assert "--resume" in text and "--config" in text


def test_train_py_is_the_train_command():
    result = subprocess.run(
        [sys.executable, "train.py", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0
    assert "--d-model" in result.stdout and "--resume" in result.stdout


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["train", "--epochs", "many"], "invalid int value: 'many'"),
        (["train", "--preset", "huge"], "invalid choice: 'huge'"),
        (["train", "--learned-positions", "maybe"], "expected true or false"),
    ],
)
def test_bad_flags_exit_2_with_usage_and_an_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--d-model", "30", "--num-heads", "4"],
            "`d_model` must be divisible by `num_heads`. Received: d_model=30, num_heads=4",
        ),
        (["--epochs", "0"], "`epochs` must be a positive int. Received: epochs=0"),
        (["--dropout-rate", "1.5"], "`dropout_rate` must be in [0, 1)"),
        (["--config", "missing.json"], "--config: no such file: missing.json"),
    ],
)
def test_bad_values_print_one_error_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--run-dir", str(tmp_path / "run"), *argv]) == 2
    error = capsys.readouterr().err
    assert error.strip() == f"error: {message}" or (error.startswith("error: ") and message in error)
    assert error.count("\n") == 1
    assert not (tmp_path / "run").exists() or not (tmp_path / "run" / "summary.json").exists()


def test_config_file_with_unknown_keys_is_rejected(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"epochs": 3, "colour": "blue"}))
    assert main(["train", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 2
    assert "unknown keys ['colour']" in capsys.readouterr().err


def test_config_file_that_is_not_json_is_rejected(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_bytes(b"\xff\xfe not json")
    assert main(["train", "--config", str(config), "--run-dir", str(tmp_path / "run")]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_resume_without_a_run_is_an_error(tmp_path, capsys):
    assert main(["train", "--resume", "--run-dir", str(tmp_path / "nothing")]) == 2
    assert "Nothing to resume" in capsys.readouterr().err


class _InterruptAfterEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt


@pytest.mark.slow
def test_interrupted_training_resumes_from_its_last_epoch(tmp_path, capsys):
    train_config = tiny_train_config(tmp_path, epochs=3)
    with pytest.raises(KeyboardInterrupt):
        runs.train(
            train_config, dict(TINY_MODEL), log=lambda line: None, verbose=0, extra_callbacks=[_InterruptAfterEpoch(0)]
        )
    assert not (tmp_path / "run" / "summary.json").exists()

    # The run is kept: starting it again without --resume refuses to overwrite it ...
    argv = ["train", "--run-dir", train_config.run_dir, "--export-dir", train_config.export_dir]
    assert main(argv) == 2
    assert "already holds a run; pass --resume" in capsys.readouterr().err
    # ... changing the experiment while resuming is refused ...
    assert main([*argv, "--resume", "--d-model", "64"]) == 2
    assert "Cannot change d_model" in capsys.readouterr().err
    # ... and --resume finishes the remaining epochs with the saved configs.
    assert main([*argv, "--resume"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["epochs_this_session"] == 2
    assert summary["train_config"] == train_config.to_dict()
    model = keras.models.load_model(summary["model_path"])
    assert int(model.optimizer.iterations.numpy()) == 3 * train_config.steps_per_epoch


@pytest.mark.slow
def test_evaluate_export_and_translate_commands(trained_run, capsys, tmp_path):
    train_config, summary = trained_run
    assert main(["evaluate", "--run-dir", train_config.run_dir]) == 0
    assert "exact match" in capsys.readouterr().out

    assert main(["export", "--run-dir", train_config.run_dir, "--export-dir", str(tmp_path)]) == 0
    assert (tmp_path / "dates" / "1" / "saved_model.pb").is_file()
    capsys.readouterr()

    assert main(["translate", "--model", str(tmp_path / "dates"), "march 21, 1987", "21.03.1987"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2


@pytest.mark.slow
def test_export_decoding_flags_and_ids_only(trained_run, capsys, tmp_path):
    train_config, _ = trained_run
    run = ["--run-dir", train_config.run_dir, "--export-dir", str(tmp_path)]
    assert main(["export", *run, "--ids-only", "--beam-size", "1"]) == 0
    assert main(["export", *run, "--ids-only"]) == 0
    greedy, beam = tmp_path / "dates_ids" / "1", tmp_path / "dates_ids" / "2"
    # Greedy decoding takes an argmax, beam search a top-k: the flag reached the graph.
    assert "TopKV2" not in saved_model_op_types(greedy) and "TopKV2" in saved_model_op_types(beam)
    assert '"dates_ids"' in (tmp_path / "models.config").read_text()

    assert main(["evaluate", "--run-dir", train_config.run_dir, "--beam-size", "1"]) == 0
    assert "exact match" in capsys.readouterr().out
    assert main(["evaluate", "--run-dir", train_config.run_dir, "--beam-size", "0"]) == 2
    assert "beam_size" in capsys.readouterr().err


def test_commands_on_missing_paths_print_one_error_line(tmp_path, capsys):
    assert main(["evaluate", "--run-dir", str(tmp_path)]) == 2
    assert "is not a finished run" in capsys.readouterr().err
    assert main(["translate", "--model", str(tmp_path / "nope"), "hello"]) == 2
    assert "No SavedModel" in capsys.readouterr().err


def test_summary_reports_metrics_throughput_and_paths(trained_run):
    train_config, summary = trained_run
    on_disk = json.loads((Path(train_config.run_dir) / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    for key in (
        "parameters",
        "train_pairs",
        "dropped_pairs",
        "target_tokens_per_second",
        "export_path",
        "total_seconds",
    ):
        assert key in summary
    assert 0.0 <= summary["test"]["exact_match"] <= 1.0
    assert summary["test"]["sentences"] == 1000
    assert summary["test"]["bleu_signature"].startswith("nrefs:1|")
