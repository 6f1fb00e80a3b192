"""Attention to scale trained per position (keras_transformer.vision.scale_segmentation) against NumPy references.

The targets (pixel labels, a cell's class), the canvas's class read from a map, the fused map as
the weighted sum of each scale's score map (and the average and maximum baselines), the loss with
the extra supervision, shapes and errors, and the config and `.keras` round trips.
"""

import json

import keras
import numpy as np
import pytest

from keras_transformer.vision.scale import ScaleAttention, upsample_to_grid
from keras_transformer.vision.scale_segmentation import ScaleSegmenter, canvas_scores, cell_targets, pixel_labels

TINY = dict(num_classes=3, factors=(1, 1.5, 2), filters=(3, 4), units=4)


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_pixel_labels_and_each_cells_class_match_loops():
    rng = np.random.default_rng(0)
    masks = rng.uniform(size=(3, 7, 9)) > 0.8  # 7 x 9 in 2 x 2 cells: the last row and column are partial
    labels = np.array([2, 0, 1])
    maps = pixel_labels(masks, labels)
    assert maps.dtype == np.int32 and maps.shape == (3, 7, 9)
    for b in range(3):
        np.testing.assert_array_equal(maps[b], np.where(masks[b], labels[b] + 1, 0))
    cells = to_numpy(cell_targets(maps, 2))
    assert cells.shape == (3, 4, 5)
    for b, i, j in np.ndindex(cells.shape):
        block = maps[b, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
        assert cells[b, i, j] == (labels[b] + 1 if block.any() else 0)


def test_canvas_scores_are_the_mean_class_probability_without_the_background():
    scores = np.random.default_rng(1).normal(size=(2, 3, 4, 4)).astype("float32")
    expected = np.exp(log_softmax(scores.astype(np.float64)))[..., 1:].mean((1, 2))
    np.testing.assert_allclose(to_numpy(canvas_scores(scores)), expected, rtol=1e-5)


def test_scale_attention_fuses_the_values_with_weights_computed_from_the_features():
    rng = np.random.default_rng(2)
    features = [rng.normal(size=(2, 4, 4, 3)).astype("float32"), rng.normal(size=(2, 2, 2, 3)).astype("float32")]
    values = [rng.normal(size=(2, 4, 4, 5)).astype("float32"), rng.normal(size=(2, 2, 2, 5)).astype("float32")]
    layer = ScaleAttention(units=4)
    fused, weights = layer(features, return_attention_scores=True, values=values)
    _, same_weights = layer(features, return_attention_scores=True)  # the weights read the features only
    np.testing.assert_allclose(to_numpy(weights), to_numpy(same_weights), atol=1e-6)
    up = [values[0], values[1].repeat(2, axis=1).repeat(2, axis=2)]
    expected = sum(to_numpy(weights)[..., s, None] * up[s] for s in range(2))
    np.testing.assert_allclose(to_numpy(fused), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(ScaleAttention("max")(features, values=values)), np.maximum(*up), atol=1e-6)
    with pytest.raises(ValueError, match=r"`values` must hold one map per scale \(2\). Received: 1"):
        layer(features, values=values[:1])


@pytest.mark.parametrize("fusion", ["attention", "average", "max"])
def test_the_fused_map_is_each_scales_score_map_fused_over_the_scales(fusion):
    keras.utils.set_random_seed(0)
    model = ScaleSegmenter(**{**TINY, "fusion": fusion})
    images = np.random.default_rng(3).uniform(size=(2, 12, 12, 1)).astype("float32")
    out = model(images, return_details=True)
    assert out["scores"].shape == (2, 6, 6, 4) and out["scale_scores"].shape == (2, 3, 6, 6, 4)
    # Each scale by hand: the image resized to 12 / f (bilinear), the shared trunk, the 1x1 score layer, upsampled.
    scales = []
    for f in (1, 1.5, 2):
        resized = images if f == 1 else keras.ops.image.resize(images, (round(12 / f),) * 2, antialias=True)
        scores = model.score(model.trunk(resized))
        scales.append(to_numpy(upsample_to_grid(scores, 6, 6)))
    np.testing.assert_allclose(to_numpy(out["scale_scores"]), np.stack(scales, axis=1), atol=1e-5)
    weights = to_numpy(out["scale_weights"])
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    stacked = np.stack(scales, axis=-1)  # (B, h, w, K + 1, S)
    expected = {
        "attention": (stacked * weights[..., None, :]).sum(-1),
        "average": stacked.mean(-1),
        "max": stacked.max(-1),
    }[fusion]
    np.testing.assert_allclose(to_numpy(out["scores"]), expected, atol=1e-5)
    np.testing.assert_allclose(to_numpy(model(images)), to_numpy(out["scores"]), atol=1e-6)  # inference: the map


def test_the_loss_is_the_fused_maps_cross_entropy_plus_each_scales_weighted():
    keras.utils.set_random_seed(1)
    model = ScaleSegmenter(**{**TINY, "extra_weight": 0.4})
    model.compile(keras.optimizers.Adam(1e-2), metrics=["accuracy"])
    rng = np.random.default_rng(4)
    images = rng.uniform(size=(3, 12, 12, 1)).astype("float32")
    maps = pixel_labels(images[..., 0] > 0.8, np.array([0, 2, 1]))
    out = model(images, training=True)
    targets = to_numpy(cell_targets(maps, 2)).astype(int)  # (3, 6, 6)

    def cross_entropy(scores):  # the mean over every cell of -log softmax(scores)[target]
        log_p = log_softmax(to_numpy(scores))
        return np.take_along_axis(-log_p, targets[..., None], -1).mean()

    expected = cross_entropy(out["scores"]) + 0.4 * sum(cross_entropy(out["scale_scores"][:, s]) for s in range(3))
    np.testing.assert_allclose(float(model.compute_loss(images, maps, out)), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="takes no sample weights"):
        model.compute_loss(images, maps, out, sample_weight=np.ones(3))
    history = model.fit(images, maps, batch_size=3, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] and "accuracy" in history.history
    one = ScaleSegmenter(**{**TINY, "factors": (1,)})  # the control: one scale, its own map
    out = one(images, return_details=True)
    assert out["scale_weights"].shape == (3, 6, 6, 1) and np.all(to_numpy(out["scale_weights"]) == 1)
    np.testing.assert_allclose(float(one.compute_loss(images, maps, out)), cross_entropy(out["scores"]), rtol=1e-5)


def test_bad_arguments_name_the_value():
    for overrides, message in (
        ({"factors": (2, 1)}, "`factors` must be distinct numbers >= 1, 1 first. Received: factors=(2.0, 1.0)"),
        ({"factors": (1, 1)}, "`factors` must be distinct numbers >= 1, 1 first"),
        ({"factors": (1, 0.5)}, "`factors` must be a number >= 1. Received: factors=0.5"),
        ({"fusion": "sum"}, "`fusion` must be one of ('attention', 'average', 'max'). Received: fusion='sum'"),
        ({"extra_weight": -1}, "`extra_weight` must be a number >= 0. Received: extra_weight=-1"),
    ):
        with pytest.raises(ValueError) as error:
            ScaleSegmenter(**{**TINY, **overrides})
        assert message in str(error.value)
    with pytest.raises(ValueError, match=r"height and width must be known .* Received: images of shape \(None, None"):
        ScaleSegmenter(**TINY)(keras.Input((None, None, 1)))
    assert ScaleSegmenter(**{**TINY, "factors": (1,)})(keras.Input((None, None, 1))).shape[1:3] == (None, None)


def test_config_round_trip_and_keras_file(tmp_path):
    keras.utils.set_random_seed(2)
    model = ScaleSegmenter(**TINY, name="tiny")
    images = np.random.default_rng(5).uniform(size=(2, 12, 12, 1)).astype("float32")
    expected = model(images, return_details=True)
    config = model.get_config()
    assert ScaleSegmenter.from_config(json.loads(json.dumps(config))).get_config() == config
    assert config["factors"] == [1.0, 1.5, 2.0] and config["fusion"] == "attention"
    assert config["head_norm"] is True and config["temperature"] == 10.0
    model.save(tmp_path / "segmenter.keras")
    out = keras.saving.load_model(tmp_path / "segmenter.keras")(images, return_details=True)
    for key in ("scores", "scale_scores", "scale_weights"):
        np.testing.assert_allclose(to_numpy(out[key]), to_numpy(expected[key]), atol=1e-6)
