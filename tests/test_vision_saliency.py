"""Salient-object detection: the encoder-decoder, the scores of the task, and `benchmarks.vision.saliency`.

The model is checked against a NumPy forward pass of its diagram (float64 loops) on a size that
8 does not divide, for any size and batch, through its config and a `.keras` file; the scores
(MAE, max F with beta^2 = 0.3, the pointing game with its tolerance) against cases computed by
hand; the gradient saliency against a linear classifier's known gradient; the benchmark at tiny
settings and its flags.
"""

import json
import os

import keras
import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import machine
from benchmarks.vision.saliency import __main__ as vision_saliency
from benchmarks.vision.saliency.train import centre_prior, gradient_saliency
from keras_transformer.vision import CBAM, ResidualAttention
from keras_transformer.vision.saliency import SALIENCY_ATTENTIONS, UpsampleToSkip, build_saliency_model
from keras_transformer.vision.saliency_metrics import (
    mae,
    max_f_measure,
    pointing_hits,
    pointing_tolerance,
    precision_recall,
    saliency_scores,
    within_tolerance,
)

TINY = dict(filters=(2, 3, 4))


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------
def conv_same(x, kernel, bias, relu=True):
    """A 'same' convolution of x (H, W, C) by kernel (k, k, C, F), in float64 loops over the positions."""
    k = kernel.shape[0]
    pad = k // 2
    padded = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
    out = np.zeros(x.shape[:2] + (kernel.shape[-1],))
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = np.tensordot(padded[i : i + k, j : j + k], kernel, axes=3) + bias
    return np.maximum(out, 0.0) if relu else out


def max_pool_same(x):
    """2x2 max pooling, stride 2, the last row and column alone when the size is odd (ceil(H / 2) rows)."""
    h, w = (x.shape[0] + 1) // 2, (x.shape[1] + 1) // 2
    return np.array([[x[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].max(axis=(0, 1)) for j in range(w)] for i in range(h)])


def up_to(x, height, width):
    """Nearest-neighbour x2: output (i, j) reads x[i // 2, j // 2]."""
    return np.array([[x[i // 2, j // 2] for j in range(width)] for i in range(height)])


def reference_saliency(model, image, block):
    """The module docstring's diagram for attention "none", in NumPy float64, for one image (H, W, C)."""

    def conv(name, x, relu=True):
        kernel, bias = (np.asarray(w, np.float64) for w in model.get_layer(name).get_weights())
        return conv_same(x, kernel, bias, relu)

    skips = [conv("encoder_1_conv", image)]
    skips.append(conv("encoder_2_conv", max_pool_same(skips[0])))
    skips.append(conv("encoder_3_conv", max_pool_same(skips[1])))
    x = conv("bottleneck_conv", max_pool_same(skips[2]))
    for i in (3, 2, 1):
        skip = skips[i - 1]
        x = np.concatenate([up_to(x, *skip.shape[:2]), skip], axis=-1)
        fused = conv(f"decoder_{i}_fuse", x)
        if block == "plain":
            x = conv(f"decoder_{i}_conv", fused)
        else:
            x = np.maximum(fused + conv(f"decoder_{i}_conv", fused, relu=False), 0.0)
    logits = conv("logits", x, relu=False)[..., 0]
    return 1.0 / (1.0 + np.exp(-logits))


@pytest.mark.parametrize("block", ["plain", "residual"])
def test_the_encoder_decoder_computes_its_diagram_on_a_size_8_does_not_divide(block):
    keras.utils.set_random_seed(0)
    model = build_saliency_model("none", block=block, **TINY)
    image = np.random.default_rng(0).uniform(0, 1, (1, 9, 11, 1)).astype("float32")
    np.testing.assert_allclose(to_numpy(model(image))[0], reference_saliency(model, image[0], block), atol=1e-5)


def test_upsample_to_skip_repeats_each_cell_twice_and_cuts_to_the_skip():
    x = np.arange(2 * 3 * 2 * 2, dtype="float32").reshape(2, 3, 2, 2)
    skip = np.zeros((2, 5, 4, 7), "float32")
    out = to_numpy(UpsampleToSkip()(x, skip))
    assert out.shape == (2, 5, 4, 2)
    for b in range(2):
        for i in range(5):
            for j in range(4):
                np.testing.assert_array_equal(out[b, i, j], x[b, i // 2, j // 2])


@pytest.mark.parametrize("block", ["plain", "residual"])
@pytest.mark.parametrize("attention", SALIENCY_ATTENTIONS)
@pytest.mark.parametrize("shape", [(1, 13, 17, 1), (2, 16, 16, 1), (1, 7, 5, 1)])
def test_every_variant_maps_any_size_and_batch_to_probabilities_of_the_same_size(attention, shape, block):
    model = build_saliency_model(attention, block=block, **TINY)
    images = np.random.default_rng(1).uniform(0, 1, shape).astype("float32")
    out = to_numpy(model(images))
    assert out.shape == shape[:3]
    assert np.all((out > 0) & (out < 1))


def test_the_attention_sits_in_each_decoder_block():
    kinds = {a: build_saliency_model(a, **TINY) for a in SALIENCY_ATTENTIONS}
    cbam = [layer.name for layer in kinds["cbam"].layers if isinstance(layer, CBAM)]
    residual = [layer.name for layer in kinds["residual"].layers if isinstance(layer, ResidualAttention)]
    assert cbam == ["decoder_3_cbam", "decoder_2_cbam", "decoder_1_cbam"]
    assert residual == [f"decoder_{i}_residual_attention" for i in (3, 2, 1)]
    assert not any(isinstance(layer, (CBAM, ResidualAttention)) for layer in kinds["none"].layers)
    three = build_saliency_model("cbam", channels=3, **TINY)
    assert to_numpy(three(np.ones((1, 9, 9, 3), "float32"))).shape == (1, 9, 9)


@pytest.mark.parametrize(("attention", "block"), [("none", "plain"), ("cbam", "residual"), ("residual", "plain")])
def test_config_round_trip_and_keras_file_give_the_same_maps(attention, block, tmp_path):
    model = build_saliency_model(attention, block=block, **TINY)
    images = np.random.default_rng(2).uniform(0, 1, (2, 11, 9, 1)).astype("float32")
    expected = to_numpy(model(images))
    rebuilt = keras.Model.from_config(model.get_config())
    rebuilt.set_weights(model.get_weights())
    np.testing.assert_allclose(to_numpy(rebuilt(images)), expected, atol=1e-6)
    path = tmp_path / f"saliency_{attention}.keras"
    model.save(path)
    np.testing.assert_allclose(to_numpy(keras.models.load_model(path)(images)), expected, atol=1e-6)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"attention": "se"}, r"`attention` must be one of \('none', 'cbam', 'residual'\). Received: attention='se'"),
        ({"filters": (8, 16)}, r"Received: filters=\(8, 16\)"),
        ({"filters": (8, 0, 4)}, r"Received: filters=\(8, 0, 4\)"),
        ({"block": "dense"}, r"`block` must be one of \('plain', 'residual'\). Received: block='dense'"),
    ],
)
def test_bad_model_arguments_are_errors_naming_the_value(arguments, message):
    with pytest.raises(ValueError, match=message):
        build_saliency_model(**arguments)


# ---------------------------------------------------------------------------
# The scores
# ---------------------------------------------------------------------------
def test_a_perfect_map_and_an_all_zero_map_score_what_their_definitions_give():
    masks = np.zeros((2, 6, 6), bool)
    masks[0, 1:3, 1:4] = True  # 6 of 36 pixels
    masks[1, 4, 0:3] = True  # 3 of 36
    perfect = saliency_scores(masks.astype(float), masks)
    assert perfect["mae"] == 0.0 and perfect["max_f"] == 1.0 and perfect["pointing_hit_rate"] == 1.0
    zero = np.zeros((2, 6, 6))
    np.testing.assert_allclose(mae(zero, masks), [6 / 36, 3 / 36])
    # At t = 0 every pixel is on: mean precision (6/36 + 3/36) / 2 = 1/8, recall 1; above, nothing is on: F 0.
    best, threshold = max_f_measure(zero, masks)
    assert best == pytest.approx(1.3 * (1 / 8) / (0.3 * (1 / 8) + 1)) and threshold == 0.0
    # A flat map's maxima are every pixel: the share of the image within the tolerance of the mask.
    np.testing.assert_allclose(pointing_hits(zero, masks, 1.0), within_tolerance(masks, 1.0).mean(axis=(1, 2)))


def test_precision_recall_and_max_f_of_a_small_example_computed_by_hand():
    masks = np.array([[[1, 1], [0, 0]], [[1, 0], [0, 0]]], bool)
    maps = np.array([[[0.9, 0.41], [0.61, 0.0]], [[0.3, 0.0], [0.0, 0.0]]])
    np.testing.assert_allclose(mae(maps, masks), [(0.1 + 0.59 + 0.61 + 0.0) / 4, 0.7 / 4])
    thresholds = np.array([0.0, 0.2, 0.35, 0.5, 0.7, 0.95])
    precision, recall = precision_recall(maps, masks, thresholds)
    # Image 1: on at t: all four; {0.9, 0.41, 0.61}; {0.9, 0.41, 0.61}; {0.9, 0.61}; {0.9}; none.
    np.testing.assert_allclose(precision[0], [2 / 4, 2 / 3, 2 / 3, 1 / 2, 1, 0])
    np.testing.assert_allclose(recall[0], [1, 1, 1, 1 / 2, 1 / 2, 0])
    np.testing.assert_allclose(precision[1], [1 / 4, 1, 0, 0, 0, 0])
    np.testing.assert_allclose(recall[1], [1, 1, 0, 0, 0, 0])
    # F of the MEAN precision and recall over the images: best on (0, 0.3], P = (2/3 + 1) / 2 = 5/6, R = 1.
    best, threshold = max_f_measure(maps, masks)
    assert best == pytest.approx(1.3 * (5 / 6) / (0.3 * (5 / 6) + 1)) and threshold == pytest.approx(1 / 255)
    # (The mean of the images' F would differ: (13/18 + 1) / 2 = 0.861 there.)
    assert best != pytest.approx((1.3 * (2 / 3) / (0.3 * (2 / 3) + 1) + 1) / 2)


def test_the_pointing_game_hits_within_its_tolerance_of_a_mask_pixel():
    assert pointing_tolerance(224) == 15.0 and pointing_tolerance(40) == pytest.approx(15 * 40 / 224)
    masks = np.zeros((3, 5, 5), bool)
    masks[:, 0, 0] = True
    maps = np.zeros((3, 5, 5))
    maps[0, 2, 2] = 1.0  # sqrt(8) = 2.83 px from the mask
    maps[1, 1, 2] = 1.0  # sqrt(5) = 2.24 px
    maps[2, 4, 4] = maps[2, 0, 1] = 1.0  # two tied maxima: one 5.66 px away, one 1 px
    np.testing.assert_array_equal(pointing_hits(maps, masks, 15 * 40 / 224), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(pointing_hits(maps, masks, 3.0), [1.0, 1.0, 0.5])
    middle = np.zeros((1, 7, 7), bool)
    middle[0, 3, 3] = True
    assert within_tolerance(middle, 1.0).sum() == 5 and within_tolerance(middle, 1.5).sum() == 9
    assert within_tolerance(middle, 0.0).sum() == 1


def test_bad_score_inputs_are_errors_naming_them():
    masks = np.zeros((1, 3, 3), bool)
    with pytest.raises(ValueError, match=r"`maps` must lie in \[0, 1\]. Received: values from 2.0 to 2.0"):
        mae(np.full((1, 3, 3), 2.0), masks)
    with pytest.raises(ValueError, match=r"Received: maps \(1, 3, 4\), masks \(1, 3, 3\)"):
        saliency_scores(np.zeros((1, 3, 4)), masks)
    with pytest.raises(ValueError, match="Received: tolerance=-1"):
        pointing_hits(np.zeros((1, 3, 3)), masks, -1)


# ---------------------------------------------------------------------------
# The references of the benchmark
# ---------------------------------------------------------------------------
def test_gradient_saliency_of_a_linear_classifier_is_its_weights_of_the_true_class():
    rng = np.random.default_rng(3)
    weights = rng.normal(size=(4 * 5 * 2, 3)).astype("float32")
    classifier = keras.Sequential([keras.Input((4, 5, 2)), keras.layers.Flatten(), keras.layers.Dense(3)])
    classifier.layers[-1].set_weights([weights, np.zeros(3, "float32")])
    images = rng.uniform(0, 1, (3, 4, 5, 2)).astype("float32")
    labels = np.array([2, 0, 1])
    maps = gradient_saliency(classifier, images, labels, batch_size=2)
    for n, label in enumerate(labels):
        expected = np.abs(weights[:, label].reshape(4, 5, 2)).max(axis=-1)
        np.testing.assert_allclose(maps[n], expected / expected.max(), rtol=1e-5)


def test_the_centre_prior_peaks_at_the_centre_with_its_width():
    prior = centre_prior(5, 0.2)  # sigma = 1 pixel
    assert prior[2, 2] == 1.0
    assert prior[2, 3] == pytest.approx(np.exp(-0.5)) and prior[0, 0] == pytest.approx(np.exp(-4.0))


# ---------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------
def test_flags_are_checked_every_flag_has_help_and_size_60_is_the_papers_setting(capsys):
    args = vision_saliency.parse_args([])
    assert args.models == ["none", "cbam", "residual"] and args.seeds == [0, 1] and args.size == 40
    assert args.clutter == 6 and args.object_scale == [0.3, 0.45] and args.filters == [16, 32, 64]
    papers = vision_saliency.parse_args(["--size", "60"])
    assert papers.clutter == 10 and papers.object_scale == [0.25, 0.35]
    assert vision_saliency.parse_args(["--size", "60", "--clutter", "3"]).clutter == 3
    blocks = vision_saliency.parse_args(["--block", "residual"])
    assert args.block == "plain" and blocks.block == "residual"
    wide = vision_saliency.parse_args(["--size", "60", "--filters", "8,8,16"])
    stems = [vision_saliency.result_stem(a) for a in (args, papers, blocks, wide)]
    assert stems == [
        "vision_saliency",
        "vision_saliency_60",
        "vision_saliency_residual_blocks",
        "vision_saliency_60_filters_8_8_16",
    ]
    for argv, message in (
        (["--models", "none,se"], "expected comma-separated values of none, cbam, residual"),
        (["--seeds", "a"], "expected comma-separated ints"),
        (["--steps", "0"], "--steps must be >= 1. Received: 0"),
        (["--size", "8"], "--size must be >= 16. Received: 8"),
        (["--adam-learning-rate", "0"], "--adam-learning-rate must be > 0. Received: 0.0"),
        (["--eval-every", "50", "--steps", "10"], "--eval-every must be <= --steps (10). Received: 50"),
        (["--object-scale", "0.5,0.3"], "--object-scale must be 'low,high' with 0.1 <= low <= high <= 0.9"),
        (["--filters", "8,8"], "--filters must be three positive ints. Received: [8, 8]"),
        (["--clutter", "-1"], "--clutter must be >= 0. Received: -1"),
        (["--classifier-steps", "-1"], "--classifier-steps must be >= 0. Received: -1"),
        (["--block", "dense"], "argument --block: invalid choice: 'dense'"),
        (["--name", "a/b"], "--name must be letters, digits, _ and -. Received: 'a/b'"),
    ):
        with pytest.raises(SystemExit):
            vision_saliency.parse_args(argv)
        assert message in capsys.readouterr().err
    assert [a.dest for a in vision_saliency.build_parser()._actions if not a.help] == []


@pytest.mark.slow
def test_smoke_run_trains_each_model_scores_the_references_and_writes_the_json_and_figures(tmp_path, capsys):
    argv = [
        "--models",
        "cbam,none",
        "--seeds",
        "0,1",
        "--steps",
        "2",
        "--eval-every",
        "1",
        "--batch-size",
        "8",
        "--train-size",
        "16",
    ]
    argv += ["--validation-size", "8", "--test-size", "8", "--size", "20", "--filters", "2,2,4"]
    argv += ["--classifier-steps", "1", "--out", str(tmp_path)]
    status, printed = run_main(vision_saliency.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    written = json.loads((tmp_path / "vision_saliency_20_filters_2_2_4.json").read_text())
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["command"].endswith(" ".join(argv)) and set(written["versions"]) >= {"python", "tensorflow"}
    summary = written["summary"]
    assert list(summary) == ["cbam", "none", "gradient", "uniform", "centre_prior"]
    for name, entry in summary.items():
        assert len(entry["mae"]) == (1 if name in ("uniform", "centre_prior") else 2)
        assert entry["max_f_mean"] == pytest.approx(np.mean(entry["max_f"]))
        assert all(0 <= v <= 1 for s in ("mae", "max_f", "pointing_hit_rate") for v in entry[s])
    for run in written["runs"]:
        if "curve" in run:
            assert [p["step"] for p in run["curve"]] == [1, 2] and run["chosen_step"] in (1, 2)
            best = max(p["validation"]["max_f"] for p in run["curve"])
            assert run["validation_max_f_at_chosen_step"] == best
    assert written["pointing_tolerance_px"] == pytest.approx(15 * 20 / 224)
    for name in ("vision_saliency_20_filters_2_2_4.png", "vision_saliency_20_filters_2_2_4_maps.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
