"""Dynamic Capacity Networks (keras_transformer.vision.dynamic_capacity) and `python -m benchmarks.vision.dcn`.

The saliency against NumPy references of the paper's equation (the norm of the gradient of the
coarse prediction's entropy in each position's features: by finite differences and by the chain
rule written out with loops), the top-k choice, the patches and the mixed map, odd sizes and batch
1, errors, the config and `.keras` round trips, the FLOP counts against TensorFlow's profiler, the
training loss's three terms, and the benchmark's flags, scores and a smoke run.
"""

import json
import os

import keras
import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import machine
from benchmarks.vision.dcn import __main__ as vision_dcn
from benchmarks.vision.dcn import train as vision_dcn_train
from keras_transformer.vision.dynamic_capacity import (
    DynamicCapacityNetwork,
    entropy_saliency,
    gather_positions,
    image_patches,
    scatter_positions,
)
from keras_transformer.vision.dynamic_capacity_flops import flop_counts

TINY = dict(
    num_classes=4, patch_size=4, coarse_factor=2, coarse_filters=(3,), fine_filters=(3, 4), features=3, top_units=5, k=2
)


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


# ---------------------------------------------------------------- NumPy references of the paper's equations


def conv_same(x, kernel, bias):
    """A stride-1 "same" convolution, explicit loops over positions: x [B, h, w, D], kernel [kh, kw, D, U]."""
    kh, kw = kernel.shape[:2]
    padded = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    out = np.zeros((*x.shape[:3], kernel.shape[3]))
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            out[:, i, j] = np.einsum("bxyd,xydu->bu", padded[:, i : i + kh, j : j + kw], kernel) + bias
    return out


def entropy_of_top(c, kernel, bias, dense, dense_bias, pool=np.mean):
    """H(softmax(g(c))), g = conv -> relu -> global pool (`np.mean` or `np.max`) -> dense: [B]."""
    z = pool(np.maximum(conv_same(c, kernel, bias), 0), axis=(1, 2)) @ dense + dense_bias
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return -(p * np.log(p)).sum(1)


def gradient_by_differences(c, *weights, step=1e-6, pool=np.mean):
    """dH/dc by central differences, [B, h, w, D]."""
    gradient = np.zeros_like(c)
    for index in np.ndindex(c.shape[1:]):
        delta = np.zeros_like(c)
        delta[(slice(None), *index)] = step
        plus, minus = entropy_of_top(c + delta, *weights, pool=pool), entropy_of_top(c - delta, *weights, pool=pool)
        gradient[(slice(None), *index)] = (plus - minus) / (2 * step)
    return gradient


def gradient_by_chain_rule(c, kernel, bias, dense, dense_bias):
    """dH/dc written out: dH/dz_k = -p_k (log p_k + H); through the dense layer, the average, the relu, the conv."""
    b, h, w, d = c.shape
    kh, kw = kernel.shape[:2]
    u = conv_same(c, kernel, bias)
    z = np.maximum(u, 0).mean((1, 2)) @ dense + dense_bias
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    entropy = -(p * np.log(p)).sum(1, keepdims=True)
    d_z = -p * (np.log(p) + entropy)  # (B, K)
    d_u = (d_z @ dense.T)[:, None, None, :] / (h * w) * (u > 0)  # (B, h, w, U)
    gradient = np.zeros_like(c)
    for i in range(h):  # u[i', j'] reads c[i' + a - kh//2, j' + e - kw//2] through kernel[a, e]
        for j in range(w):
            for a in range(kh):
                for e in range(kw):
                    ii, jj = i - a + kh // 2, j - e + kw // 2
                    if 0 <= ii < h and 0 <= jj < w:
                        gradient[:, i, j] += d_u[:, ii, jj] @ kernel[a, e].T
    return gradient


def top_weights(model):
    kernel, bias = (np.asarray(v, np.float64) for v in model.top_conv.get_weights())
    dense, dense_bias = (np.asarray(v, np.float64) for v in model.classifier.get_weights())
    return kernel, bias, dense, dense_bias


# ---------------------------------------------------------------- the saliency


def test_entropy_saliency_is_the_norm_of_the_entropy_gradient_by_both_references():
    rng = np.random.default_rng(0)
    c = rng.normal(size=(2, 3, 5, 2))  # an odd grid: the kernel's border matters
    kernel, bias = rng.normal(size=(3, 3, 2, 4)), rng.normal(size=4) * 0.3
    dense, dense_bias = rng.normal(size=(4, 3)), rng.normal(size=3)
    u = conv_same(c, kernel, bias)
    z = np.maximum(u, 0).mean((1, 2)) @ dense + dense_bias
    saliency, gradient = entropy_saliency(*(x.astype("float32") for x in (u, z, kernel, dense)))
    by_differences = gradient_by_differences(c, kernel, bias, dense, dense_bias)
    by_chain = gradient_by_chain_rule(c, kernel, bias, dense, dense_bias)
    np.testing.assert_allclose(by_chain, by_differences, atol=1e-7)  # the two references agree
    np.testing.assert_allclose(to_numpy(gradient), by_chain, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(to_numpy(saliency), np.linalg.norm(by_chain, axis=-1), rtol=1e-4, atol=1e-6)
    assert np.ptp(to_numpy(saliency)) > 1e-3  # the relu and the conv make it differ by position


def test_with_max_pooling_the_saliency_is_the_gradient_through_each_channels_largest_position():
    rng = np.random.default_rng(4)
    c = rng.normal(size=(3, 4, 5, 2))
    kernel, bias = rng.normal(size=(3, 3, 2, 6)), rng.normal(size=6) * 0.3 - 0.5  # some channels nowhere > 0
    dense, dense_bias = rng.normal(size=(6, 3)), rng.normal(size=3)
    u = conv_same(c, kernel, bias)
    z = np.maximum(u, 0).max((1, 2)) @ dense + dense_bias
    saliency, gradient = entropy_saliency(*(x.astype("float32") for x in (u, z, kernel, dense)), pooling="max")
    expected = gradient_by_differences(c, kernel, bias, dense, dense_bias, pool=np.max)
    np.testing.assert_allclose(to_numpy(gradient), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(to_numpy(saliency), np.linalg.norm(expected, axis=-1), rtol=1e-4, atol=1e-6)
    # Only positions inside the window of some channel's maximum get a gradient: with max pooling,
    # a position that no channel's winner reads through the 3x3 kernel has saliency 0.
    winners = (u == u.max((1, 2), keepdims=True)) & (u > 0)  # (B, h, w, U)
    near = np.zeros(u.shape[:3], bool)
    for b, i, j, _ in zip(*np.nonzero(winners)):
        near[b, max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2] = True
    assert not np.any(to_numpy(saliency)[~near]) and np.all(to_numpy(saliency)[near] >= 0)
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        entropy_saliency(*(x.astype("float32") for x in (u, z, kernel, dense)), pooling="sum")


def test_the_papers_variant_reads_the_full_resolution_canvas_with_strides_normalises_and_max_pools():
    keras.utils.set_random_seed(2)
    paper = {**TINY, "coarse_filters": (3, 5), "coarse_downsample": "stride", "top_pooling": "max", "batch_norm": True}
    model = DynamicCapacityNetwork(**paper)
    images = np.random.default_rng(5).uniform(size=(2, 12, 12, 1)).astype("float32")  # grid 3 x 3
    out = model(images, return_details=True)
    convs = [layer for layer in model.coarse_net.layers if "conv" in layer.name]
    assert not any(isinstance(layer, keras.layers.AveragePooling2D) for layer in model.coarse_net.layers)
    assert [layer.layer.strides for layer in convs] == [(2, 2), (1, 1)]  # log2(coarse_factor = 2) = 1 stride-2 conv
    assert [layer.layer.use_bias for layer in convs] == [False, False]  # batch normalisation's beta instead
    fine_units = [layer for layer in model.fine_net.layers if "conv" in layer.name]
    assert all(hasattr(layer, "norm") for layer in fine_units)
    only_coarse = DynamicCapacityNetwork(**{**paper, "batch_norm": "coarse"})  # one network named: the other plain
    only_coarse.build((None, 12, 12, 1))
    assert only_coarse.batch_norm == ("coarse",) and only_coarse.get_config()["batch_norm"] == ["coarse"]
    assert all(hasattr(layer, "norm") for layer in only_coarse.coarse_net.layers if "conv_" in layer.name)
    assert not any(hasattr(layer, "norm") for layer in only_coarse.fine_net.layers)
    # The top network: no normalisation, the global max of relu(conv) -> dense; the saliency's closed form.
    kernel, bias, dense, dense_bias = top_weights(model)
    coarse = to_numpy(out["coarse_features"])
    z = np.maximum(conv_same(coarse, kernel, bias), 0).max((1, 2)) @ dense + dense_bias
    np.testing.assert_allclose(to_numpy(out["coarse_logits"]), z, rtol=1e-4, atol=1e-5)
    expected = np.linalg.norm(gradient_by_differences(coarse, kernel, bias, dense, dense_bias, pool=np.max), axis=-1)
    np.testing.assert_allclose(to_numpy(out["saliency"]), expected, rtol=1e-3, atol=1e-6)
    # Batch normalisation: batch statistics in training, the moving averages (here still 0 and 1) otherwise.
    inference = to_numpy(model(images, return_details=True)["coarse_features"])
    np.testing.assert_allclose(inference, coarse, atol=1e-6)
    assert not np.allclose(to_numpy(model(images, training=True)["coarse_features"]), coarse, atol=1e-3)
    for overrides, message in (
        ({"coarse_factor": 3, "patch_size": 12}, "must be a power of 2"),
        ({"coarse_filters": ()}, "hold at least log2(coarse_factor) convolutions"),
        ({"top_pooling": "sum"}, "`top_pooling` must be one of ('average', 'max')"),
        ({"coarse_downsample": "skip"}, "`coarse_downsample` must be one of ('pool', 'stride')"),
        ({"batch_norm": ["fine", "top"]}, "`batch_norm` must be one of ('coarse', 'fine'). Received: batch_norm='top'"),
    ):
        with pytest.raises(ValueError) as error:
            DynamicCapacityNetwork(**{**paper, **overrides})
        assert message in str(error.value)


def test_the_dcn_reads_the_k_most_salient_positions_of_its_coarse_prediction():
    keras.utils.set_random_seed(3)
    model = DynamicCapacityNetwork(**{**TINY, "k": 3})
    images = np.random.default_rng(1).uniform(size=(2, 13, 10, 1)).astype("float32")  # grid 4 x 3, padded
    out = model(images, return_details=True)
    coarse = to_numpy(out["coarse_features"])
    assert coarse.shape == (2, 4, 3, 3)
    gradient = gradient_by_differences(coarse, *top_weights(model))
    expected = np.linalg.norm(gradient, axis=-1)
    np.testing.assert_allclose(to_numpy(out["saliency"]), expected, rtol=1e-3, atol=1e-7)
    positions = to_numpy(out["positions"]).astype(int)
    np.testing.assert_array_equal(positions, np.argsort(-expected.reshape(2, -1), axis=1)[:, :3])
    kernel, bias, dense, dense_bias = top_weights(model)
    z = np.maximum(conv_same(coarse, kernel, bias), 0).mean((1, 2)) @ dense + dense_bias
    np.testing.assert_allclose(to_numpy(out["coarse_logits"]), z, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- patches and the mixed map


def test_patches_are_the_image_blocks_and_gather_and_scatter_move_whole_rows():
    images = np.arange(2 * 7 * 10 * 2, dtype="float32").reshape(2, 7, 10, 2) + 1
    patches = to_numpy(image_patches(images, 3))  # padded to 9 x 12: grid 3 x 4
    padded = np.pad(images, ((0, 0), (0, 2), (0, 2), (0, 0)))
    assert patches.shape == (2, 12, 3, 3, 2)
    for n in range(12):
        row, column = divmod(n, 4)
        np.testing.assert_array_equal(patches[:, n], padded[:, 3 * row : 3 * row + 3, 3 * column : 3 * column + 3])
    positions = np.array([[5, 0], [11, 3]], "int32")
    gathered = to_numpy(gather_positions(patches.astype("float32"), positions))
    np.testing.assert_array_equal(gathered, np.stack([patches[b, positions[b]] for b in range(2)]))
    coarse = np.random.default_rng(0).normal(size=(2, 12, 3)).astype("float32")
    fine = np.random.default_rng(1).normal(size=(2, 2, 3)).astype("float32")
    expected = coarse.copy()
    for b in range(2):
        for slot in range(2):
            expected[b, positions[b, slot]] = fine[b, slot]
    np.testing.assert_allclose(to_numpy(scatter_positions(coarse, fine, positions)), expected, atol=1e-6)


def test_the_mixed_map_holds_the_fine_features_of_the_chosen_patches_and_the_coarse_ones_elsewhere():
    keras.utils.set_random_seed(0)
    model = DynamicCapacityNetwork(**TINY)
    images = np.random.default_rng(2).uniform(size=(3, 9, 11, 1)).astype("float32")  # grid 3 x 3
    out = model(images, return_details=True)
    mixed, coarse = to_numpy(out["features"]).reshape(3, 9, -1), to_numpy(out["coarse_features"]).reshape(3, 9, -1)
    positions = to_numpy(out["positions"]).astype(int)
    padded = np.pad(images, ((0, 0), (0, 3), (0, 1), (0, 0)))
    for b in range(3):
        for n in range(9):
            if n in positions[b]:
                row, column = divmod(n, 3)
                patch = padded[b : b + 1, 4 * row : 4 * row + 4, 4 * column : 4 * column + 4]
                np.testing.assert_allclose(mixed[b, n], to_numpy(model.fine_net(patch)).reshape(-1), atol=1e-6)
            else:
                np.testing.assert_array_equal(mixed[b, n], coarse[b, n])
    # Chosen positions of our own, also through the benchmark's batches: the same map with those patches.
    batched = vision_dcn_train.details(model, images, batch_size=2, positions=np.array([[0, 8], [1, 2], [4, 5]]))
    np.testing.assert_array_equal(batched["positions"], [[0, 8], [1, 2], [4, 5]])
    forced = model(images, return_details=True, positions=np.array([[0, 8]] * 3, "int32"))
    np.testing.assert_array_equal(to_numpy(forced["positions"]), [[0, 8]] * 3)
    np.testing.assert_allclose(
        to_numpy(forced["features"])[:, 0, 0], to_numpy(forced["fine_features"])[:, 0], atol=1e-6
    )


# ---------------------------------------------------------------- shapes, errors, saving


@pytest.mark.parametrize("mode", ["dcn", "coarse", "fine"])
def test_every_mode_takes_odd_sizes_and_batch_one(mode):
    model = DynamicCapacityNetwork(**{**TINY, "mode": mode})
    for shape, grid in (((1, 13, 17, 1), (4, 5)), ((2, 4, 4, 1), (1, 1)), ((1, 5, 8, 1), (2, 2))):
        k = min(2, grid[0] * grid[1])
        out = model(np.ones(shape, "float32"), return_details=True, k=k)
        assert out["logits"].shape == (shape[0], 4) and out["features"].shape == (shape[0], *grid, 3)
        if mode == "dcn":
            assert out["saliency"].shape == (shape[0], *grid) and out["positions"].shape == (shape[0], k)
        assert model.grid(*shape[1:3]) == grid
    assert model(np.ones((1, 13, 17, 1), "float32")).shape == (1, 4)


def test_bad_arguments_and_a_k_larger_than_the_grid_name_the_value():
    model = DynamicCapacityNetwork(**TINY)
    with pytest.raises(ValueError, match=r"`k` must be at most the grid's 2 x 2 = 4 positions .* Received: k=5"):
        model(np.ones((1, 8, 7, 1), "float32"), k=5)
    np.testing.assert_equal(
        model(np.ones((1, 8, 7, 1), "float32"), return_details=True, k=4)["positions"].shape, (1, 4)
    )
    for overrides, message in (
        ({"mode": "both"}, "`mode` must be one of ('dcn', 'coarse', 'fine'). Received: mode='both'"),
        ({"k": 0}, "`k` must be an int >= 1. Received: k=0"),
        ({"patch_size": 6, "coarse_factor": 4}, "`patch_size` must be a multiple of `coarse_factor` (4)"),
        ({"top_kernel_size": 2}, "`top_kernel_size` must be an odd int >= 1. Received: top_kernel_size=2"),
        ({"fine_filters": ()}, "`fine_filters` must be a non-empty tuple of ints >= 1. Received: fine_filters=()"),
        ({"hint_weight": -1.0}, "`hint_weight` must be a number >= 0. Received: hint_weight=-1.0"),
    ):
        with pytest.raises(ValueError) as error:
            DynamicCapacityNetwork(**{**TINY, **overrides})
        assert message in str(error.value)
    with pytest.raises(ValueError, match=r"`k` must be at most the grid's 2 x 2 = 4 positions. Received: k=9"):
        flop_counts(model, 8, 8, k=9)


PAPERS = {"coarse_filters": (3, 5), "coarse_downsample": "stride", "top_pooling": "max", "batch_norm": True}


@pytest.mark.parametrize("mode, variant", [("dcn", {}), ("fine", {}), ("dcn", PAPERS)])
def test_config_round_trip_and_keras_file(mode, variant, tmp_path):
    keras.utils.set_random_seed(1)
    model = DynamicCapacityNetwork(**{**TINY, **variant, "mode": mode, "hint_weight": 0.5}, name="tiny")
    if variant:  # moving averages away from their start, so that loading them is checked too
        model(np.random.default_rng(3).uniform(size=(4, 9, 10, 1)).astype("float32"), training=True)
    images = np.random.default_rng(0).uniform(size=(2, 9, 10, 1)).astype("float32")
    expected = model(images, return_details=True)
    config = model.get_config()
    clone = DynamicCapacityNetwork.from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config and config["fine_filters"] == [3, 4] and config["mode"] == mode
    assert (config["batch_norm"], config["top_pooling"]) == (
        (["coarse", "fine"], "max") if variant else ([], "average")
    )
    path = tmp_path / "dcn.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    out = reloaded(images, return_details=True)
    for key in ("logits", "features") + (("saliency", "positions") if mode == "dcn" else ()):
        np.testing.assert_allclose(to_numpy(out[key]), to_numpy(expected[key]), atol=1e-6)


# ---------------------------------------------------------------- FLOPs


def test_flop_counts_match_tensorflows_profiler_and_a_count_by_hand():
    from benchmarks.harness.vision_training import forward_flops

    counts = None
    for mode in ("coarse", "fine", "dcn"):
        model = DynamicCapacityNetwork(**{**TINY, "mode": mode})
        model(np.zeros((1, 10, 10, 1), "float32"))
        counts = flop_counts(model, 10, 10)
        if mode == "dcn":  # also softmax, log, masks and other elementwise ops the count leaves out
            assert forward_flops(model, 10) == pytest.approx(counts["dcn"], rel=0.02)
        else:
            assert forward_flops(model, 10) == counts[mode]
    # By hand, 10 x 10 padded to 12 x 12, grid 3 x 3 (9 positions), D = 3, U = 5, K = 4:
    coarse_mac = 6 * 6 * 9 * 1 * 3 + 3 * 3 * 4 * 3 * 3  # 3x3 conv on the 6x6 image; the 2x2 stride-2 conv
    fine_mac = 16 * 9 * 1 * 3 + 16 * 9 * 3 * 4 + 4 * 4 * 3  # on a 4x4 patch: conv, conv (then pool to 2x2), 2x2 conv
    top_mac = 9 * 9 * 3 * 5 + 5 * 4  # 3x3 conv on the grid, dense
    assert counts["multiply_adds"] == {
        "coarse": coarse_mac + top_mac,
        "fine": 9 * fine_mac + top_mac,
        "dcn": coarse_mac + 2 * top_mac + top_mac + 2 * fine_mac + 2 * 9 * 3,  # + saliency, 2 patches, scatter
    }
    assert counts["grid"] == (3, 3) and counts["dcn"] < counts["fine"]


def test_flop_counts_of_the_papers_variant_match_the_profiler_up_to_what_it_counts_differently():
    """Batch normalisation is 2 FLOPs per output; the profiler adds 6 per channel and leaves the global maximum out.

    The 6 per channel fold the statistics into a scale and a shift, which a deployed model computes once.
    """
    from benchmarks.harness.vision_training import forward_flops

    for mode, bn_channels in (("coarse", 3 + 5), ("fine", 3 + 4)):
        model = DynamicCapacityNetwork(**{**TINY, **PAPERS, "mode": mode})
        model(np.zeros((1, 10, 10, 1), "float32"))
        counts = flop_counts(model, 10, 10)
        assert forward_flops(model, 10) == counts[mode] + 6 * bn_channels - 3 * 3 * 5  # the max of 3 x 3 x U values
    # By hand, the coarse network: 12 x 12 -> 3x3 conv of stride 2 (3 channels, 6 x 6) -> 3x3 conv (5 channels)
    # -> the 2x2 stride-2 conv to D = 3, normalisation 2 per output of the first two.
    coarse_net = 2 * (36 * 9 * 1 * 3) + 2 * 36 * 3 + 2 * (36 * 9 * 3 * 5) + 2 * 36 * 5 + 2 * (9 * 4 * 5 * 3) + 9 * 3
    assert counts["parts"]["coarse_net"] == coarse_net


# ---------------------------------------------------------------- training


def test_the_training_loss_is_the_papers_three_terms_and_one_step_moves_every_network():
    keras.utils.set_random_seed(0)
    model = DynamicCapacityNetwork(**{**TINY, "hint_weight": 0.7, "coarse_weight": 0.3})
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images = np.random.default_rng(0).uniform(size=(4, 8, 8, 1)).astype("float32")
    labels = np.array([0, 1, 2, 3])
    out = model(images, training=True)
    assert isinstance(out, dict) and model(images).shape == (4, 4)  # the dict only in training
    loss = to_numpy(model.compute_loss(images, labels, out))

    def cross_entropy(logits):
        logits = to_numpy(logits)
        log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        return -log_p[np.arange(4), labels].mean()

    coarse = to_numpy(out["coarse_features"]).reshape(4, 4, -1)
    chosen = np.stack([coarse[b, to_numpy(out["positions"]).astype(int)[b]] for b in range(4)])
    hint = np.mean((chosen - to_numpy(out["fine_features"])) ** 2)
    np.testing.assert_allclose(
        loss, cross_entropy(out["logits"]) + 0.3 * cross_entropy(out["coarse_logits"]) + 0.7 * hint, rtol=1e-5
    )
    before = [to_numpy(v) for v in model.trainable_variables]
    model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    moved = [not np.allclose(a, to_numpy(v)) for a, v in zip(before, model.trainable_variables)]
    assert all(moved), [v.path for v, m in zip(model.trainable_variables, moved) if not m]


def test_the_hint_pulls_the_coarse_features_toward_the_fine_ones_and_never_the_fine_ones_back():
    """The hint term's gradient reaches the coarse network only: the fine features are its fixed target."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = DynamicCapacityNetwork(**TINY)
    images = np.random.default_rng(1).uniform(size=(4, 8, 8, 1)).astype("float32")
    model(images)
    fine, coarse, top = (net.trainable_variables for net in (model.fine_net, model.coarse_net, model.top_conv))
    with tf.GradientTape(persistent=True) as tape:
        out = model(images, training=True)
        hint, mixed = out["hint"], tf.reduce_sum(out["logits"])
    fine_of_hint = tape.gradient(hint, fine)
    assert all(g is None or not np.any(to_numpy(g)) for g in fine_of_hint)  # stop_gradient: nothing reaches f_f
    assert all(g is not None and np.any(to_numpy(g)) for g in tape.gradient(hint, coarse))  # c moves toward f
    assert all(g is None for g in tape.gradient(hint, top))  # the top network is not in the hint at all
    # Control: the fine network does learn, through the prediction of the mixed map.
    assert all(g is not None and np.any(to_numpy(g)) for g in tape.gradient(mixed, fine))


# ---------------------------------------------------------------- the benchmark


def test_benchmark_flags_are_checked_every_flag_has_help_and_the_size_sets_the_papers_defaults(capsys):
    args = vision_dcn.parse_args([])
    assert args.models == ["coarse", "fine", "dcn"] and args.seeds == [0, 1] and args.size == 40
    assert (args.object_scale, args.clutter, args.patch_size) == ([0.3, 0.45], 6, 8)
    papers = vision_dcn.parse_args(["--size", "60"])
    assert (papers.object_scale, papers.clutter, papers.patch_size) == ([0.25, 0.35], 10, 12)
    assert vision_dcn.result_stem(args) == "vision_dcn" and vision_dcn.result_stem(papers) == "vision_dcn_60"
    assert vision_dcn.result_stem(vision_dcn.parse_args(["--size", "60", "--name", "dcn"])) == "dcn_60"
    for argv, message in (
        (["--models", "coarse,medium"], "expected comma-separated values of dcn, coarse, fine"),
        (["--seeds", "a"], "expected comma-separated ints"),
        (["--steps", "0"], "--steps must be >= 1. Received: 0"),
        (["--size", "8"], "--size must be >= 16. Received: 8"),
        (["--k", "26"], "--k and --k-choices must be in [1, 25], the 5 x 5 grid of 40-pixel canvases"),
        (["--k-choices", "2,0"], "--k and --k-choices must be in [1, 25]"),
        (["--patch-size", "6"], "--patch-size must be a multiple of --coarse-factor (4). Received: 6"),
        (["--coarse-filters", "16"], "--coarse-downsample stride needs at least log2(--coarse-factor) = 2"),
        (["--coarse-factor", "3", "--patch-size", "12"], "--coarse-factor must be a power of 2 with --coarse-down"),
        (["--adam-learning-rate", "0"], "--adam-learning-rate must be > 0. Received: 0.0"),
        (["--hint-weight", "-1"], "--hint-weight must be >= 0. Received: -1.0"),
        (["--object-scale", "0.3"], "--object-scale must be 'low,high'"),
        (["--name", "a/b"], "--name must be letters, digits, _ and -. Received: 'a/b'"),
    ):
        with pytest.raises(SystemExit):
            vision_dcn.parse_args(argv)
        assert message in capsys.readouterr().err
    assert [a.dest for a in vision_dcn.build_parser()._actions if not a.help] == []


def test_patch_scores_against_chance_and_the_choice_of_k():
    boxes = np.array([[2.0, 2.0, 6.0, 5.0], [0.0, 0.0, 12.0, 12.0]])  # grid 3 x 3 of 4-pixel blocks
    overlaps = vision_dcn_train.block_overlaps(boxes, (3, 3), 4)
    np.testing.assert_array_equal(overlaps[0].reshape(3, 3), [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    assert overlaps[1].all()
    scores = vision_dcn_train.on_glyph(np.array([[0, 8], [1, 2]]), boxes, (3, 3), 4)
    assert scores["share"] == 0.75 and scores["chance"] == pytest.approx((4 / 9 + 1) / 2)
    assert scores["any"] == 1.0
    # k = 2 of 9 drawn at random miss 4 blocks with probability C(5, 2) / C(9, 2) = 10 / 36.
    assert scores["any_chance"] == pytest.approx(((1 - 10 / 36) + 1) / 2)
    assert vision_dcn_train.choose_k({2: 80.0, 3: 81.6, 4: 82.0, 6: 81.0}, 0.5) == 3
    assert vision_dcn_train.choose_k({2: 80.0, 3: 81.6, 4: 82.0}, 0.0) == 4
    positions = vision_dcn_train.random_positions(np.random.default_rng(0), 50, 9, 4)
    assert positions.shape == (50, 4) and all(len(set(row)) == 4 for row in positions) and positions.max() < 9


@pytest.mark.slow
def test_benchmark_smoke_run_writes_the_table_json_and_figure(tmp_path, capsys):
    argv = ["--seeds", "0", "--steps", "2", "--batch-size", "8", "--train-size", "32", "--validation-size", "16"]
    argv += ["--test-size", "16", "--size", "24", "--coarse-filters", "4,4", "--fine-filters", "4,4", "--features", "4"]
    argv += ["--top-units", "4", "--k", "2", "--k-choices", "1,3", "--figure-canvases", "3", "--hint-weight", "0,1"]
    argv += ["--out", str(tmp_path)]
    status, printed = run_main(vision_dcn.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    written = json.loads((tmp_path / "vision_dcn_24.json").read_text())
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    assert written["command"].endswith(" ".join(argv)) and written["versions"]["keras"] == keras.__version__
    assert [run["mode"] for run in written["runs"]] == ["coarse", "fine", "dcn", "dcn"]  # a DCN per hint weight
    dcns = written["runs"][2:]
    assert [run["hint_weight"] for run in dcns] == [0.0, 1.0] and [run["chosen"] for run in dcns].count(True) == 1
    best = max(dcns, key=lambda run: run["validation_accuracy_percent"])  # validation's choice, the first of equals
    assert best["chosen"] and written["models"]["dcn"]["hint_weight"] == [best["hint_weight"]]
    assert written["models"]["dcn"]["by_hint_weight"]["1"]["test_accuracy_percent"] == [
        dcns[1]["test_accuracy_percent"]
    ]
    assert (
        f"seed 0 DCN: hint weight {best['hint_weight']:g} chosen" in printed
        and f"hint {best['hint_weight']:g}* " in printed
    )
    flops = {run["mode"]: run["flops"] for run in written["runs"]}
    assert flops["coarse"] < flops["dcn"] < flops["fine"]
    for run in written["runs"]:
        assert 0 <= run["test_accuracy_percent"] <= 100 and run["profiler_flops"] > 0
    dcn = best
    assert dcn["k_chosen"] in (1, 3) and set(dcn["test_accuracy_by_k"]) == {"1", "3"}
    assert 0 <= dcn["on_glyph"]["share"] <= 1 and 0 < dcn["on_glyph"]["chance"] <= 1
    assert (tmp_path / "vision_dcn_24_patches.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
