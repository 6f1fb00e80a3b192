"""The load study at a tiny size: the shared run's export, served by the stand-in in its own process."""

import json
from pathlib import Path

import pytest
import tensorflow as tf
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


def test_batching_runs_concurrent_requests_together_with_the_answers_they_get_alone(loaded_export, trained_run):
    """The stand-in's batching: concurrent requests share a call; one bad request in a batch fails alone."""
    from concurrent import futures

    from benchmarks.harness.stand_in_server import Batching, StandInServer
    from keras_transformer.export.clients import RestClient, ServingError

    _, summary = trained_run
    texts = [f"{day} march 19{80 + day}" for day in range(1, 13)]
    alone = [loaded_export.signatures["serving_default"](text=[text])["translation"].numpy()[0] for text in texts]
    batching = Batching(max_batch_size=4, batch_timeout_micros=50_000, allowed_batch_sizes=(1, 2, 4))
    with StandInServer({"dates": Path(summary["export_path"]).parent}, batching) as server:
        text_client = RestClient(server.rest_url, model_name="dates")
        ids_client = RestClient(server.rest_url, model_name="dates", signature_name="translate_ids")

        def translate(text):
            return text_client.predict({"text": [text]})["translation"][0]

        def ids(source_ids):
            try:
                return ids_client.predict({"source_ids": source_ids})["output_ids"].tolist()
            except ServingError as error:
                return error.code

        with futures.ThreadPoolExecutor(12) as pool:
            served = list(pool.map(translate, texts))
        assert served == alone
        assert max(batching.batch_sizes) > 1 and sum(batching.batch_sizes) == len(texts)

        good, bad = [[5, 6, 7]], [[5, 10**6]]
        with futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(ids, [good, bad]))
    expected = loaded_export.signatures["translate_ids"](source_ids=tf.constant(good))["output_ids"].numpy().tolist()
    assert answers == [expected, 400] and batching.batch_sizes[-1] == 2  # one batch, failed, then run alone
