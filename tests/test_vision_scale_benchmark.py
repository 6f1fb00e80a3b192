"""`python -m benchmarks.vision.scale`: its flags, its scale-weight summary, and a smoke run at tiny settings.

Not of accuracy: the study measures that.
"""

import json
import os
from types import SimpleNamespace

import keras
import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import machine
from benchmarks.vision.scale import __main__ as vision_scale
from benchmarks.vision.scale import train


def test_flags_have_the_task_defaults_every_flag_has_help_and_bad_flags_exit_with_a_clear_message(capsys):
    args = vision_scale.parse_args([])
    assert args.target == "pixel" and args.factors == [1, 1.5, 2] and args.extra_supervision == 1
    assert args.head_norm is True and args.temperature == 10
    canvas = vision_scale.parse_args(["--target", "canvas"])  # the first runs' settings
    assert canvas.factors == [1, 2, 4] and canvas.extra_supervision == 0
    args = canvas
    assert args.models == ["one", "average", "max", "attention"] and args.factors == [1, 2, 4]
    assert args.seeds == [0, 1] and args.size == 40 and args.object_scale == [0.15, 0.45] and args.clutter == 6
    assert (args.steps, args.batch_size, args.learning_rate, args.train_size, args.test_size) == (
        800,
        64,
        3e-3,
        6000,
        1000,
    )
    assert (
        args.filters == [16, 32, 32]
        and args.curve_every == 0
        and args.extra_supervision == 0
        and args.name == "vision_scale"
    )
    args = vision_scale.parse_args(["--models", "attention, one,attention", "--factors", "1,3", "--filters", "8,8"])
    assert args.models == ["attention", "one"] and args.factors == [1, 3] and args.filters == [8, 8]
    for argv, message in (
        (["--models", "one,sum"], "expected comma-separated values of one, average, max, attention"),
        (["--seeds", "a"], "expected comma-separated ints"),
        (["--factors", "2,4"], "--factors must be two or more distinct numbers >= 1, 1 first. Received: [2, 4]"),
        (["--factors", "1"], "--factors must be two or more distinct numbers >= 1, 1 first. Received: [1]"),
        (["--target", "canvas", "--factors", "1,1.5"], "--factors must be ints with --target canvas"),
        (["--curve-every", "10"], "--head-warmup and --curve-every are for --target canvas."),
        (["--target", "segment"], "argument --target: invalid choice: 'segment'"),
        (["--temperature", "0"], "--temperature must be > 0. Received: 0.0"),
        (["--factors", "1,16"], "--factors must be at most --size / 4 (10). Received: [1, 16]"),
        (["--object-scale", "0.2"], "--object-scale must be 'low,high'"),
        (["--object-scale", "0.4,0.2"], "--object-scale must be 'low,high'"),
        (["--steps", "0"], "--steps must be >= 1. Received: 0"),
        (["--size", "8"], "--size must be >= 16. Received: 8"),
        (["--clutter", "-1"], "--clutter must be >= 0. Received: -1"),
        (["--adam-learning-rate", "0"], "--adam-learning-rate must be > 0. Received: 0.0"),
        (["--extra-supervision", "-1"], "--extra-supervision must be >= 0. Received: -1.0"),
        (["--curve-every", "-1"], "--curve-every must be >= 0. Received: -1"),
        (["--filters", "8,0"], "--filters must be positive. Received: [8, 0]"),
        (["--name", "../x"], "--name must be letters, digits, _ and -. Received: '../x'"),
        (["--target", "canvas", "--head-warmup", "100", "--decay", "cosine"], "--head-warmup takes a constant rate"),
        (["--target", "canvas", "--head-warmup", "100", "--warmup-steps", "50"], "--head-warmup takes a constant rate"),
    ):
        with pytest.raises(SystemExit):
            vision_scale.parse_args(argv)
        assert message in capsys.readouterr().err, argv
    assert [a.dest for a in vision_scale.build_parser()._actions if not a.help] == []


def test_scale_weights_inside_and_outside_the_box_by_tercile_match_a_pixel_by_pixel_reference():
    rng = np.random.default_rng(0)
    n, size, grid, factors = 6, 6, 3, (1, 2, 4)
    logits = rng.normal(size=(n, grid, grid, len(factors)))
    weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    boxes = np.array([[0, 0, 2, 2], [1, 2, 5, 6], [3, 3, 4, 5], [0, 0, 6, 5], [2, 1, 4, 3], [4, 4, 6, 6]], float)
    heights = np.array([2.0, 5.0, 1.0, 6.0, 3.0, 2.5])
    test = SimpleNamespace(images=np.zeros((n, size, size, 1)), boxes=boxes, heights=heights)
    edges = np.quantile(heights, [1 / 3, 2 / 3])
    groups = train.terciles(heights, edges)
    assert sorted(groups.tolist()) == [0, 0, 1, 1, 2, 2] and groups[2] == 0 and groups[3] == 2
    summary = train.scale_weight_summary(weights, test, groups, factors)
    # The reference: each pixel takes the weights of the grid cell it lies in (cells of 2x2 pixels).
    inside, outside = np.zeros((n, 3)), np.zeros((n, 3))
    for i in range(n):
        top, left, bottom, right = boxes[i]
        ins, outs = [], []
        for row in range(size):
            for column in range(size):
                w = weights[i, row // 2, column // 2]
                (ins if top <= row < bottom and left <= column < right else outs).append(w)
        inside[i], outside[i] = np.mean(ins, 0), np.mean(outs, 0)
    log2 = inside @ np.log2(factors)
    for t, name in enumerate(train.TERCILES):
        np.testing.assert_allclose(summary["inside"][name], inside[groups == t].mean(0), rtol=1e-12)
        np.testing.assert_allclose(summary["outside"][name], outside[groups == t].mean(0), rtol=1e-12)
        assert summary["log2_factor_inside"][name] == pytest.approx(log2[groups == t].mean())
    assert summary["height_correlation"] == pytest.approx(np.corrcoef(log2, heights)[0, 1])
    np.testing.assert_allclose(summary["mean"], weights.reshape(-1, 3).mean(0), rtol=1e-12)
    collapsed = np.zeros_like(weights)
    collapsed[..., 1] = 1.0  # every position on the second scale
    assert train.scale_weight_summary(collapsed, test, groups, factors)["share_above_0_99"] == [0.0, 1.0, 0.0]
    # Weights all on the coarsest scale: log2 of its factor everywhere, and no correlation to measure.
    flat = np.zeros_like(weights)
    flat[..., -1] = 1.0
    coarse = train.scale_weight_summary(flat, test, groups, factors)
    assert coarse["log2_factor_inside"] == {"small": 2.0, "medium": 2.0, "large": 2.0}
    assert coarse["height_correlation"] is None


def test_weights_on_canvas_spread_a_grid_that_does_not_divide_the_canvas_as_the_layer_upsamples():
    weights = np.arange(3 * 3, dtype=float).reshape(1, 3, 3, 1)
    canvas = train.weights_on_canvas(weights, 7)[0, ..., 0]
    # Pixel p reads cell floor((p + 0.5) * 3 / 7): 0.21, 0.64 -> 0; 1.07, 1.5, 1.93 -> 1; 2.36, 2.79 -> 2.
    cells = [0, 0, 1, 1, 1, 2, 2]
    assert canvas.tolist() == [[3.0 * r + c for c in cells] for r in cells]


@pytest.mark.slow
def test_smoke_run_writes_the_accuracy_by_tercile_the_scale_weights_the_cpu_and_the_figure(tmp_path, capsys):
    argv = "--models one,attention --seeds 0 --steps 2 --batch-size 8 --train-size 32 --test-size 24".split()
    argv += ["--size", "24", "--factors", "1,2", "--filters", "4,8", "--clutter", "2", "--curve-every", "1"]
    argv += ["--target", "canvas"]
    argv += ["--validation-size", "8", "--name", "scale_smoke", "--out", str(tmp_path)]
    status, printed = run_main(vision_scale.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    written = json.loads((tmp_path / "scale_smoke.json").read_text())
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["command"].endswith(" ".join(argv)) and set(written["versions"]) >= {"python", "tensorflow"}
    assert written["settings"]["factors"] == [1, 2] and written["settings"]["object_scale"] == [0.15, 0.45]
    assert list(written["models"]) == ["one", "attention"] and len(written["runs"]) == 2
    low, high = written["tercile_edges_px"]
    assert 0.15 * 24 <= low <= high <= 0.45 * 24
    for run in written["runs"]:
        assert 0 <= run["test_accuracy_percent"] <= 100 and run["forward_flops"] > 0 and run["parameters"] > 0
        assert set(run["tercile_accuracy_percent"]) == {"small", "medium", "large"}
        assert [point["step"] for point in run["curve"]] == [1, 2]
        assert run["factors"] == ([1] if run["model"] == "one" else [1, 2])
        assert ("scale_weights" in run) == (run["model"] != "one")
    one, attention = (written["models"][name]["forward_flops"] for name in ("one", "attention"))
    assert one < attention  # the second scale's trunk and the attention head cost
    attention = next(run for run in written["runs"] if run["model"] == "attention")["scale_weights"]
    for key in ("inside", "outside"):
        for tercile, weights in attention[key].items():
            assert len(weights) == 2 and sum(weights) == pytest.approx(1.0), (key, tercile)
    assert (tmp_path / "scale_smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_extra_supervision_adds_each_scales_own_cross_entropy_computed_by_hand_from_its_features():
    args = vision_scale.parse_args(
        ["--target", "canvas", "--factors", "1,2", "--filters", "3", "--extra-supervision", "0.5"]
    )
    classifier, trained = train.compiled_scale_classifier(args, "average", 0, 4)
    assert isinstance(trained, train.ExtraSupervised) and trained.get_layer("logits") is not None
    rng = np.random.default_rng(1)
    x, y = rng.uniform(size=(3, 8, 8, 1)).astype("float32"), np.array([0, 3, 1])
    features = keras.Model(classifier.model.inputs, classifier.model.get_layer("scale_attention").input)(x)
    kernel, bias = (np.asarray(w, np.float64) for w in classifier.model.get_layer("logits").get_weights())

    def cross_entropy(logits):  # the mean over the batch of -log softmax(logits)[y]
        logits = logits - logits.max(-1, keepdims=True)
        return float(np.mean(np.log(np.exp(logits).sum(-1)) - logits[np.arange(len(y)), y]))

    # The coarse map is on a 4x4 grid: nearest upsampling repeats each cell twice each way before the mean.
    fine, coarse = (np.asarray(f, np.float64) for f in features)
    fused = (fine + coarse.repeat(2, axis=1).repeat(2, axis=2)) / 2
    expected = cross_entropy(fused.mean((1, 2)) @ kernel + bias)
    expected += 0.5 * sum(cross_entropy(f.mean((1, 2)) @ kernel + bias) for f in (fine, coarse))
    loss = trained.compute_loss(x, y, trained(x), training=False)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # The one-scale control trains its plain model: its own prediction is the fused one.
    _, plain = train.compiled_scale_classifier(args, "one", 0, 4)
    assert not isinstance(plain, train.ExtraSupervised)


@pytest.mark.slow
def test_smoke_run_per_pixel_reads_the_canvas_class_from_the_map_and_reports_the_cells_and_weights(tmp_path, capsys):
    argv = "--models one,max,attention --seeds 0 --steps 2 --batch-size 8 --train-size 32 --test-size 24".split()
    argv += ["--size", "24", "--filters", "4,8", "--clutter", "2", "--name", "pixel_smoke", "--out", str(tmp_path)]
    status, printed = run_main(vision_scale.main, argv, capsys)
    assert status == 0, printed[-3000:]
    written = json.loads((tmp_path / "pixel_smoke.json").read_text())
    assert written["settings"]["target"] == "pixel" and written["settings"]["factors"] == [1, 1.5, 2]
    assert written["settings"]["extra_supervision"] == 1.0
    for run in written["runs"]:
        assert 0 <= run["test_accuracy_percent"] <= 100 and 0 <= run["cells_correct"] <= 1
        assert 0 <= run["glyph_cells_correct"] <= 1 and run["forward_flops"] > 0
        if run["model"] != "one":
            weights = run["scale_weights"]
            assert len(weights["mean"]) == 3 and sum(weights["mean"]) == pytest.approx(1.0, abs=1e-4)
            assert all(0 <= share <= 1 for share in weights["share_above_0_99"])
    assert "factors 1,1.5,2" in printed
    assert (tmp_path / "pixel_smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
