"""A smoke run of `python -m benchmarks.vision.attention` at tiny settings, and its flags.

Not of accuracy or speed: the study measures those.
"""

import argparse
import json
import os
import re

import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import machine, timing, vision_training
from benchmarks.vision.attention import __main__ as vision_attention
from benchmarks.vision.attention import report as vision_report
from keras_transformer.vision.models import build_classifier


def test_flags_are_checked_every_flag_has_help_and_the_models_rotate_from_seed_to_seed(capsys):
    args = vision_attention.parse_args([])
    assert args.attentions == ["none", "se", "sk", "cbam", "residual", "stn"] and args.seeds == [0, 1]
    assert args.filters == [16, 32, 32]  # repeated widths are kept
    assert args.block == "residual" and vision_attention.parse_args(["--block", "plain"]).block == "plain"
    args = vision_attention.parse_args(["--attentions", "stn, none,stn", "--filters", "8,8"])
    assert args.attentions == ["stn", "none"] and args.filters == [8, 8]
    for argv, message in (
        (["--attentions", "none,bam"], "expected comma-separated values of none, se, sk, cbam, residual, stn, vit"),
        (["--seeds", "a"], "expected comma-separated ints"),
        (["--steps", "0"], "--steps must be >= 1. Received: 0"),
        (["--size", "8"], "--size must be >= 16. Received: 8"),
        (["--adam-learning-rate", "0"], "--adam-learning-rate must be > 0. Received: 0.0"),
        (["--block", "dense"], "argument --block: invalid choice: 'dense'"),
        (["--curve-every", "-1"], "--curve-every must be >= 0. Received: -1"),
        (["--warmup-steps", "800"], "--warmup-steps must be >= 0 and < --steps (800). Received: 800"),
        (["--decay", "linear"], "argument --decay: invalid choice: 'linear'"),
        (["--max-rotation", "200"], "--max-rotation must be in [0, 180] degrees. Received: 200.0"),
    ):
        with pytest.raises(SystemExit):
            vision_attention.parse_args(argv)
        assert message in capsys.readouterr().err
    assert [a.dest for a in vision_attention.build_parser()._actions if not a.help] == []
    stems = [vision_attention.result_stem(vision_attention.parse_args(argv)) for argv in ([], ["--glyphs", "fine"])]
    stems.append(vision_attention.result_stem(vision_attention.parse_args(["--glyphs", "fine", "--block", "plain"])))
    stems.append(vision_attention.result_stem(vision_attention.parse_args(["--curve-every", "100"])))
    assert stems == [
        "vision_attention",
        "vision_attention_fine",
        "vision_attention_fine_plain",
        "vision_attention_curves",
    ]
    assert timing.run_orders(["a", "b", "c"], [0, 1]) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
    ]  # fmt: skip


def test_the_learning_rate_schedule_rises_over_the_warm_up_then_stays_or_falls_to_zero_by_the_cosine():
    assert vision_training.learning_rate_schedule(3e-3) == 3e-3  # no schedule: Adam's constant rate
    assert vision_training.learning_rate_schedule(3e-3, 800, decay="none") == 3e-3

    def rates(schedule, steps):
        return np.array([float(schedule(step)) for step in steps])

    steps = np.arange(0, 1001, 50)
    warm = rates(vision_training.learning_rate_schedule(1e-3, 1000, warmup_steps=200), steps)
    np.testing.assert_allclose(warm, np.minimum(steps / 200, 1.0) * 1e-3, rtol=1e-5, atol=1e-12)
    cosine = rates(vision_training.learning_rate_schedule(1e-3, 1000, warmup_steps=200, decay="cosine"), steps)
    after = np.clip(steps - 200, 0, 800) / 800
    expected = np.where(steps < 200, steps / 200, 0.5 * (1 + np.cos(np.pi * after))) * 1e-3
    np.testing.assert_allclose(cosine, expected, rtol=1e-5, atol=1e-9)
    assert cosine[-1] < 1e-9  # the last step's rate is 0
    plain_cosine = rates(vision_training.learning_rate_schedule(1e-3, 1000, decay="cosine"), [0, 500, 1000])
    np.testing.assert_allclose(plain_cosine, [1e-3, 5e-4, 0.0], atol=1e-9)
    args = vision_attention.parse_args(
        ["--steps", "1000", "--warmup-steps", "200", "--decay", "cosine", "--adam-learning-rate", "1e-3"]
    )
    np.testing.assert_allclose(rates(vision_training.schedule_of(args), steps), expected, rtol=1e-5, atol=1e-9)
    with pytest.raises(ValueError, match="'none' or 'cosine'"):
        vision_training.learning_rate_schedule(1e-3, 1000, decay="step")


@pytest.mark.slow
def test_smoke_run_trains_each_model_and_writes_ratios_pointing_scores_curves_the_cpu_and_figures(tmp_path, capsys):
    argv = ["--attentions", "none,se,stn", "--seeds", "0", "--steps", "2", "--batch-size", "8", "--train-size", "32"]
    argv += ["--test-size", "16", "--size", "24", "--glimpse", "12", "--filters", "4,8", "--clutter", "2"]
    argv += ["--curve-every", "1", "--validation-size", "8"]
    argv += ["--out", str(tmp_path)]
    status, printed = run_main(vision_attention.main, argv, capsys)
    assert status == 0, printed[-3000:]
    lines = printed.splitlines()
    assert machine.cpu_line(machine.cpu_info()) in lines
    baseline = next(line for line in lines if line.startswith("baseline CNN"))
    assert baseline.count("1.00x") + baseline.count("n/a") == 2  # accuracy and ms/step over the baseline's
    assert any(line.startswith("STN placement") for line in lines)
    assert any(line.startswith("+ SE channel weights of the last block (mean of seeds): from ") for line in lines)
    assert "Validation accuracy % (8 canvases; mean of seeds) after each number of steps:" in lines
    written = json.loads((tmp_path / "vision_attention_curves.json").read_text())
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["settings"]["steps"] == 2 and written["settings"]["filters"] == [4, 8]
    assert written["settings"]["block"] == "residual" and "residual blocks" in printed
    assert list(written["models"]) == ["none", "se", "stn"] and len(written["runs"]) == 3
    for run in written["runs"]:
        assert 0 <= run["test_accuracy_percent"] <= 100 and run["ms_per_step_median"] > 0
        assert run["parameters"] > 0 and run["forward_flops"] > 0
        pointing = run["pointing"]
        assert 0 <= pointing["mass_in_box"] <= 1 and 0 < pointing["uniform_share"] < 1
        assert pointing["lift"] == pytest.approx(pointing["mass_in_box"] / pointing["uniform_share"])
        assert [point["step"] for point in run["curve"]] == [1, 2]
        assert all(0 <= point["validation_accuracy_percent"] <= 100 for point in run["curve"])
        # One point a step: the points' losses are the steps' losses, and their mean is the epoch's.
        assert np.mean([point["train_loss"] for point in run["curve"]]) == pytest.approx(run["final_train_loss"])
    models = written["models"]
    assert models["none"]["accuracy_over_baseline"] in (1.0, None) and models["none"]["ms_per_step_over_baseline"] == 1
    assert models["none"]["map_kind"] == "activation" and models["stn"]["map_kind"] == "glimpse"
    se_run = next(run for run in written["runs"] if run["attention"] == "se")
    assert np.array(se_run["channel_weights"]["per_class"]).shape == (10, 8)  # 10 digits, the last block's 8 channels
    assert 0 < models["se"]["channel_weights"]["min"] <= models["se"]["channel_weights"]["max"] < 1
    stn = models["stn"]["stn"]
    assert stn["identity_centre_error_px"] > 0 and stn["side_over_glyph_height"] > 0
    assert [len(point["validation_accuracy_percent"]) for point in models["stn"]["curve"]] == [1, 1]  # one seed
    for name in (
        "vision_attention_curves.png",
        "vision_attention_curves_maps.png",
        "vision_attention_curves_validation.png",
    ):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_batch_norm_run_says_so_everywhere_and_its_table_keeps_three_seeds_apart_from_the_flops(tmp_path, capsys):
    argv = ["--attentions", "none,cbam", "--seeds", "0,1,2", "--steps", "2", "--batch-size", "8", "--train-size", "32"]
    argv += ["--test-size", "16", "--size", "24", "--filters", "4,8", "--clutter", "2", "--batch-norm", "true"]
    argv += ["--out", str(tmp_path)]
    status, printed = run_main(vision_attention.main, argv, capsys)
    assert status == 0, printed[-3000:]
    written = json.loads((tmp_path / "vision_attention.json").read_text())
    assert written["settings"]["batch_norm"] is True and "residual blocks + batch norm" in printed

    def parameters(batch_norm):
        model = build_classifier("none", filters=(4, 8), image_size=(24, 24), batch_norm=batch_norm).model
        return sum(int(np.prod(w.shape)) for w in model.trainable_weights)

    assert written["models"]["none"]["parameters"] == parameters(True) != parameters(False)
    # The table again, with three accuracies as wide as they get (100.0 among them).
    models = written["models"]
    for model in models.values():
        model["test_accuracy_percent"], model["test_accuracy_percent_mean"] = [97.8, 100.0, 99.1], 99.0
    vision_report.print_report(argparse.Namespace(**written["settings"]), models, written["cpu"])
    rows = capsys.readouterr().out.splitlines()
    for label in ("baseline CNN", "+ CBAM"):
        row = next(line for line in rows if line.startswith(label))
        assert re.match(rf"{re.escape(label)} +[\d,]+ +\d+\.\d\d +97\.8 / 100\.0 / 99\.1 +99\.0 ", row), row
