"""Tests of the attention-family studies' arithmetic, flags and smoke runs: length_scaling and scores.

Not of speed: the studies measure that. The lookup studies' tests are in tests/test_hard_attention.py.
"""

import json
import os

import numpy as np
import pytest
from conftest import run_main

from benchmarks.attention_family.length_scaling import __main__ as length_scaling
from benchmarks.attention_family.length_scaling import measure as scaling
from benchmarks.attention_family.scores import __main__ as attention_scores
from benchmarks.harness import machine, timing
from keras_transformer.config import preset

# ---------------------------------------------------------------- length_scaling (why self-attention)


def test_scaling_flop_formulas_count_every_matmul_weight_and_attentions_n_squared():
    args = length_scaling.parse_args(["--d-model", "8", "--num-heads", "2", "--kernel-size", "3"])
    layers = scaling.build_layers(args)
    kernels = {
        name: sum(int(np.prod(w.shape)) for w in layer.trainable_weights if w.path.endswith("kernel"))
        for name, (layer, _) in layers.items()
    }
    d, k = 8, 3
    assert kernels == {"self_attention": 4 * d * d, "gru": 6 * d * d, "conv": k * d * d}
    # One token: 2 FLOPs per matmul weight, plus attention's scores and weighted sum (4 n^2 d).
    for name in scaling.MODELS:
        extra = 4 * d if name == "self_attention" else 0
        assert scaling.forward_flops(name, 1, d, k) == 2 * kernels[name] + extra
        assert scaling.train_step_flops(name, 5, d, 3, k) == 9 * scaling.forward_flops(name, 5, d, k)
    # Doubling n: 4x for attention once n >> d, 2x for the GRU and the convolution.
    n = 2**16
    ratio = {name: scaling.forward_flops(name, 2 * n, d) / scaling.forward_flops(name, n, d) for name in kernels}
    assert ratio["self_attention"] == pytest.approx(4, rel=1e-3) and ratio["gru"] == ratio["conv"] == 2
    assert scaling.forward_flops("self_attention", 2 * d, d) == 2 * 8 * (2 * d) * d * d  # n = 2d: halves equal
    with pytest.raises(ValueError, match="must be one of"):
        scaling.forward_flops("lstm", 4, d)


def test_scaling_slope_fit_recovers_power_laws_over_the_lengths_above_the_width():
    lengths = [16, 32, 64, 128, 256, 512, 1024]
    assert scaling.fit_slope(lengths, [3.0 * n**2 for n in lengths]) == pytest.approx(2)
    assert scaling.fit_slope(lengths, [0.5 * n for n in lengths]) == pytest.approx(1)
    assert scaling.fit_slope([10, 20, 40], [1.0, 1.0, 1.0]) == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="two or more distinct lengths"):
        scaling.fit_slope([16, 16], [1.0, 2.0])
    assert scaling.fit_lengths(lengths, 128) == [256, 512, 1024]  # n > d
    assert scaling.fit_lengths(lengths, 128, fit_from=128) == [128, 256, 512, 1024]
    assert scaling.fit_lengths([16, 32], 128) == [16, 32]  # too few above d: the two largest
    # The FLOP formula's own slope over 256..1024 at d = 128 (the study's docstring: "about 1.7").
    flops = [scaling.forward_flops("self_attention", n, 128) for n in (256, 512, 1024)]
    assert 1.6 < scaling.fit_slope([256, 512, 1024], flops) < 1.75


def test_scaling_flags_are_checked_and_every_flag_has_help(capsys):
    args = length_scaling.parse_args(["--lengths", "64,16,32,16"])
    assert args.lengths == [16, 32, 64] and args.d_model == 128 and args.num_heads == 4 and args.kernel_size == 3
    assert (args.batch_size, args.jit_compile, args.warmup_repeats, args.name) == (8, False, 1, "scaling")
    assert args.out.parts[-4:] == ("benchmarks", "attention_family", "length_scaling", "results")
    for argv, message in (
        (["--d-model", "128", "--num-heads", "3"], "`d_model` must be divisible by `num_heads`"),
        (["--lengths", "16"], "two or more distinct lengths"),
        (["--repeats", "0"], "--repeats must be >= 1. Received: 0"),
        (["--warmup-repeats", "-1"], "--warmup-repeats must be >= 0. Received: -1"),
        (["--batch-size", "0"], "`batch_size` must be an int >= 1"),
    ):
        with pytest.raises(SystemExit):
            length_scaling.parse_args(argv)
        assert message in capsys.readouterr().err
    for parser in (length_scaling.build_parser(), attention_scores.build_parser()):
        missing = [a.dest for a in parser._actions if not a.help]
        assert missing == [], f"{parser.prog}: flags without --help text: {missing}"


def test_scaling_smoke_run_writes_every_model_and_length_the_cpu_and_the_plot(tmp_path, capsys):
    argv = ["--lengths", "16,32", "--repeats", "1", "--warmup-repeats", "0", "--steps", "1", "--d-model", "16"]
    argv += ["--num-heads", "2", "--batch-size", "2", "--out", str(tmp_path)]
    status, printed = run_main(length_scaling.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    assert "log-log slope of time over n = 16..32" in printed and "O(log_k n)" in printed
    written = json.loads((tmp_path / "scaling.json").read_text())
    assert written["command"] == "python -m benchmarks.attention_family.length_scaling " + " ".join(argv)
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["settings"]["width"] == 16 and written["settings"]["dtype"] == "float32"
    assert written["lengths"] == [16, 32]
    assert list(written["models"]) == ["self_attention", "gru", "conv"]
    for name, model in written["models"].items():
        assert len(model["ms_per_step_median"]) == len(model["ms_per_step_repeats"]) == 2
        assert all(ms > 0 for ms in model["ms_per_step_median"]) and all(
            len(r) == 1 for r in model["ms_per_step_repeats"]
        )
        assert all(rate > 0 for rate in model["gflops_per_second"]) and model["parameters"] > 0
        assert set(model["paper_table_1"]) >= {"complexity_per_layer", "sequential_operations", "maximum_path_length"}
        assert model["slope"]["lengths"] == [16, 32] and np.isfinite(model["slope"]["measured"])
    assert written["models"]["self_attention"]["paper_table_1"]["complexity_per_layer"] == "O(n^2 d)"
    assert written["models"]["gru"]["paper_table_1"]["sequential_operations"] == "O(n)"
    attention, gru = (written["models"][name]["ms_per_step_median"] for name in ("self_attention", "gru"))
    assert written["ratios"]["self_attention_over_gru"] == pytest.approx([a / g for a, g in zip(attention, gru)])
    assert (tmp_path / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- scores (each score trained)


def test_scores_flags_are_checked_and_the_runs_rotate_the_scores_from_seed_to_seed(capsys):
    args = attention_scores.parse_args([])
    assert args.scores == ["scaled_dot", "dot", "additive", "bilinear", "cosine"] and args.seeds == [0, 1]
    assert (args.preset, args.epochs, args.steps_per_epoch, args.beam_size) == ("small", 4, 200, 4)
    args = attention_scores.parse_args(["--scores", "cosine, dot,cosine", "--seeds", "3,1,3"])
    assert args.scores == ["cosine", "dot"] and args.seeds == [3, 1]
    for argv, message in (
        (["--scores", "dot,luong"], "expected comma-separated values of scaled_dot, dot, additive"),
        (["--seeds", "a"], "expected comma-separated ints"),
        (["--epochs", "0"], "`epochs` must be an int >= 1. Received: epochs=0"),
        (["--train-size", "-1"], "`train_size` must be an int >= 0. Received: train_size=-1"),
    ):
        with pytest.raises(SystemExit):
            attention_scores.parse_args(argv)
        assert message in capsys.readouterr().err
    assert timing.run_orders(["a", "b", "c"], [0, 1, 2, 3]) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"),
        (2, "c"), (2, "a"), (2, "b"), (3, "a"), (3, "b"), (3, "c"),
    ]  # fmt: skip


@pytest.mark.slow
def test_scores_smoke_run_trains_each_score_and_writes_its_figures(tmp_path, capsys):
    argv = ["--preset", "tiny", "--epochs", "1", "--steps-per-epoch", "4", "--seeds", "0"]
    argv += ["--scores", "scaled_dot,additive", "--train-size", "300", "--test-size", "60", "--beam-size", "1"]
    status, printed = run_main(attention_scores.main, argv + ["--out", str(tmp_path)], capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    assert any(line.startswith("scaled_dot") and line.rstrip().endswith("1.00x") for line in printed.splitlines())
    written = json.loads((tmp_path / "attention_scores.json").read_text())
    assert written["command"] == "python -m benchmarks.attention_family.scores " + " ".join(
        argv + ["--out", str(tmp_path)]
    )
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    settings = written["settings"]
    assert settings["precision"] == "float32" and settings["steps"] == 4 and settings["preset"] == "tiny"
    assert settings["train_config"]["precision"] == "float32" and settings["train_config"]["epochs"] == 1
    assert settings["order"] == [[0, "scaled_dot"], [0, "additive"]]
    assert list(written["scores"]) == ["scaled_dot", "additive"] and len(written["runs"]) == 2
    for run in written["runs"]:
        assert run["steps"] == 4 and run["test_sentences"] == 60
        assert 0 <= run["exact_match_percent"] <= 100 and 0 <= run["bleu"] <= 100
        assert run["ms_per_step_median"] > 0 and run["wall_seconds"] > run["train_seconds"] > 0
    runs = {run["score"]: run for run in written["runs"]}
    assert runs["scaled_dot"]["vocab_sizes"] == runs["additive"]["vocab_sizes"]  # one vocabulary per seed
    for score, summary in written["scores"].items():
        assert summary["seeds"] == [0] and summary["parameters"] == [runs[score]["parameters"]]
        assert summary["exact_match_percent"] == {
            "seeds": [runs[score]["exact_match_percent"]],
            "mean": runs[score]["exact_match_percent"],
        }
        assert summary["bleu"]["mean"] == runs[score]["bleu"]
        assert summary["ms_per_step_median"] == pytest.approx(runs[score]["ms_per_step_median"])
    # The additive score adds W, U ([H, K, K] each) and v ([H, K]) to each of the 3 attention sublayers of a block
    # pair (encoder self, decoder self, encoder-decoder).
    config = preset("tiny")
    head = config.d_model // config.num_heads
    additive_weights = 3 * config.num_blocks * config.num_heads * (2 * head * head + head)
    assert runs["additive"]["parameters"] - runs["scaled_dot"]["parameters"] == additive_weights
    scores = written["scores"]
    assert scores["scaled_dot"]["ms_per_step_over_scaled_dot"] == 1.0
    assert scores["additive"]["ms_per_step_over_scaled_dot"] == pytest.approx(
        scores["additive"]["ms_per_step_median"] / scores["scaled_dot"]["ms_per_step_median"]
    )
