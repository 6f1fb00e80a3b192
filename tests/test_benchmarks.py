"""Tests of the benchmark scripts' own arithmetic and plumbing.

Not of speed: the benchmarks measure that. conftest.py puts `benchmarks/` on `sys.path`.
"""

import gzip
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import common  # noqa: E402
import keras
import numpy as np
import pytest
import tensorflow as tf
import train_throughput  # noqa: E402
import train_throughput_models as throughput_models  # noqa: E402
import train_throughput_rounds as throughput_rounds  # noqa: E402
from conftest import run_main

from keras_transformer.config import preset, variant_switches
from keras_transformer.models import build_transformer

ROOT = Path(__file__).resolve().parents[1]


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
    assert throughput_rounds.peak_dtypes(["float32"]) == ("float32",)
    assert throughput_rounds.peak_dtypes(["float32", "mixed_bfloat16"]) == ("float32", "bfloat16")
    assert set(throughput_rounds.matmul_peaks(32, ("float32",))) == {"float32"}
    described = throughput_rounds.describe_peaks({"float32": 4.2e11})
    assert described == "float32 420 GFLOP/s, bfloat16 not measured"


def test_synthetic_batches_look_like_the_pipelines_and_are_the_same_for_every_worker():
    args = train_throughput.parse_args(["--batches", "3", "--batch-size", "5", "--length", "8", "--vocab", "30"])
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
    out = tmp_path / "throughput.json"
    argv = ["--preset", "tiny", "--vocab", "200", "--batch-size", "8", "--length", "8", "--steps", "2"]
    argv += ["--rounds", "2", "--peak-size", "256", "--precision", "float32", "--bleu-epochs", "0", "--out", str(out)]
    status, printed = run_main(train_throughput.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert "ours / keras-hub" in printed
    assert common.cpu_line(common.cpu_info()) in printed.splitlines()
    written = json.loads(out.read_text())
    assert written["cpu"] == common.cpu_info() and written["cpu_count"] == os.cpu_count()
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
    args = throughput_models.at_length(
        train_throughput.parse_args(["--task", "lm", "--preset", "tiny", "--vocab", "40", "--batch-size", "3"]), 6
    )
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
        (["--task", "lm", "--vocab", "6"], "--vocab must be >= 7 for --task lm"),
    ],
)
def test_sweep_and_task_flags_that_cannot_run_are_refused_by_name(argv, message, capsys):
    with pytest.raises(SystemExit):
        train_throughput.parse_args(argv)
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------- the shared plumbing (benchmarks/common.py)

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse2 avx2 avx fma avx512f amx_bf16 avx512_bf16 amx_tile

processor\t: 1
model name\t: another model
flags\t\t: fpu
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd sve bf16
CPU implementer\t: 0x41
"""


def test_cpuinfo_gives_the_first_processors_model_and_sorted_flags():
    assert common.parse_cpuinfo(X86_CPUINFO) == {
        "model": "Intel(R) Xeon(R) Platinum 8480+",
        "id": "family 6 model 143 stepping 8",
        "flags": ["amx_bf16", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512f", "fma", "fpu", "sse2"],
    }
    assert common.parse_cpuinfo(ARM_CPUINFO) == {"model": None, "id": None, "flags": ["asimd", "bf16", "fp", "sve"]}


def test_cpu_info_without_a_cpuinfo_file_names_the_processor_from_platform(tmp_path):
    cpu = common.cpu_info(tmp_path / "no_cpuinfo")
    assert cpu["flags"] == [] and cpu["model"] == (platform.processor() or platform.machine() or None)
    (tmp_path / "cpuinfo").write_text(ARM_CPUINFO)
    assert common.cpu_info(tmp_path / "cpuinfo")["model"] == (platform.processor() or platform.machine() or None)


def test_cpu_line_names_the_model_and_the_matmul_flags_it_has():
    cpu = common.parse_cpuinfo(X86_CPUINFO)
    assert common.cpu_line(cpu) == (
        "CPU Intel(R) Xeon(R) Platinum 8480+ (family 6 model 143 stepping 8); matmul flags: avx avx2 fma avx512f "
        "avx512_bf16 amx_tile amx_bf16 (all 9 flags in the JSON)"
    )
    assert common.cpu_line({"model": None, "flags": ["fpu"]}).startswith("CPU unknown; matmul flags: none of avx ")


def test_results_json_records_the_cpu_model_and_flags(tmp_path):
    cpu = common.parse_cpuinfo(X86_CPUINFO)
    path = common.write_json(tmp_path / "new" / "folder" / "results.json", {"a": 1, **common.machine(cpu)})
    assert path.read_text().endswith("}\n")
    assert json.loads(path.read_text()) == {"a": 1, "cpu_count": os.cpu_count(), "cpu": cpu}
    machine = common.machine()  # this machine's, read from /proc/cpuinfo where there is one
    assert machine["cpu"] == common.cpu_info() and machine["cpu"]["model"]


def test_package_versions_come_from_the_installed_distributions_and_skip_missing_ones():
    versions = common.package_versions({"numpy": "numpy", "keras_hub": "keras-hub", "absent": "no-such-dist-xyz"})
    assert versions == {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "keras_hub": importlib.import_module("keras_hub").__version__,
    }


def test_ratios_print_with_two_decimals_right_aligned():
    assert common.format_ratio(0.9349) == "0.93x"
    assert common.format_ratio(12.0, width=18) == " " * 12 + "12.00x"
    results = {"ours": {"train": {"steps": 30}}, "keras-hub": {"train": {"steps": 20}}}
    assert common.ours_over_keras_hub(results, "train", "steps") == 1.5


def test_flag_checks_name_the_flag_the_bound_and_the_value(capsys):
    with pytest.raises(SystemExit):
        train_throughput.parse_args(["--length", "1"])
    assert "--length must be >= 2. Received: 1" in capsys.readouterr().err


def test_json_lines_worker_skips_chatter_and_reports_a_worker_that_dies():
    script = (
        "import json, sys\n"
        "print('library chatter', flush=True)\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    if line.strip() != 'round':\n"
        "        sys.exit(3)\n"
        "    print(json.dumps({'echo': line.strip()}), flush=True)\n"
    )
    worker = common.JsonLinesWorker([sys.executable, "-c", script], "echo")
    try:
        assert worker.answer() == {"ready": True}
        assert worker.request("round") == {"echo": "round"}
        with pytest.raises(RuntimeError, match="worker echo exited with status 3 before answering"):
            worker.request("stop")
    finally:
        worker.close()


# ---------------------------------------------------------------- the reports of multi30k.py and decode.py


def fake_multi30k_result(name, parameters, steps, bleu):
    """A worker result with the fields multi30k.py's report and comparison read."""
    return {
        "model": name,
        "decoding": "greedy",
        "parameters": parameters,
        "vocab_sizes": [118, 104],
        "train_pairs": 300,
        "dropped_pairs": 0,
        "batch_fingerprint": "same",
        "train": {"minutes": 0.5, "steps": steps, "epochs": 1.0, "target_tokens_per_second_median": 100},
        "peak_rss_mib": 1000.0,
        "curve": [{"minutes": 0.5, "steps": steps, "bleu": bleu}],
        "test": {"bleu": bleu, "chrf": 40.0, "sentences": 40, "bleu_signature": "nrefs:1"},
        "test_greedy": {"bleu": bleu},
        "wall_seconds": {"scoring": 10.0},
    }


def multi30k_folder(folder):
    """`folder` with Multi30k's file names (empty files): what `multi30k.py --data` checks for."""
    for split in ("train", "val", "test_2016_flickr"):
        for language in ("de", "en"):
            (folder / f"{split}.{language}.gz").touch()
    return folder


def test_multi30k_report_prints_the_cpu_ratios_and_bleu_differences(tmp_path, capsys):
    import multi30k
    import multi30k_report

    multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(tmp_path), "--minutes", "0.5", "--curve-sentences", "20"])
    results = {
        "ours": fake_multi30k_result("ours", 31_912, 30, 12.5),
        "keras-hub": fake_multi30k_result("keras-hub", 34_472, 20, 10.25),
    }
    multi30k_report.print_report(args, results, common.parse_cpuinfo(X86_CPUINFO))
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == common.cpu_line(common.parse_cpuinfo(X86_CPUINFO))
    assert f"{'parameters':<34}{'31,912':>18}{'34,472':>18}{'0.93x':>18}" in lines
    assert f"{'steps':<34}{'30':>18}{'20':>18}{'1.50x':>18}" in lines
    assert f"{'test_2016 BLEU (40 sent.)':<34}{'12.50':>18}{'10.25':>18}{'+2.25':>13} BLEU" in lines
    reached = "ours reached keras-hub's curve BLEU at 0.5 min (10.25) at 0.5 min (100% of the time;"
    assert lines[-2] == f"{reached} linear between curve points)"
    assert lines[-1] == "same batches (first 20 fingerprinted): yes"
    assert multi30k_report.comparison(results) == {
        "ours_minutes_to_keras_hub_final_curve_bleu": 0.5,
        "keras_hub_curve_minutes": 0.5,
        "test_bleu_ours_minus_keras_hub": 2.25,
        "target_tokens_per_second_ours_over_keras_hub": 1.0,
        "steps_ours_over_keras_hub": 1.5,
        "peak_rss_ours_over_keras_hub": 1.0,
        "same_batches": True,
    }


def test_multi30k_finds_when_a_curve_first_reaches_a_score():
    import multi30k_report

    curve = [{"minutes": m, "bleu": b} for m, b in ((5, 10.0), (10, 20.0), (15, 18.0), (20, 30.0))]
    assert multi30k_report.minutes_to_reach(curve, 15.0) == 7.5  # halfway from 10 to 20 BLEU, 5 to 10 minutes
    assert multi30k_report.minutes_to_reach(curve, 24.0) == 17.5  # from the dip at 15 minutes (18 BLEU)
    assert multi30k_report.minutes_to_reach(curve, 5.0) == 5  # already at the first point
    assert multi30k_report.minutes_to_reach(curve, 30.5) is None


@pytest.mark.parametrize(
    "flags, expected",
    [
        ([], ("per_head", 0.9999, 3.0, "all", "on")),
        (["--recipe", "tutorial"], ("glorot", 0.0, 9.0, "none", "off")),
        (["--ema-momentum", "0.99"], ("per_head", 0.99, 3.0, "all", "on")),
        (["--recipe", "tutorial", "--attention-initialization", "per_head"], ("per_head", 0.0, 9.0, "none", "off")),
        (["--ema-momentum", "0.998", "--ema-ramp", "9"], ("per_head", 0.998, 9.0, "all", "on")),
        (["--embedding-sharing", "none"], ("per_head", 0.9999, 3.0, "none", "off")),
        (["--recipe", "tutorial", "--joint-vocab", "on"], ("glorot", 0.0, 9.0, "none", "on")),
    ],
)
def test_multi30k_trains_ours_by_the_best_recipe_unless_told_otherwise(tmp_path, flags, expected):
    import multi30k

    args = multi30k.parse_args(["--data", str(multi30k_folder(tmp_path)), "--minutes", "30", *flags])
    settings = ("attention_initialization", "ema_momentum", "ema_ramp", "embedding_sharing", "joint_vocab")
    assert tuple(getattr(args, name) for name in settings) == expected


def test_multi30k_ema_ramp_reaches_our_optimizer_and_refuses_a_ramp_below_1(tmp_path, capsys):
    import multi30k
    import multi30k_models
    import multi30k_report

    flags = ["--data", str(multi30k_folder(tmp_path)), "--minutes", "30"]
    args = multi30k.parse_args([*flags, "--ema-ramp", "5"])
    assert multi30k_models.worker_train_config(args, "ours").ema_ramp == 5.0
    assert "weight averaging 0.9999 (ramp 5)" in multi30k_report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    with pytest.raises(SystemExit):
        multi30k.parse_args([*flags, "--ema-ramp", "0.5"])
    assert "--ema-ramp must be >= 1. Received: 0.5" in capsys.readouterr().err


def test_multi30k_lr_cooldown_flag_sets_ours_only_and_refuses_a_share_outside_0_1(tmp_path, capsys):
    import multi30k
    import multi30k_models
    import multi30k_report

    flags = ["--data", str(multi30k_folder(tmp_path)), "--minutes", "30"]
    args = multi30k.parse_args([*flags, "--lr-cooldown", "0.25"])
    assert multi30k_models.worker_train_config(args, "ours").lr_cooldown == 0.25
    assert multi30k_models.worker_train_config(args, "keras-hub").lr_cooldown == 0.0
    assert "learning-rate cooldown over the last 25%" in multi30k_report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    for share in ("1", "-0.1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags, "--lr-cooldown", share])
        assert f"--lr-cooldown must be in [0, 1). Received: {float(share)}" in capsys.readouterr().err


def test_multi30k_cooldown_ends_where_the_clock_will_reach_the_budget():
    import multi30k_train

    clock = multi30k_train.TrainingClock(budget_seconds=100.0)
    optimizer = types.SimpleNamespace(cooldown_end_step=keras.Variable(123.0), iterations=keras.Variable(0))
    cooldown = multi30k_train.CooldownToBudget(clock)
    cooldown.set_model(types.SimpleNamespace(optimizer=optimizer))
    cooldown.on_train_begin()
    assert float(optimizer.cooldown_end_step) == 0.0  # not known before the first chunk
    clock.seconds = lambda: 10.0
    clock.chunk_seconds, clock.chunk_steps = [10.0], [100]  # the first chunk, tracing included
    optimizer.iterations.assign(100)
    cooldown.on_epoch_end(0)
    assert float(optimizer.cooldown_end_step) == 100 + 90 * 10  # 10 steps/s for the 90 s left
    clock.seconds = lambda: 30.0
    clock.chunk_seconds, clock.chunk_steps = [10.0, 10.0, 10.0], [100, 200, 400]
    optimizer.iterations.assign(700)
    cooldown.on_epoch_end(2)
    assert float(optimizer.cooldown_end_step) == 700 + 70 * 30  # the first chunk left out: 600 steps in 20 s
    assert cooldown.end_steps == [1000, 2800]


def test_multi30k_dropout_flag_sets_ours_only_and_refuses_a_rate_outside_0_1(tmp_path, capsys):
    import multi30k
    import multi30k_models

    data = multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(data), "--minutes", "30", "--dropout", "0.3"])
    joint = types.SimpleNamespace(vocab_size=100)  # the recipe's one vocabulary on both sides
    vocabularies = types.SimpleNamespace(source_tokenizer=joint, target_tokenizer=joint)
    rates = {}
    for name in ("ours", "keras-hub"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        rates[name] = multi30k_models.save_worker_configs(args, name, vocabularies, run_dir)[0].dropout_rate
    assert rates == {"ours": 0.3, "keras-hub": 0.1}  # keras-hub keeps the medium preset's rate

    for rate in ("1", "-0.1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args(["--data", str(data), "--minutes", "30", "--dropout", rate])
        assert f"--dropout must be in [0, 1). Received: {float(rate)}" in capsys.readouterr().err


def test_multi30k_attention_residual_dropout_sets_ours_only_and_refuses_a_rate_outside_0_1(tmp_path, capsys):
    import multi30k
    import multi30k_models

    data = multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(data), "--minutes", "30", "--attention-residual-dropout", "0.1"])
    joint = types.SimpleNamespace(vocab_size=100)
    vocabularies = types.SimpleNamespace(source_tokenizer=joint, target_tokenizer=joint)
    rates = {}
    for name in ("ours", "keras-hub"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        config = multi30k_models.save_worker_configs(args, name, vocabularies, run_dir)[0]
        rates[name] = variant_switches(config)["attention_residual_dropout_rate"]
    assert rates == {"ours": 0.1, "keras-hub": 0.0}
    with pytest.raises(SystemExit):
        multi30k.parse_args(["--data", str(data), "--minutes", "30", "--attention-residual-dropout", "1"])
    assert "--attention-residual-dropout must be in [0, 1). Received: 1.0" in capsys.readouterr().err


def test_multi30k_late_dropout_starts_after_its_epochs_of_batches_for_ours_only(tmp_path, capsys):
    import multi30k
    import multi30k_report
    import multi30k_train

    from keras_transformer.data.translation_batches import EncodedPairs

    data = multi30k_folder(tmp_path)
    flags = ["--data", str(data), "--minutes", "30", "--batch-size", "4", "--late-dropout", "0.3"]
    lengths = [3] * 10 + [20] * 5  # two length buckets: 3 + 2 batches of up to 4 pairs in one pass
    ids = tf.ragged.constant([[5] * n for n in lengths], dtype=tf.int32)
    pairs = EncodedPairs(ids, ids, num_dropped=0)
    model_config = types.SimpleNamespace(dropout_rate=0.1)

    args = multi30k.parse_args([*flags, "--late-dropout-epochs", "2.5"])
    late = multi30k_train.late_dropout(args, "ours", model_config, pairs)
    assert (late.rate, late.start_step, late.from_rate) == (0.3, round(2.5 * 5), 0.1)
    assert multi30k_train.late_dropout(args, "keras-hub", model_config, pairs) is None
    assert "dropout the preset's raised to 0.3 after 2.5 epochs" in multi30k_report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    assert multi30k_train.late_dropout(multi30k.parse_args(flags[:-2]), "ours", model_config, pairs) is None  # off

    for bad, message in [
        (["--late-dropout", "1"], "--late-dropout must be in [0, 1). Received: 1.0"),
        (["--late-dropout-epochs", "-1"], "--late-dropout-epochs must be >= 0. Received: -1.0"),
        (["--dropout", "0"], "--late-dropout raises our model's dropout rate, which is 0 here"),
        (["--preset", "tiny"], "--late-dropout raises our model's dropout rate, which is 0 here"),  # the preset's
    ]:
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags, *bad])
        assert message in capsys.readouterr().err
    assert multi30k.parse_args([*flags, "--preset", "tiny", "--dropout", "0.1"]).late_dropout == 0.3


class _EchoTranslator:
    """A stand-in for our `Translator` that returns each source as its translation, or `word` for every one."""

    def __init__(self, word=None):
        self.word = word

    def translate(self, batch):
        texts = batch.numpy() if self.word is None else [self.word.encode()] * int(batch.shape[0])
        return {"translation": tf.constant(texts)}


def test_multi30k_validation_decodings_score_the_whole_validation_split_per_setting(tmp_path, capsys):
    import multi30k
    import multi30k_report
    import multi30k_scoring

    sentences = [f"a dog number {i} runs on the green grass ." for i in range(300)]
    for language in ("de", "en"):
        with gzip.open(multi30k_folder(tmp_path) / f"val.{language}.gz", "wt") as file:
            file.write("\n".join(sentences) + "\n")
    flags = ["--data", str(tmp_path), "--minutes", "30", "--validation-decodings", " 1:0, 4:0.6,4:1.5 "]
    args = multi30k.parse_args(flags)
    assert args.validation_decodings == [(1, 0.0), (4, 0.6), (4, 1.5)]
    asked = []

    def translator(beam_size, length_penalty=None):  # the worker's factory: settings in, a translator out
        asked.append((beam_size, length_penalty))
        return _EchoTranslator(None if length_penalty == 0.6 else "grass")

    scores = multi30k_scoring.score_validation_decodings(args, translator)
    assert asked == [(1, 0.0), (4, 0.6), (4, 1.5)]
    assert [(s["beam_size"], s["length_penalty"], s["sentences"]) for s in scores] == [
        (1, 0.0, 300),
        (4, 0.6, 300),
        (4, 1.5, 300),
    ]
    assert scores[1]["bleu"] == 100.0 and scores[0]["bleu"] < 1 and scores[2]["bleu"] < 1
    assert "ours: validation BLEU 100.00, chrF 100.00 (beam 4, alpha 0.6)" in capsys.readouterr().out

    result = fake_multi30k_result("ours", 31_912, 30, 12.5) | {"validation_decodings": scores}
    multi30k_report.print_report(args, {"ours": result}, common.parse_cpuinfo(X86_CPUINFO))
    assert "ours on validation (300 sent.), beam 4, alpha 0.6: BLEU 100.00, chrF 100.00" in capsys.readouterr().out

    for bad in ("4", "0:0.6", "4:-1", "four:0.6", "4:0.6:1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags[:-1], bad])
        assert f"--validation-decodings takes BEAM:ALPHA items, BEAM >= 1, ALPHA >= 0. Received: {bad!r}" in (
            capsys.readouterr().err
        )
    assert multi30k.parse_args(flags[:-2]).validation_decodings == []


def test_multi30k_refuses_one_shared_table_over_two_vocabularies(tmp_path, capsys):
    import multi30k

    flags = ["--minutes", "30", "--embedding-sharing", "all", "--joint-vocab", "off"]
    with pytest.raises(SystemExit):
        multi30k.parse_args(["--data", str(multi30k_folder(tmp_path)), *flags])
    assert "all embeds both sides with one table: it needs --joint-vocab on" in capsys.readouterr().err


def test_multi30k_joint_vocabulary_is_one_vocabulary_learned_from_both_sides(tmp_path):
    import multi30k
    import multi30k_data

    data = tmp_path / "data"
    data.mkdir()
    sentences = {"de": "ein hund läuft über die wiese", "en": "a dog runs across the meadow"}
    for split in ("train", "val", "test_2016_flickr"):
        for language, sentence in sentences.items():
            with gzip.open(data / f"{split}.{language}.gz", "wt", encoding="utf-8") as file:
                file.write(f"{sentence}\n" * 20)
    flags = ["--data", str(data), "--minutes", "1", "--vocab", "200", "--work-dir", str(tmp_path / "work")]
    paths = {}
    for joint, sharing in (("on", "all"), ("off", "none")):
        args = multi30k.parse_args([*flags, "--joint-vocab", joint, "--embedding-sharing", sharing])
        sizes = multi30k_data.prepare_vocabularies(args)
        paths[joint] = multi30k_data.vocabulary_paths(args)
        source, target = (set(paths[joint][side].read_text().split()) for side in ("source", "target"))
        assert {"hund", "wiese"} <= source and {"dog", "meadow"} <= target
        if joint == "on":
            assert source == target and sizes["source_size"] == sizes["target_size"]
        else:
            assert "dog" not in source and "hund" not in target
    assert paths["on"]["source"].parent != paths["off"]["source"].parent  # cached apart


def test_decode_json_records_the_cpu_beside_the_versions():
    import decode

    args = decode.parse_args(["--preset", "tiny"])
    model_config = preset("tiny", source_vocab_size=50, target_vocab_size=50, max_source_len=8, max_target_len=8)
    cpu = common.parse_cpuinfo(X86_CPUINFO)
    results = decode.results_json(args, ["--preset", "tiny"], model_config, {}, cpu, {"ratios": {}})
    assert results["config"]["cpu"] == cpu and results["config"]["cpu_count"] == os.cpu_count()
    assert set(results["config"]["versions"]) == {"python", "tensorflow", "jax", "keras", "keras_hub"}
    assert results["config"]["backend"] == "tensorflow"
    assert results["config"]["command"].endswith("--preset tiny") and results["ratios"] == {}


@pytest.mark.slow
def test_decode_latency_serves_ours_and_keras_hubs_exports_greedy_and_beam():
    import decode
    from peers import KerasHubTransformer

    keras.utils.set_random_seed(0)
    config = preset("tiny", source_vocab_size=40, target_vocab_size=40, max_source_len=6, max_target_len=5)
    model, hub = build_transformer(config), KerasHubTransformer(config)
    source_ids = np.random.default_rng(0).integers(4, 40, size=(2, 6), dtype="int32")
    latency = decode.measure_latency(model, config, hub, source_ids, requests=2)

    assert set(latency) == {"beam1", "beam4", "keras_hub_beam1", "keras_hub_beam4"}
    for result in latency.values():
        assert len(result["raw_ms"]) == 2 and 0 < result["p50_ms"] <= result["p95_ms"]
        assert 1 <= result["mean_output_tokens"] <= result["max_output_tokens"] == 5
    for beam_size in (1, 4):
        ours, peer = latency[f"beam{beam_size}"], latency[f"keras_hub_beam{beam_size}"]
        assert ours["keras_hub_p50_over_ours"] == pytest.approx(peer["p50_ms"] / ours["p50_ms"])

    # The peer's export serves what its generation gives in this process.
    with tempfile.TemporaryDirectory() as folder:
        exports = decode.export_latency_models(model, config, hub, folder)
        serve = tf.saved_model.load(str(exports["keras_hub_beam4"][2])).signatures["serving_default"]
        served = serve(source_ids=tf.constant(source_ids))["output_ids"].numpy()
    in_process = hub.generate(tf.constant(source_ids), 5, end_id=decode.END_ID, num_beams=4)
    np.testing.assert_array_equal(served, keras.ops.convert_to_numpy(in_process))


GPU_JOB_FLAGS = {
    "lm": ["--preset", "tiny", "--vocab", "100", "--length", "8", "16", "--tokens-per-step", "32", "--rounds", "1"]
    + ["--steps", "2", "--peak-size", "128", "--precision", "float32"],
    "decode": ["--preset", "tiny", "--vocab", "40", "--batch", "3", "--source-len", "5", "--output-tokens", "4"]
    + ["--repeats", "1", "--latency-requests", "2"],
    "profile": ["--preset", "tiny", "--vocab", "50", "--length", "8", "16", "--tokens-per-step", "32", "--steps", "2"]
    + ["--rounds", "1", "--trace-steps", "1", "--peak-size", "128", "--precision", "float32"],
}


@pytest.mark.slow
@pytest.mark.parametrize("job", sorted(GPU_JOB_FLAGS))
def test_gpu_script_runs_a_job_end_to_end_on_jax_without_a_gpu(job, tmp_path):
    """`benchmarks/gpu.sh JOB` on JAX's CPU, XLA-compiled: its log and its JSON."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    env.update({"PYTHON": sys.executable, "OUT": str(tmp_path), "JAX_PLATFORMS": "cpu"})
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
        assert written["backend"] == "jax" and written["config"]["task"] == "lm" and written["config"]["jit"]
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
        assert written["config"]["backend"] == "jax" and written["config"]["jit"]
        assert written["ratios"]["ours_beam4_over_keras_hub_beam4_sentences_per_s"] > 0
        assert written["checks"]["ours_cached_equals_uncached_token_fraction"] == 1.0
        assert set(written["latency"]) == {"beam1", "beam4", "keras_hub_beam1", "keras_hub_beam4"}
        assert all(result["export_seconds"] is None for result in written["latency"].values())  # no SavedModel
        assert "single-sentence latency, compiled decoders" in log


def test_gpu_script_names_its_jobs_when_given_another():
    refused = subprocess.run(["bash", "benchmarks/gpu.sh", "bogus"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and "must be a job, one of: train lm decode profile" in refused.stderr
