"""Tests of the benchmark scripts' own arithmetic and plumbing.

Not of speed: the benchmarks measure that. conftest.py puts `benchmarks/` on `sys.path`.
"""

import gzip
import importlib
import json
import os
import platform
import sys
import types
from pathlib import Path

import common  # noqa: E402
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.config import variant_switches

ROOT = Path(__file__).resolve().parents[1]


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


# ---------------------------------------------------------------- the report of multi30k.py


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
