"""The load study at a tiny size: the shared run's export, served by the stand-in in its own process."""

import json
from pathlib import Path

import pytest
from conftest import run_main

from benchmarks.serving.load import __main__ as load

pytestmark = pytest.mark.slow


def test_the_plan_mixes_sentences_of_every_form_with_bad_requests_in_turn():
    plan = load.request_plan(60, 5, seed=0)
    assert [kind for kind, _ in plan].count("bad") == 12
    assert [value for kind, value in plan if kind == "bad"][:3] == list(load.BAD_KINDS)
    texts = [value for kind, value in plan if kind == "good"]
    assert len(set(texts)) > 30 and len({len(text.split()) for text in texts}) >= 4
    assert load.request_plan(60, 5, seed=0) == plan  # the same for every model of a run
    assert all(kind == "good" for kind, _ in load.request_plan(60, 0, seed=0))


def test_a_small_load_run_answers_every_good_request_and_gives_every_bad_one_a_defined_error(
    trained_run, tmp_path, capsys
):
    _, summary = trained_run
    model = str(Path(summary["export_path"]).parent)  # the folder of versions, as a model server reads it
    argv = ["--models", model, "--requests", "40", "--clients", "3", "--bad-every", "4"]
    argv += ["--memory-every", "0.05", "--out", str(tmp_path)]
    status, printed = run_main(load.main, argv, capsys)
    assert status == 0, printed[-3000:]
    written = json.loads((tmp_path / "load.json").read_text())
    assert written["command"] == "python -m benchmarks.serving.load " + " ".join(argv)
    assert "stand-in" in written["server"] and written["machine"]["cpu"]["flags"]
    run = written["models"][model]
    assert (run["requests"], run["good_answered"], run["bad_sent"], run["bad_with_defined_error"]) == (40, 30, 10, 10)
    assert run["failed"] == 0 and run["failures"] == []
    assert 0 < run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"] and run["requests_per_s"] > 0
    memory = run["memory_mib"]
    assert memory["first"] > 0 and memory["peak"] >= memory["last"] > 0 and len(memory["samples"]) >= 3
    assert isinstance(memory["slope_per_1000_requests"], float)
    assert list(written["models"]) == [model] and written["ratios"] == {}  # one model: no ratio
    assert "bad with a defined error 10 of 10, failed 0" in printed


def test_a_missing_or_repeated_model_folder_is_named_before_anything_starts(tmp_path, capsys):
    with pytest.raises(SystemExit):
        load.parse_args(["--models", str(tmp_path / "nothing")])
    error = capsys.readouterr().err
    assert f"no folder {tmp_path / 'nothing'}" in error and "python train.py" in error
    with pytest.raises(SystemExit):
        load.parse_args(["--models", str(tmp_path), str(tmp_path)])
    assert "--models: a folder given twice" in capsys.readouterr().err
