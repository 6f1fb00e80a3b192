"""The paper's convolutional localisation net, the ST-CNN and its controls, and `benchmarks.vision.stn`.

Not of accuracy or of where the glimpse ends up: the benchmark measures that. conftest.py puts
`benchmarks/` on `sys.path`.
"""

import json

import keras
import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import cluttered
from benchmarks.vision.stn import __main__ as vision_stn
from keras_transformer.vision import SpatialTransformer
from keras_transformer.vision.cluttered import generate
from keras_transformer.vision.models import build_classifier, build_stn_classifier
from keras_transformer.vision.spatial import IDENTITY
from keras_transformer.vision.st_cnn import build_st_cnn

IDENTITY_THETA = np.reshape(IDENTITY, (2, 3))


def _images(n=3, size=20, seed=0):
    return np.random.default_rng(seed).random((n, size, size, 1)).astype("float32")


# ---------------------------------------------------------------- the convolutional localisation net


def test_convolutional_localisation_starts_at_the_identity_and_has_the_papers_widths():
    stn = SpatialTransformer(localization="convolutional")
    images = _images()
    outputs, theta = stn(images, return_attention_scores=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(theta), np.tile(IDENTITY_THETA, (3, 1, 1)), atol=1e-7)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), images, atol=1e-5)  # the identity resamples
    assert stn.localization_filters == (20, 20) and stn.localization_units == 50
    pooled = SpatialTransformer()
    assert (
        pooled.localization == "pooled" and pooled.localization_filters == (8, 16) and pooled.localization_units == 32
    )
    # pool, 5x5 conv (20), pool, 5x5 conv (20), flatten over a 5x5 grid (20 px / 4), dense 50, dense 6
    expected = (25 * 1 * 20 + 20) + (25 * 20 * 20 + 20) + (5 * 5 * 20 * 50 + 50) + (50 * 6 + 6)
    assert stn.count_params() == expected


def test_convolutional_localisation_reads_where_the_object_is_through_its_dense_layer():
    """Two images that differ only in where a blob lies get different transforms once the last layer is not zero."""
    stn = SpatialTransformer(localization="convolutional", localization_rate=1.0)
    left, right = np.zeros((1, 16, 16, 1), "float32"), np.zeros((1, 16, 16, 1), "float32")
    left[0, 6:10, 1:5], right[0, 6:10, 11:15] = 1.0, 1.0
    stn(left)
    stn.theta_dense.kernel.assign(np.random.default_rng(0).normal(size=(50, 6)).astype("float32"))
    theta_left = keras.ops.convert_to_numpy(stn.localize(left))
    theta_right = keras.ops.convert_to_numpy(stn.localize(right))
    assert np.abs(theta_left - theta_right).max() > 1e-3


def test_convolutional_localisation_round_trips_its_config_and_a_saved_model(tmp_path):
    stn = SpatialTransformer(output_size=(6, 6), localization="convolutional", localization_units=8, name="stn")
    config = stn.get_config()
    assert config["localization"] == "convolutional" and config["localization_units"] == 8
    assert SpatialTransformer.from_config(config).get_config() == config
    images = keras.Input((20, 20, 1))
    model = keras.Model(images, stn(images))
    stn.theta_dense.kernel.assign(np.full((8, 6), 0.01, "float32"))  # not the identity, so the check is not trivial
    path = tmp_path / "stn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = _images()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)), rtol=1e-5, atol=1e-6
    )


def test_convolutional_localisation_needs_a_known_size_and_keeps_it():
    with pytest.raises(ValueError, match=r'localization="convolutional"\) needs images of a known height and width'):
        SpatialTransformer(localization="convolutional").build((None, None, None, 1))
    stn = SpatialTransformer(localization="convolutional")
    stn(_images(size=20))
    with pytest.raises(ValueError, match="was built for 20x20 images. Received: 24x24"):
        stn(_images(size=24))
    with pytest.raises(ValueError, match=r"one of \('pooled', 'convolutional'\). Received: localization='dense'"):
        SpatialTransformer(localization="dense")


# ---------------------------------------------------------------- the ST-CNN and its controls


def _fit_one_step(classifier, size):
    data = generate(32, size=size, seed=0, object_scale=(0.3, 0.4))
    model = classifier.model
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data.images, data.labels, batch_size=32, epochs=1, verbose=0)
    return data


@pytest.mark.parametrize("transform", ["learned", "identity", "none"])
def test_st_cnn_outputs_logits_and_the_glimpse_footprint_and_only_the_learned_transform_moves(transform):
    keras.utils.set_random_seed(0)
    classifier = build_st_cnn(transform, image_size=(24, 24), glimpse_size=(8, 8), filters=(4,), units=8)
    data = _fit_one_step(classifier, 24)
    outputs = classifier.attention_model.predict(data.images[:5], verbose=0)
    assert outputs["logits"].shape == (5, 10) and outputs["attention_map"].shape == (5, 24, 24)
    if transform == "none":
        assert "spatial_transformer" not in [layer.name for layer in classifier.model.layers]
        np.testing.assert_array_equal(outputs["attention_map"], 1.0)  # it reads every pixel
        return
    transformer = classifier.model.get_layer("spatial_transformer")
    theta = keras.ops.convert_to_numpy(transformer.localize(data.images[:5]))
    moved = np.abs(theta - IDENTITY_THETA).max()
    if transform == "identity":
        assert moved == 0.0 and not transformer.trainable_weights
        np.testing.assert_array_equal(outputs["attention_map"], 1.0)  # the glimpse covers the canvas
    else:
        assert moved > 1e-4 and transformer.trainable_weights


def test_st_cnn_saves_and_loads_with_its_transform(tmp_path):
    classifier = build_st_cnn(image_size=(20, 20), glimpse_size=(6, 6), filters=(4,), units=8)
    _fit_one_step(classifier, 20)
    x = _images(size=20)
    path = tmp_path / "st_cnn.keras"
    classifier.attention_model.save(path)
    loaded = keras.saving.load_model(path)
    for key in ("logits", "attention_map"):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(loaded(x)[key]),
            keras.ops.convert_to_numpy(classifier.attention_model(x)[key]),
            rtol=1e-5,
            atol=1e-5,
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"transform": "stn"}, r"one of \('learned', 'identity', 'none'\). Received: transform='stn'"),
        (
            {"image_size": (60,)},
            r"`image_size` must be a tuple of 2 ints >= 1. Received: image_size=\(60,\)",
        ),
        ({"glimpse_size": (0, 4)}, r"`glimpse_size` must be a tuple of 2 ints >= 1. Received: glimpse_size=\(0, 4\)"),
        ({"filters": ()}, r"`filters` must be a non-empty tuple of ints >= 1. Received: filters=\(\)"),
        ({"units": 2.5}, r"`units` must be an int >= 1. Received: units=2.5"),
    ],
)
def test_st_cnn_rejects_bad_arguments_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_st_cnn(**kwargs)


# ---------------------------------------------------------------- the one builder of both heads


def _built_alike(first, second):
    """Two classifiers of the same layers, weights and outputs (on 3 random canvases)."""
    assert [(layer.name, type(layer)) for layer in first.model.layers] == [
        (layer.name, type(layer)) for layer in second.model.layers
    ]
    assert first.model.name == second.model.name and first.attention_model.name == second.attention_model.name
    for got, want in zip(first.model.weights, second.model.weights, strict=True):
        assert got.path == want.path
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want))
    x = _images(size=first.model.input_shape[1] or 20)
    for key, value in first.attention_model(x).items():
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(value), second.attention_model(x)[key])


@pytest.mark.parametrize("block", ["residual", "plain"])
def test_build_classifier_stn_is_the_one_builders_pooled_head(block):
    sizes = dict(num_classes=4, filters=(8, 16), glimpse_size=(12, 12))
    keras.utils.set_random_seed(0)
    classifier = build_classifier("stn", block=block, **sizes)
    keras.utils.set_random_seed(0)
    name = "classifier_stn" if block == "residual" else "classifier_stn_plain"
    _built_alike(classifier, build_stn_classifier("pooled", block=block, name=name, **sizes))
    assert classifier.model.count_params() == {"residual": 3731, "plain": 3595}[block]  # as before the one builder


@pytest.mark.parametrize("transform, params", [("learned", 47546), ("identity", 47546), ("none", 4746)])
def test_build_st_cnn_is_the_one_builders_dense_head(transform, params):
    sizes = dict(image_size=(24, 24), glimpse_size=(8, 8), filters=(4,), units=8)
    keras.utils.set_random_seed(0)
    classifier = build_st_cnn(transform, **sizes)
    keras.utils.set_random_seed(0)
    name = {"learned": "st_cnn", "identity": "st_cnn_identity", "none": "cnn"}[transform]
    direct = build_stn_classifier("dense", transform, block="plain", localization="convolutional", name=name, **sizes)
    _built_alike(classifier, direct)
    # 24x24 canvas: the localisation net (pool, conv 5x5 x20, pool, conv 5x5 x20, dense 50 over 6x6,
    # dense 6) 46,896; the CNN on the 8x8 glimpse (or the 24x24 canvas): conv 3x3 x4, pool, dense 8, dense 10.
    assert classifier.model.count_params() == params  # as before the one builder


def test_the_pooled_head_takes_any_size_and_the_dense_head_needs_one():
    classifier = build_stn_classifier("pooled", transform="none", filters=(4,), num_classes=3)
    outputs = classifier.attention_model(np.zeros((2, 13, 11, 1), "float32"))
    assert tuple(outputs["logits"].shape) == (2, 3)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(outputs["attention_map"]), 1.0)  # every pixel read
    with pytest.raises(ValueError, match=r'`image_size` must be \(height, width\) for head="dense"'):
        build_stn_classifier("dense")
    with pytest.raises(ValueError, match=r"`head` must be one of \('pooled', 'dense'\). Received: head='flat'"):
        build_stn_classifier("flat")


# ---------------------------------------------------------------- the benchmark


def test_flags_have_the_papers_task_every_flag_has_help_and_bad_flags_exit_with_a_clear_message(capsys):
    args = vision_stn.parse_args([])
    assert args.models == ["learned", "identity", "none"] and args.seeds == [0, 1]
    assert (args.size, args.object_scale, args.clutter, args.fragment_size) == (60, [0.25, 0.35], 8, 8)
    assert (args.steps, args.batch_size, args.learning_rate, args.glimpse) == (10000, 64, 1e-3, 12)
    assert (args.filters, args.units, args.localization_rate, args.curve_every) == ([32, 32], 256, 0.1, 1000)
    for argv, message in (
        (["--models", "learned,stn"], "expected comma-separated values of learned, identity, none"),
        (["--fragment-size", "0"], "--fragment-size must be in [1, --size]. Received: 0"),
        (["--fragment-size", "61"], "--fragment-size must be in [1, --size]. Received: 61"),
        (["--glimpse", "0"], "--glimpse must be >= 1. Received: 0"),
        (["--localization-rate", "0"], "--localization-rate must be in (0, 1]. Received: 0.0"),
        (["--curve-every", "20000"], "--curve-every must be at most --steps (10000). Received: 20000"),
        (["--filters", "8,0"], "--filters must be positive. Received: [8, 0]"),
        (["--name", "a/b"], "--name must be letters, digits, _ and -. Received: 'a/b'"),
    ):
        with pytest.raises(SystemExit):
            vision_stn.parse_args(argv)
        assert message in capsys.readouterr().err, argv
    assert [a.dest for a in vision_stn.build_parser()._actions if not a.help] == []


def test_the_task_has_the_fragment_size_of_the_flag():
    args = vision_stn.parse_args(["--train-size", "4", "--validation-size", "4", "--test-size", "4"])
    data = cluttered.generate_task(args)
    reference = generate(4, split="test", size=60, seed=0, object_scale=(0.25, 0.35), clutter=8, fragment_size=8)
    np.testing.assert_array_equal(data["test"].images, reference.images)


def test_smoke_run_writes_every_run_its_placement_the_curves_and_both_figures(tmp_path, capsys):
    argv = ["--steps", "4", "--curve-every", "2", "--train-size", "64", "--validation-size", "16"]
    argv += ["--test-size", "16", "--seeds", "0", "--size", "24", "--glimpse", "8", "--filters", "4", "--units", "8"]
    argv += ["--out", str(tmp_path)]
    status, printed = run_main(vision_stn.main, argv, capsys)
    assert status == 0, printed
    results = json.loads((tmp_path / "vision_stn.json").read_text())
    assert [r["model"] for r in results["runs"]] == ["learned", "identity", "none"]
    assert results["cpu"] and results["settings"]["glimpse"] == 8
    learned = results["runs"][0]
    assert [p["step"] for p in learned["curve"]] == [2, 4] and "centre_error_px" in learned["curve"][0]
    assert set(learned["placement"]) >= {"centre_error_px", "identity_centre_error_px", "angle_correlation"}
    assert "placement" not in results["runs"][2]
    assert results["models"]["none"]["lift_over_cnn_points"] == [0.0]
    assert (tmp_path / "vision_stn.png").stat().st_size > 0 and (tmp_path / "vision_stn_curves.png").stat().st_size > 0
    assert "ST-CNN: glimpse centre error" in printed
