"""Tests of the speed studies' own arithmetic and plumbing (`benchmarks.speed`), and of `benchmarks/gpu.sh`.

Not of speed: the studies measure that. `benchmarks.speed.step_breakdown` has its own tests
(test_step_breakdown.py), `benchmarks.speed.fused_attention` its smoke test in test_fused_attention.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import jax_cpu_env, run_main

from benchmarks.harness import machine, matmul_peak
from benchmarks.harness import training_workload as throughput_models
from benchmarks.speed.train_throughput import __main__ as train_throughput
from benchmarks.speed.train_throughput import rounds as throughput_rounds
from keras_transformer.config import preset
from keras_transformer.models import build_transformer

ROOT = Path(__file__).resolve().parents[1]

X86_CPUINFO = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu avx2 avx fma
"""


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_flop_formula_counts_every_matmul_weight_of_the_model(name):
    """The FLOP formula counts 6 FLOPs per matmul weight, plus attention.

    With one-token sentences the attention terms are 4 D per token and block; the rest of the
    formula must be 6 FLOPs (forward 2, backward 4) per matmul weight of the built model: every
    Dense/Conv1D kernel except the embedding tables.
    """
    config = preset(name, source_vocab_size=50, target_vocab_size=40, max_source_len=8, max_target_len=8)
    model = build_transformer(config)
    matmul_weights = sum(
        int(np.prod(w.shape)) for w in model.weights if w.path.endswith("kernel") and len(w.shape) >= 2
    )
    attention = 3 * config.num_blocks * (4 * config.d_model + 8 * config.d_model)  # 4SD enc, 4TD + 4TSD dec
    assert throughput_models.train_step_flops(config, 1, 1, 1) == 6 * matmul_weights + attention
    # Batch-linear, and quadratic in length only through attention.
    assert throughput_models.train_step_flops(config, 3, 1, 1) == 3 * throughput_models.train_step_flops(
        config, 1, 1, 1
    )
    # The logits are counted at the real target positions only: none, none of their weights' FLOPs.
    logits_weights = config.d_model * config.target_vocab_size
    no_targets = throughput_models.train_step_flops(config, 1, 1, 1, target_tokens=0)
    assert no_targets == 6 * (matmul_weights - logits_weights) + attention


def test_shared_part_holds_every_weight_of_our_model_outside_its_blocks():
    """The shared part trains exactly our model's weights outside its blocks.

    The `shared` worker's step minus a model's step is that model's blocks only if the shared
    part trains the same weights as the model outside its blocks: both embeddings and the logits.
    """
    config = preset("tiny", source_vocab_size=50, target_vocab_size=40, max_source_len=8, max_target_len=8)
    outside_blocks = {(w.path, tuple(w.shape)) for w in build_transformer(config).weights if "_block_" not in w.path}
    shared = throughput_models.build_shared_part(config)
    assert {(w.path, tuple(w.shape)) for w in shared.weights} == outside_blocks
    logits_weights = config.d_model * config.target_vocab_size
    assert throughput_models.train_step_flops(config, 1, 1, 1, blocks=False) == 6 * logits_weights


def test_step_split_finds_the_block_time_a_target_ratio_needs():
    results = {name: {"step_ms_median": ms} for name, ms in (("shared", 100.0), ("ours", 190.0), ("keras-hub", 200.0))}
    split = throughput_rounds.step_split(results, target=1.25)
    assert split["ours_blocks_ms"] == 90.0 and split["keras_hub_blocks_ms"] == 100.0
    assert split["shared_fraction_of_keras_hub_step"] == 0.5
    assert split["ours_blocks_ms_needed_for_target"] == 60.0  # 100 + 60 = 200 / 1.25


def test_the_bfloat16_peak_is_measured_only_where_a_bfloat16_policy_runs():
    assert matmul_peak.peak_dtypes(["float32"]) == ("float32",)
    assert matmul_peak.peak_dtypes(["float32", "mixed_bfloat16"]) == ("float32", "bfloat16")
    assert set(matmul_peak.matmul_peaks(32, ("float32",))) == {"float32"}
    described = matmul_peak.describe_peaks({"float32": 4.2e11})
    assert described == "float32 420 GFLOP/s, bfloat16 not measured"


def test_synthetic_batches_look_like_the_pipelines_and_are_the_same_for_every_worker():
    args = train_throughput.parse_args(["--batches", "3", "--batch-size", "5", "--length", "8", "--vocab-size", "30"])
    args = throughput_models.at_length(args, 8)  # as a worker sees it: one length
    first, second = throughput_models.synthetic_batches(args), throughput_models.synthetic_batches(args)
    for ((source, target_in), target_out), ((source2, target_in2), target_out2) in zip(first, second):
        np.testing.assert_array_equal(source, source2)
        np.testing.assert_array_equal(target_out, target_out2)
        assert source.shape == target_in.shape == target_out.shape == (5, 8)
        assert np.all(target_in[:, 0] == 2)  # <s>
        lengths = np.count_nonzero(target_out, axis=1)
        assert np.all((lengths >= 4) & (lengths <= 8))
        assert np.all(target_out[np.arange(5), lengths - 1] == 3)  # </s> last
        np.testing.assert_array_equal(np.count_nonzero(target_in, axis=1), lengths)  # <s> + words
        words = target_out[:, :-1] > 3  # real tokens before the last position
        np.testing.assert_array_equal(target_in[:, 1:][words], target_out[:, :-1][words])  # shifted by one


@pytest.mark.slow
def test_benchmark_runs_both_models_and_writes_their_ratio(tmp_path, capsys):
    argv = ["--preset", "tiny", "--vocab-size", "200", "--batch-size", "8", "--length", "8", "--steps", "2"]
    argv += ["--rounds", "2", "--peak-size", "256", "--precision", "float32", "--bleu-epochs", "0"]
    argv += ["--out", str(tmp_path), "--name", "throughput"]
    status, printed = run_main(train_throughput.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert "ours / keras-hub" in printed
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    written = json.loads((tmp_path / "throughput.json").read_text())
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["command"] == "python -m benchmarks.speed.train_throughput " + " ".join(argv)
    [point] = written["lengths"]
    assert (point["length"], point["batch_size"]) == (8, 8)
    results = point["precisions"]["float32"]
    for name in ("ours", "keras-hub"):
        assert len(results[name]["target_tokens_per_second_rounds"]) == 2
        assert results[name]["target_tokens_per_second_median"] > 0
        assert 0 < results[name]["mfu_fp32_peak"] < 1
        assert results[name]["mfu_own_peak"] == results[name]["mfu_fp32_peak"]  # float32's own peak
        assert results[name]["peak_device_mib"] is None  # a CPU
    ratio = results["ours"]["target_tokens_per_second_median"] / results["keras-hub"]["target_tokens_per_second_median"]
    assert results["ours_over_keras_hub"] == pytest.approx(ratio)


def test_a_length_sweep_keeps_the_tokens_per_step_and_each_length_gets_its_own_model():
    args = train_throughput.parse_args(["--length", "64", "256", "64", "1024", "--tokens-per-step", "16384"])
    assert args.length == [64, 256, 1024]  # a length given twice runs once
    points = [throughput_models.at_length(args, length) for length in args.length]
    assert [(p.length, p.batch_size) for p in points] == [(64, 256), (256, 64), (1024, 16)]
    assert [throughput_models.model_config(p).max_target_len for p in points] == [64, 256, 1024]
    assert args.length == [64, 256, 1024]  # the parent's flags are left alone
    plain = train_throughput.parse_args(["--length", "24", "--batch-size", "7"])
    assert throughput_models.at_length(plain, 24).batch_size == 7  # without --tokens-per-step: --batch-size


def test_the_lm_task_races_our_decoder_only_model_against_gpt2_on_packed_windows():
    argv = ["--task", "lm", "--preset", "tiny", "--vocab-size", "40", "--batch-size", "3"]
    args = throughput_models.at_length(train_throughput.parse_args(argv), 6)
    config = throughput_models.model_config(args)
    assert (config.kind, config.max_length, config.vocab_size) == ("decoder", 6, 40)
    batches = throughput_models.synthetic_batches(args)
    inputs, labels = batches[0]
    assert inputs.shape == labels.shape == (3, 6)
    np.testing.assert_array_equal(inputs[:, 1:], labels[:, :-1])  # labels are the next token
    assert throughput_models.round_target_tokens(args, batches) == args.steps * 3 * 6  # every position a target
    ours, hub = (throughput_models.build_model(name, config) for name in ("ours", "keras-hub"))
    assert any("gpt2" in layer.name for layer in hub._flatten_layers())
    for model in (ours, hub):
        assert tuple(model(inputs).shape) == (3, 6, 40)
    # Every parameter of ours is a matmul weight, an embedding, a bias or a LayerNorm's: the FLOPs
    # count 6 per matmul weight at each position, plus attention's 12 T D per block, times B.
    matmul_weights = sum(int(np.prod(w.shape)) for w in ours.weights if w.path.endswith("kernel"))
    matmul_weights += config.vocab_size * config.d_model  # the tied logits
    per_row = 6 * 6 * matmul_weights + 3 * config.num_blocks * 4 * 6 * 6 * config.d_model
    assert throughput_models.step_flops(args, config) == 3 * per_row


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--length", "64", "--tokens-per-step", "32"], "--tokens-per-step must be >= every --length"),
        (["--task", "lm", "--models", "ours,shared"], "--task lm has none"),
        (["--task", "lm", "--vocab-size", "6"], "--vocab-size must be >= 7 for --task lm"),
        (["--models", "ours,theirs"], "expected comma-separated values of ours, keras-hub, shared"),
        (["--batch-size", "0"], "batch_size"),  # TrainConfig's own rule
        (["--jit-compile", "maybe"], "expected true or false"),
    ],
)
def test_sweep_and_task_flags_that_cannot_run_are_refused_by_name(argv, message, capsys):
    with pytest.raises(SystemExit):
        train_throughput.parse_args(argv)
    assert message in capsys.readouterr().err


def test_flag_checks_name_the_flag_the_bound_and_the_value(capsys):
    with pytest.raises(SystemExit):
        train_throughput.parse_args(["--length", "1"])
    assert "--length must be >= 2. Received: 1" in capsys.readouterr().err


def test_decode_json_records_the_cpu_beside_the_versions():
    from benchmarks.speed.decode import __main__ as decode
    from benchmarks.speed.decode.report import results_json

    args = decode.parse_args(["--preset", "tiny"])
    model_config = preset("tiny", source_vocab_size=50, target_vocab_size=50, max_source_len=8, max_target_len=8)
    cpu = machine.parse_cpuinfo(X86_CPUINFO)
    results = results_json(args, model_config, {}, cpu, {"ratios": {}})
    assert results["config"]["cpu"] == cpu and results["config"]["cpu_count"] == os.cpu_count()
    assert set(results["config"]["versions"]) == {"python", "tensorflow", "jax", "keras", "keras_hub", "ctranslate2"}
    assert results["config"]["backend"] == "tensorflow"
    assert results["config"]["command"] == "python -m benchmarks.speed.decode --preset tiny"
    assert results["ratios"] == {}


def test_decode_flags_have_the_configs_names_and_are_checked(capsys):
    from benchmarks.speed.decode import __main__ as decode

    args = decode.parse_args(["--vocab-size", "50", "--batch-size", "3", "--jit-compile", "true", "--name", "run_1"])
    assert (args.vocab_size, args.batch_size, args.jit_compile, args.name) == (50, 3, True, "run_1")
    for argv, message in (
        (["--vocab-size", "4"], "--vocab-size must be > 4"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--name", "../x"], "--name must be letters"),
    ):
        with pytest.raises(SystemExit):
            decode.parse_args(argv)
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_decode_latency_serves_ours_and_keras_hubs_exports_greedy_and_beam(tmp_path):
    from benchmarks.harness.peers import KerasHubTransformer
    from benchmarks.speed.decode import latency as decode

    keras.utils.set_random_seed(0)
    config = preset("tiny", source_vocab_size=40, target_vocab_size=40, max_source_len=6, max_target_len=5)
    model, hub = build_transformer(config), KerasHubTransformer(config)
    source_ids = np.random.default_rng(0).integers(4, 40, size=(2, 6), dtype="int32")
    latency = decode.measure_latency(model, config, hub, source_ids, requests=2, folder=tmp_path)

    assert set(latency) == {"beam1", "beam4", "beam1_xla", "beam4_xla", "keras_hub_beam1", "keras_hub_beam4"}
    for result in latency.values():
        assert len(result["raw_ms"]) == 2 and 0 < result["p50_ms"] <= result["p95_ms"]
        assert 1 <= result["mean_output_tokens"] <= result["max_output_tokens"] == 5
    for beam_size in (1, 4):
        ours, peer = latency[f"beam{beam_size}"], latency[f"keras_hub_beam{beam_size}"]
        assert ours["keras_hub_p50_over_ours"] == pytest.approx(peer["p50_ms"] / ours["p50_ms"])
        xla = latency[f"beam{beam_size}_xla"]
        assert xla["default_p50_over_xla"] == pytest.approx(ours["p50_ms"] / xla["p50_ms"])

    # The peer's export serves what its generation gives in this process.
    serve = tf.saved_model.load(str(tmp_path / "keras_hub_beam4")).signatures["serving_default"]
    served = serve(source_ids=tf.constant(source_ids))["output_ids"].numpy()
    in_process = hub.generate(tf.constant(source_ids), 5, end_id=decode.END_ID, num_beams=4)
    np.testing.assert_array_equal(served, keras.ops.convert_to_numpy(in_process))


def test_the_ctranslate2_peer_decodes_our_weights_as_our_decoders_do(tmp_path):
    from benchmarks.speed.decode import ctranslate2_peer as peer
    from benchmarks.speed.decode.ctranslate2_worker import Engine
    from keras_transformer.decoding import beam_search, greedy_decode

    keras.utils.set_random_seed(1)
    config = preset("tiny", source_vocab_size=40, target_vocab_size=30, max_source_len=5, max_target_len=6)
    model = build_transformer(config)
    source_ids = np.random.default_rng(1).integers(4, 30, size=(3, 5), dtype="int32")
    seconds = peer.convert(model, config, tmp_path / "engine")

    engine = Engine(tmp_path / "engine", "float32", 1)  # what each worker runs
    ours = {
        1: keras.ops.convert_to_numpy(greedy_decode(model, source_ids, 6)[0]),
        4: keras.ops.convert_to_numpy(beam_search(model, source_ids, 6, beam_size=4, alpha=0.0)[0]),
    }
    for beam_size, expected in ours.items():  # until </s>, as the latency runs decode
        np.testing.assert_array_equal(engine.decode(source_ids, beam_size, 6, forced=False), expected)
    forced = {beam: engine.decode(source_ids, beam, 6, forced=True) for beam in (1, 4)}  # as the batch runs do
    assert forced[1].shape == (3, 6) and forced[1].min() >= 4  # six real tokens, no </s> and no padding

    medians = {"greedy_cached": 0.5, "beam4_cached": 1.0}
    outputs = {"greedy_cached": forced[1], "beam4_cached": forced[4]}
    batches, latency = peer.measure(tmp_path / "engine", seconds, source_ids, 6, 2, 4, outputs, medians)
    names = {
        peer.setting_name(kind, threads, beam) for kind in ("float32", "int8") for threads in (1, 2) for beam in (1, 4)
    }
    assert set(batches) == set(latency) == names
    for name in ("ctranslate2_float32_1t_beam1", "ctranslate2_float32_2t_beam4"):
        result = batches[name]
        assert len(result["raw_seconds"]) == 2 and result["equal_to_ours_token_fraction"] == 1.0
        ours_median = medians["greedy_cached" if result["beam_size"] == 1 else "beam4_cached"]
        assert result["ours_cached_median_over_it"] == pytest.approx(ours_median / result["median_seconds_per_batch"])
    for result in latency.values():
        assert len(result["raw_ms"]) == 4 and result["export_seconds"] == seconds
        assert 1 <= result["mean_output_tokens"] <= result["max_output_tokens"] == 6

    p50 = {name: 1.0 + i for i, name in enumerate(sorted(names))} | {"beam1": 8.0, "beam1_xla": 4.0, "beam4": 9.0}
    ratios = peer.latency_ratios({name: {"p50_ms": ms} for name, ms in p50.items()})
    assert ratios["beam1"]["float32"] == {
        "best": "ctranslate2_float32_1t_beam1",
        "p50_ms": p50["ctranslate2_float32_1t_beam1"],
        "ours_p50_over_it": 8.0 / p50["ctranslate2_float32_1t_beam1"],
        "ours_xla_p50_over_it": 4.0 / p50["ctranslate2_float32_1t_beam1"],
    }
    assert ratios["beam4"]["int8"]["best"] == "ctranslate2_int8_1t_beam4"
    assert "ours_xla_p50_over_it" not in ratios["beam4"]["int8"]


GPU_JOB_FLAGS = {
    "lm": ["--preset", "tiny", "--vocab-size", "100", "--length", "8", "16", "--tokens-per-step", "32"]
    + ["--rounds", "1", "--steps", "2", "--peak-size", "128", "--precision", "float32"],
    "decode": ["--preset", "tiny", "--vocab-size", "40", "--batch-size", "3", "--source-len", "5"]
    + ["--output-tokens", "4", "--repeats", "1", "--latency-requests", "2"],
    "profile": ["--preset", "tiny", "--vocab-size", "50", "--length", "8", "16", "--tokens-per-step", "32"]
    + ["--steps", "2", "--rounds", "1", "--trace-steps", "1", "--peak-size", "128", "--precision", "float32"],
}


@pytest.mark.slow
@pytest.mark.parametrize("job", sorted(GPU_JOB_FLAGS))
def test_gpu_script_runs_a_job_end_to_end_on_jax_without_a_gpu(job, tmp_path):
    """`benchmarks/gpu.sh JOB` on JAX's CPU, XLA-compiled, without TensorFlow (as on a GPU machine): log, JSON."""
    env = jax_cpu_env(tmp_path / "site")
    env.update({"PYTHON": sys.executable, "OUT": str(tmp_path)})
    env["PATH"] = f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"  # no nvidia-smi: the GPU check is skipped
    result = subprocess.run(
        ["bash", "benchmarks/gpu.sh", job, *GPU_JOB_FLAGS[job]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = json.loads((tmp_path / f"gpu_{job}.json").read_text())
    log = (tmp_path / f"gpu_{job}.log").read_text()
    assert f"== {job} took" in log
    if job == "lm":  # the length sweep of the lm task
        assert written["backend"] == "jax" and written["config"]["task"] == "lm" and written["config"]["jit_compile"]
        assert [(point["length"], point["batch_size"]) for point in written["lengths"]] == [(8, 4), (16, 2)]
        assert all(point["precisions"]["float32"]["ours_over_keras_hub"] > 0 for point in written["lengths"])
        assert "the sweep (lm)" in log
    elif job == "profile":  # the step's ops, timed by the profiler and found in XLA's dump
        assert written["backend"] == "jax" and [point["length"] for point in written["lengths"]] == [8, 16]
        for point in written["lengths"]:
            assert point["busy_ms_per_step"] > 0 and point["ms_by_kind"]["matmul"] > 0
            assert sum(point["ms_by_part"].values()) == pytest.approx(point["busy_ms_per_step"])
            assert {"feed-forward", "attention core: encoder self", "optimizer"} <= set(point["ms_by_part"])
        assert (tmp_path / "gpu_profile_trace" / "hlo").is_dir()
    else:  # greedy and beam 4, ours against keras-hub's samplers, in batches and one sentence at a time
        assert written["config"]["backend"] == "jax" and written["config"]["jit_compile"]
        assert written["ratios"]["ours_beam4_over_keras_hub_beam4_sentences_per_s"] > 0
        assert written["checks"]["ours_cached_equals_uncached_token_fraction"] == 1.0
        assert set(written["latency"]) == {"beam1", "beam4", "keras_hub_beam1", "keras_hub_beam4"}
        assert all(result["export_seconds"] is None for result in written["latency"].values())  # no SavedModel
        assert "single-sentence latency, compiled decoders" in log


def test_gpu_script_names_its_jobs_when_given_another():
    refused = subprocess.run(["bash", "benchmarks/gpu.sh", "bogus"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "must be a job, one of: train lm decode profile" in refused.stderr
