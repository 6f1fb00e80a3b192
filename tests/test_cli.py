"""The command line: every flag documented, user errors as one line, runs that resume."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from conftest import tiny_train_config

from keras_transformer import cli, runs
from keras_transformer.cli import main
from keras_transformer.config import (
    DECODING_FIELDS,
    PRESETS,
    VARIANT_SWITCHES,
    LanguageModelConfig,
    ModelConfig,
    TrainConfig,
)
from keras_transformer.config.train import task_default
from keras_transformer.export import saved_model_op_types, write_models_config

REPO = Path(__file__).resolve().parents[1]


def _flag(name):
    return "--" + name.replace("_", "-")


def _help(capsys, command):
    """`{option string: its entry}` of `keras-transformer COMMAND --help`.

    Each entry (invocation and help text) is one line, with argparse's wrapping undone.
    """
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    entries, current = {}, None
    for line in capsys.readouterr().out.splitlines():
        if re.match(r"  \S", line):  # an argument's first line: its invocation, maybe its help
            invocation = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            current = [line.strip()]
            for name in re.findall(r"(?:^|, )(-{0,2}[\w-]+)", invocation):
                entries[name] = current
        elif current is not None and line.startswith(" " * 4):  # wrapped help text
            current.append(line.strip())
        else:  # usage, description, group titles, blank lines
            current = None
    return {name: " ".join(lines) for name, lines in entries.items()}


def _cli_fields(config_class):
    return [field for field in dataclasses.fields(config_class) if field.metadata["cli"]]


def test_train_help_documents_every_config_field_with_its_help_and_default(capsys):
    entries = _help(capsys, "train")
    expected_flags = {"-h", "--help", "--config", "--resume", "--overwrite"}
    translation_model = {field.name for field in _cli_fields(ModelConfig)}
    for config_class in (TrainConfig, ModelConfig, LanguageModelConfig):
        for field in _cli_fields(config_class):
            if config_class is LanguageModelConfig and field.name in translation_model:
                continue  # one flag for both kinds of model
            flag = _flag(field.name)
            aliases = {flag, "--" + field.name}
            expected_flags |= aliases
            assert all(entries.get(alias) == entries[flag] for alias in aliases), f"{flag} lacks an alias"
            entry = entries[flag]
            assert field.metadata["help"] in entry, f"{flag}: help text missing"
            by_preset = [f"{name} {values[field.name]!r}" for name, values in PRESETS.items() if field.name in values]
            if config_class is not TrainConfig and by_preset:  # what `python train.py` uses is the preset's
                assert f"(default: set by --preset: {', '.join(by_preset)})" in entry, entry
            elif field.name in VARIANT_SWITCHES:  # None: the value of --variant's source
                assert "(default: the --variant's)" in entry, entry
            elif field.name == "run_dir":  # None: the task's own folder
                assert "(default: runs/builtin for --task translate, runs/builtin-lm for --task lm, " in entry, entry
            elif field.name == "model_name":  # None: the task's own name
                assert "(default: transformer for --task translate, transformer-lm for --task lm, " in entry, entry
            elif not isinstance(field.default, tuple):
                assert f"(default: {field.default!r})" in entry, entry
    assert set(entries) == expected_flags
    assert "continue the interrupted run" in entries["--resume"]
    assert "replace the run in --run-dir by a new one" in entries["--overwrite"]


@pytest.mark.parametrize(
    "command, flags",
    [
        ("evaluate", {"--run-dir": "run directory written by `train`"}),
        (
            "export",
            {
                "--run-dir": "run directory written by `train`",
                "--export-dir": "export root (default: the run's export_dir)",
                "--ids-only": "without tensorflow-text ops",
                "--format": "ctranslate2 (the CTranslate2 engine's; translation runs)",
            },
        ),
        (
            "translate",
            {
                "--model": "SavedModel folder",
                "--input": "read the sentences from FILE, one per line",
                "text": "sentences to translate",
            },
        ),
        (
            "generate",
            {
                "--model": "SavedModel folder of a --task lm run",
                "--input": "read the prompts from FILE, one per line",
                "prompt": "prompts to continue",
            },
        ),
    ],
)
def test_every_command_help_lists_its_flags(command, flags, capsys):
    entries = _help(capsys, command)
    if command not in ("translate", "generate"):  # decoding settings default to the run's, not to TrainConfig's
        for field in (field for field in _cli_fields(TrainConfig) if field.name in DECODING_FIELDS):
            flags[_flag(field.name)] = flags["--" + field.name] = f"{field.metadata['help']} (default: the run's)"
    assert set(entries) == {"-h", "--help", *flags}
    for flag, help_text in flags.items():
        assert help_text in entries[flag], entries[flag]


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
        (["--epochs", "0"], "`epochs` must be an int >= 1. Received: epochs=0"),
        (["--dropout-rate", "1.5"], "`dropout_rate` must be a number in [0, 1). Received: dropout_rate=1.5"),
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


@pytest.fixture
def fake_train(monkeypatch):
    """Replace training by `runs.prepare_run` alone: the run directory and the final configs.

    Returns:
        The list of `(train_config, model_config)` pairs `prepare_run` returned, one per call.
    """
    calls = []

    def prepare_only(train_config, model_overrides=None, resume=False, overwrite=False, **kwargs):
        settled = runs.prepare_run(train_config, model_overrides, resume, log=lambda line: None, overwrite=overwrite)
        calls.append(settled)
        test = {"exact_match": 0.5, "bleu": 12.3}
        return {"test": test, "total_seconds": 1.0, "export_path": "nowhere"}

    monkeypatch.setattr(runs, "train", prepare_only)
    return calls


def test_model_flags_override_the_chosen_preset(fake_train, tmp_path):
    # `python train.py --d-model 100`: the small preset's 4 heads divide 100 (the base model's 8 would not).
    assert main(["train", "--d-model", "100", "--run-dir", str(tmp_path / "a")]) == 0
    _, model_config = fake_train[-1]
    expected = {**PRESETS["small"], "d_model": 100}
    assert {name: getattr(model_config, name) for name in expected} == expected
    # The --config file's model settings sit between the preset and the flags.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"preset": "tiny", "d_model": 30, "num_heads": 5}))
    assert main(["train", "--config", str(config), "--d-model", "100", "--run-dir", str(tmp_path / "b")]) == 0
    train_config, model_config = fake_train[-1]
    assert train_config.preset == "tiny"
    assert (model_config.d_model, model_config.num_heads, model_config.d_ff) == (100, 5, PRESETS["tiny"]["d_ff"])


@pytest.mark.parametrize(
    "argv, config_file, given",
    [
        (["--d-model", "100", "--num-heads", "8"], None, "the 'small' preset with d_model=100, num_heads=8"),
        (["--preset", "base", "--d-model", "100"], None, "the 'base' preset with d_model=100"),
        (["--d-model", "100"], {"num_heads": 8}, "the 'small' preset with d_model=100, num_heads=8"),
    ],
)
def test_invalid_final_model_config_is_one_error_line_before_training(
    argv, config_file, given, fake_train, tmp_path, capsys
):
    if config_file is not None:
        (tmp_path / "config.json").write_text(json.dumps(config_file))
        argv = [*argv, "--config", str(tmp_path / "config.json")]
    assert main(["train", "--run-dir", str(tmp_path / "run"), *argv]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"error: `d_model` must be divisible by `num_heads`. Received: d_model=100, num_heads=8 (model: {given})\n"
    )
    assert fake_train == [] and not (tmp_path / "run").exists()


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


def test_each_task_trains_in_its_own_default_folder(fake_train, tmp_path, monkeypatch):
    """`python train.py` then `python train.py --task lm ...`: no run in the way of the other."""
    monkeypatch.chdir(tmp_path)
    for task in ("translate", "lm", "mlm"):
        assert main(["train", "--task", task, "--preset", "tiny", "--epochs", "1"]) == 0
    assert [train_config.run_dir for train_config, _ in fake_train] == [
        "runs/builtin",
        "runs/builtin-lm",
        "runs/builtin-mlm",
    ]
    for name in ("builtin", "builtin-lm", "builtin-mlm"):
        assert (tmp_path / "runs" / name / "train_config.json").is_file()
    assert TrainConfig().run_dir == "runs/builtin" and TrainConfig(task="lm").run_dir == "runs/builtin-lm"
    assert TrainConfig(task="lm", run_dir="elsewhere").run_dir == "elsewhere"


def test_each_task_exports_under_its_own_default_name(fake_train, tmp_path, monkeypatch):
    """`python train.py` then `python train.py --task lm`: the language model is no version of the translator."""
    monkeypatch.chdir(tmp_path)
    for task in ("translate", "lm", "mlm"):
        assert main(["train", "--task", task, "--preset", "tiny", "--epochs", "1"]) == 0
    assert [train_config.model_name for train_config, _ in fake_train] == [
        "transformer",
        "transformer-lm",
        "transformer-mlm",
    ]
    # The same rule as the run directory's, for any task.
    assert [task_default(name, "other") for name in ("run_dir", "model_name")] == [
        "runs/builtin-other",
        "transformer-other",
    ]
    assert TrainConfig().model_name == "transformer" and TrainConfig(task="mlm").model_name == "transformer-mlm"
    # models.config lists each task's model.
    for train_config, _ in fake_train[:2]:
        version = tmp_path / train_config.export_dir / train_config.model_name / "1"
        version.mkdir(parents=True)
        (version / "saved_model.pb").write_bytes(b"")
    listed = write_models_config(tmp_path / "saved_models").read_text()
    assert '"transformer"' in listed and '"transformer-lm"' in listed


def test_an_explicit_model_name_wins_and_a_resumed_run_keeps_its_own(fake_train, tmp_path):
    run_dir = str(tmp_path / "run")
    assert main(["train", "--task", "lm", "--preset", "tiny", "--run-dir", run_dir, "--model-name", "mine"]) == 0
    assert TrainConfig(task="lm", model_name="mine").model_name == "mine"
    # A run saved with another name (such as the one all tasks shared before) is resumed under it.
    saved = TrainConfig.load(Path(run_dir) / "train_config.json")
    saved.model_name = "transformer"
    saved.save(Path(run_dir) / "train_config.json")
    assert main(["train", "--task", "lm", "--preset", "tiny", "--run-dir", run_dir, "--resume"]) == 0
    assert (
        main(["train", "--task", "lm", "--preset", "tiny", "--run-dir", run_dir, "--resume", "--model-name", "x"]) == 0
    )
    assert [train_config.model_name for train_config, _ in fake_train] == ["mine", "transformer", "x"]


def _fake_export(model_dir, model_config):
    """`model_dir/1`, an export as far as the task check reads it: saved_model.pb (empty) and the model's config."""
    version_dir = Path(model_dir) / "1"
    (version_dir / "assets").mkdir(parents=True)
    (version_dir / "saved_model.pb").write_bytes(b"")
    model_config.save(version_dir / "assets" / "model_config.json")
    return version_dir


@pytest.mark.parametrize(
    "command, kind, message",
    [
        ("translate", "decoder", "holds a language model (task lm{}); translate needs a translation export"),
        ("translate", "encoder", "holds a masked language model (task mlm{}); translate needs a translation export"),
        (
            "generate",
            None,
            "holds a translation model (task translate{}); generate needs the text export of a --task lm run",
        ),
        (
            "generate",
            "encoder",
            "holds a masked language model (task mlm{}); generate needs the text export of a --task lm run",
        ),
    ],
)
def test_an_export_of_another_task_is_refused_with_its_task(command, kind, message, tmp_path, capsys):
    model_config = ModelConfig() if kind is None else LanguageModelConfig(kind=kind)
    version_dir = _fake_export(tmp_path / "saved_models" / "transformer", model_config)
    for model, version in ((version_dir.parent, ", version 1"), (version_dir, "")):
        assert main([command, "--model", str(model), "hello"]) == 2  # refused before the export is loaded
        assert capsys.readouterr().err == f"error: {model} {message.format(version)}\n"


def test_a_run_in_the_way_names_resume_run_dir_and_overwrite(fake_train, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--preset", "tiny"]) == 0
    assert main(["train", "--preset", "tiny"]) == 2  # `python train.py` twice
    assert capsys.readouterr().err == (
        "error: runs/builtin already holds an interrupted run; pass --resume to continue it, --run-dir DIR to "
        "train in another folder, or --overwrite to replace it\n"
    )
    (tmp_path / "runs" / "builtin" / "summary.json").write_text("{}")
    assert main(["train", "--preset", "tiny"]) == 2
    assert capsys.readouterr().err == (
        "error: runs/builtin already holds a finished run; pass --resume to continue it (with more --epochs), "
        "--run-dir DIR to train in another folder, or --overwrite to replace it\n"
    )
    assert len(fake_train) == 1


def test_resume_and_overwrite_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", "--overwrite"])
    assert exit_info.value.code == 2
    assert "argument --overwrite: not allowed with argument --resume" in capsys.readouterr().err
    with pytest.raises(runs.RunError, match="pass one of them"):
        runs.prepare_run(TrainConfig(), resume=True, overwrite=True)


def _a_run_with_every_file(run_dir):
    """The files of a finished run in `run_dir` (after `fake_train` wrote its configs), and a staging file."""
    for name in ("source_vocab.txt", "target_vocab.txt", "summary.json", "model.keras", ".staging-summary.json"):
        (run_dir / name).write_text("old")
    for name in ("checkpoints/step-6", "logs/train"):
        (run_dir / name).mkdir(parents=True)
        (run_dir / name / "file").write_text("old")


def test_overwrite_replaces_the_run_and_only_its_files(fake_train, tmp_path, capsys):
    run_dir, exports, outside = tmp_path / "run", tmp_path / "exports", tmp_path / "kept"
    flags = ["train", "--preset", "tiny", "--run-dir", str(run_dir), "--export-dir", str(exports)]
    assert main([*flags, "--epochs", "3"]) == 0
    _a_run_with_every_file(run_dir)
    (exports / "transformer" / "1").mkdir(parents=True)
    outside.mkdir()
    (run_dir / "checkpoints" / "elsewhere").symlink_to(outside)  # a link is removed, not followed
    # A setting the new run cannot take leaves the old run whole.
    assert main([*flags, "--d-model", "30", "--num-heads", "4", "--overwrite"]) == 2
    assert "must be divisible" in capsys.readouterr().err
    assert (run_dir / "summary.json").read_text() == "old"

    assert main([*flags, "--epochs", "5", "--overwrite"]) == 0
    assert sorted(path.name for path in run_dir.iterdir()) == ["model_config.json", "train_config.json"]
    assert TrainConfig.load(run_dir / "train_config.json").epochs == 5
    assert (exports / "transformer" / "1").is_dir() and outside.is_dir()  # exports and linked folders stay
    # Nothing to replace is no error: --overwrite starts a new run in an empty or missing folder.
    assert main([*flags[:-4], "--run-dir", str(tmp_path / "new"), "--overwrite"]) == 0


@pytest.mark.parametrize("run", [False, True], ids=["user folder", "run with a user file"])
def test_overwrite_refuses_a_folder_with_other_files(run, fake_train, tmp_path, capsys):
    folder = tmp_path / "mine"
    flags = ["train", "--preset", "tiny", "--run-dir", str(folder)]
    if run:
        assert main(flags) == 0
        _a_run_with_every_file(folder)
    else:
        folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    before = sorted(path.relative_to(folder) for path in folder.rglob("*"))
    assert main([*flags, "--overwrite"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --overwrite ") and "notes.txt" in error and "nothing was deleted" in error
    assert ("holds others too" if run else "is not a run directory") in error
    assert sorted(path.relative_to(folder) for path in folder.rglob("*")) == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train"], "stopped before the run directory was made; nothing to resume, run the command again"),
        (
            ["evaluate", "--run-dir", "run"],
            "nothing was written (evaluate only reads the run); run the command again for the scores",
        ),
        (
            ["export", "--run-dir", "run"],
            "the export did not finish; no partial version is left (a version folder appears only once complete)",
        ),
        (
            ["translate", "--model", "model", "hello"],
            "nothing was written (translate only reads the model); run the command again",
        ),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else "",
)
def test_ctrl_c_says_what_the_interrupted_command_left(argv, message, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli._COMMANDS, argv[0], interrupted)
    assert main(argv) == 130
    assert capsys.readouterr().err == f"\ninterrupted: {message}\n"


def test_ctrl_c_during_a_run_says_resume(monkeypatch, capsys, tmp_path):
    def interrupted(args):
        args.run_dir_resolved = tmp_path
        (tmp_path / "train_config.json").write_text("{}")  # the run exists
        raise KeyboardInterrupt

    monkeypatch.setitem(cli._COMMANDS, "train", interrupted)
    assert main(["train"]) == 130
    assert capsys.readouterr().err == (
        "\ninterrupted: the run keeps its last checkpoint; continue it with the same command and --resume\n"
    )


@pytest.mark.slow
def test_interrupted_export_leaves_no_version(trained_run, monkeypatch, tmp_path, capsys):
    """What the Ctrl-C message of `export` promises: the half-written version is gone."""
    save = tf.saved_model.save

    def save_then_interrupt(*args, **kwargs):
        save(*args, **kwargs)  # the SavedModel is written to the staging folder ...
        raise KeyboardInterrupt  # ... and Ctrl-C comes before it is renamed into place

    monkeypatch.setattr(tf.saved_model, "save", save_then_interrupt)
    train_config, _ = trained_run
    assert main(["export", "--run-dir", train_config.run_dir, "--export-dir", str(tmp_path)]) == 130
    assert "no partial version is left" in capsys.readouterr().err
    assert [path.name for path in (tmp_path / "dates").iterdir()] == []
    assert not (tmp_path / "models.config").exists()


@pytest.mark.slow
def test_evaluate_export_and_translate_commands(trained_run, capsys, tmp_path):
    train_config, summary = trained_run
    assert main(["evaluate", "--run-dir", train_config.run_dir]) == 0
    # Evaluating the finished run again gives the scores its training printed and summarized.
    test = summary["test"]
    assert (
        f"Test: exact match {test['exact_match']:.2%} of {test['sentences']} sentences, BLEU {test['bleu']} "
        f"({test['bleu_signature']}), chrF {test['chrf']} ({test['chrf_signature']})"
    ) in capsys.readouterr().out

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
    assert main(["translate", "--model", str(tmp_path), "--input", str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err == f"error: --input: no such file: {tmp_path / 'missing.txt'}\n"


def test_translate_takes_sentences_as_arguments_or_from_input_not_both(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("21.03.1987\n")
    assert main(["translate", "--model", str(tmp_path), "--input", str(tmp_path / "in.txt"), "hello"]) == 2
    assert capsys.readouterr().err == "error: give the sentences as arguments or with --input, not both\n"


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
    assert summary["test"]["sentences"] == train_config.test_size == 100
    assert summary["test"]["bleu_signature"].startswith("nrefs:1|")


@pytest.mark.parametrize(
    "overrides, message",
    [({"d_model": 100, "num_heads": 8}, "d_model=100, num_heads=8"), ({"colour": "blue"}, "colour")],
    ids=["indivisible", "unknown-field"],
)
def test_a_bad_model_setting_given_to_the_python_api_is_a_run_error_before_anything_is_written(
    tmp_path, overrides, message
):
    train_config = tiny_train_config(tmp_path)
    with pytest.raises(runs.RunError, match=message):
        runs.prepare_run(train_config, overrides, log=lambda line: None)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, own_process, configured",
    [
        ([], True, True),
        ([], False, False),  # main() called inside a bigger process (as here): its threads are not the CLI's
        (["--jit-compile", "true"], True, False),  # XLA's step has no towers
        (["--task", "lm"], True, False),  # nor has the language models'
    ],
)
def test_train_sets_cpu_threads_for_towers_only_as_its_own_process(
    fake_train, monkeypatch, tmp_path, argv, own_process, configured
):
    from keras_transformer.training import threads

    calls = []
    monkeypatch.setattr(threads, "configure_cpu_threads", lambda: calls.append(1) or 2)
    assert main(["train", "--run-dir", str(tmp_path / "run"), *argv], own_process=own_process) == 0
    assert fake_train and calls == ([1] if configured else [])
