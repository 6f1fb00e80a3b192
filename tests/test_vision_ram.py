"""The recurrent attention model (Mnih et al. 2014), `keras_transformer.vision.recurrent`.

The glimpse sensor is checked against NumPy written from the paper's retina (section 3.1): k
square patches centred on the location, the first g x g pixels, each next one twice as wide,
each shrunk to g x g by averaging blocks; the image read bilinearly at the real-valued location
(the sum over every pixel of `value * max(0, 1 - |dy|) * max(0, 1 - |dx|)`), zero outside. The
model is held to what its users rely on: the shapes of its outputs in training and inference,
the first glimpse at the centre, inference without noise, a training step that moves the
location policy, its loss, config round trips and errors that name the value.
"""

import math

import keras
import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import machine, vision_training
from benchmarks.vision.ram import __main__ as vision_ram
from benchmarks.vision.ram import train
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.vision.recurrent import (
    GlimpseSensor,
    RecurrentAttentionModel,
    build_strided_cnn,
    gaussian_log_density,
)


def reference_retina(image, location, patch_size, scales):
    """Paper's retina in float64: `image [H, W, C]`, `location (row, column)` normalized -> `[k, g, g, C]`."""
    height, width, channels = image.shape
    centre = ((location[0] + 1) * (height - 1) / 2, (location[1] + 1) * (width - 1) / 2)
    rows, columns = np.arange(height)[:, None], np.arange(width)[None, :]
    patches = []
    for i in range(scales):
        factor = 2**i
        side = patch_size * factor
        full = np.zeros((side, side, channels))
        for a in range(side):
            for b in range(side):
                y = centre[0] + a - (side - 1) / 2
                x = centre[1] + b - (side - 1) / 2
                weights = np.maximum(0, 1 - np.abs(y - rows)) * np.maximum(0, 1 - np.abs(x - columns))
                full[a, b] = (weights[..., None] * image).sum(axis=(0, 1))
        shrunk = np.zeros((patch_size, patch_size, channels))
        for a in range(patch_size):
            for b in range(patch_size):
                shrunk[a, b] = full[a * factor : (a + 1) * factor, b * factor : (b + 1) * factor].mean(axis=(0, 1))
        patches.append(shrunk)
    return np.stack(patches)


@pytest.mark.parametrize("patch_size, scales", [(2, 3), (3, 2), (1, 1)])
def test_glimpse_sensor_is_the_papers_retina_at_any_location_on_an_odd_canvas(patch_size, scales):
    rng = np.random.default_rng(0)
    images = rng.random((3, 7, 9, 2)).astype(np.float32)
    locations = np.array([[0.0, 0.0], [-0.83, 0.41], [0.95, -1.0]], np.float32)  # centre, inside, at an edge
    sensed = np.asarray(GlimpseSensor(patch_size, scales)(images, locations))
    assert sensed.shape == (3, scales, patch_size, patch_size, 2)
    for n in range(3):
        expected = reference_retina(images[n].astype(np.float64), locations[n], patch_size, scales)
        np.testing.assert_allclose(sensed[n], expected, atol=1e-5)


def test_glimpse_sensor_on_a_pixel_is_a_crop_and_coarse_patches_see_farther():
    image = np.zeros((1, 11, 11, 1), np.float32)
    image[0, 5, 5] = 1.0  # the centre pixel
    image[0, 5, 9] = 2.0  # 4 pixels to its right
    patches = np.asarray(GlimpseSensor(3, 3)(image, np.zeros((1, 2), np.float32)))[0, ..., 0]
    np.testing.assert_allclose(patches[0], [[0, 0, 0], [0, 1, 0], [0, 0, 0]])  # the 3x3 crop: the far dot unseen
    assert patches[1].sum() == pytest.approx(1 / 4)  # 6x6 around the centre, 2x2 blocks: the centre dot only
    assert patches[2].sum() == pytest.approx((1 + 2) / 16)  # 12x12: both dots, each averaged into a 4x4 block


def test_gaussian_log_density_is_the_bivariate_normal():
    sample = np.array([[0.3, -0.2], [1.0, 1.0]], np.float32)
    mean = np.array([[0.1, 0.0], [1.0, 1.0]], np.float32)
    std = 0.2
    expected = [-((s - m) ** 2).sum() / (2 * std**2) - math.log(2 * math.pi * std**2) for s, m in zip(sample, mean)]
    np.testing.assert_allclose(np.asarray(gaussian_log_density(sample, mean, std)), expected, rtol=1e-5)


def small_model(**options):
    settings = dict(num_classes=4, glimpses=3, patch_size=4, scales=2, glimpse_units=8, units=16, seed=0)
    return RecurrentAttentionModel(**{**settings, **options})


@pytest.mark.parametrize("core", ["gru", "lstm", "rnn"])
def test_outputs_in_inference_and_training_and_the_first_glimpse_at_the_centre(core):
    images = np.random.default_rng(1).random((2, 13, 11, 1)).astype(np.float32)
    model = small_model(core=core, reinforce=Reinforce("leave_one_out", samples=3))
    inference = model(images)
    assert inference["logits"].shape == (2, 4) and inference["locations"].shape == (2, 3, 2)
    assert inference["episode_logits"].shape == (1, 2, 4) and inference["log_probs"].shape == (2, 1, 2)
    np.testing.assert_array_equal(np.asarray(inference["locations"])[:, 0], 0.0)
    again = model(images)  # inference reads the policy's mean: no noise
    np.testing.assert_array_equal(np.asarray(again["locations"]), np.asarray(inference["locations"]))
    training = model(images, training=True)
    assert training["episode_logits"].shape == (3, 2, 4) and training["log_probs"].shape == (2, 3, 2)
    assert training["baselines"].shape == (2, 3, 2) and training["locations"].shape == (2, 3, 2)
    assert np.all(np.abs(np.asarray(training["locations"])) <= 1.0)
    one = small_model(core=core)(images[:1])  # batch of one
    assert one["logits"].shape == (1, 4)
    assert model.values_read == 3 * 2 * 4 * 4


def test_one_glimpse_trains_on_the_cross_entropy_alone():
    images = np.random.default_rng(2).random((4, 9, 9, 1)).astype(np.float32)
    labels = np.array([0, 1, 2, 3])
    model = small_model(glimpses=1)
    outputs = model(images, training=True)
    loss = model.compute_loss(images, labels, outputs, training=True)
    expected = keras.losses.sparse_categorical_crossentropy(labels, outputs["logits"], from_logits=True)
    np.testing.assert_allclose(float(loss), float(np.mean(expected)), rtol=1e-6)
    assert outputs["log_probs"].shape == (0, 1, 4)


@pytest.mark.parametrize(
    "reward, baseline",
    [
        ("correct", "value"),
        ("correct", "learned"),
        ("log_likelihood", "value"),
        ("log_likelihood", "leave_one_out"),
    ],
)
def test_a_training_step_moves_the_location_policy(reward, baseline):
    # Not the 0/1 reward with leave-one-out: an untrained model's episodes of one canvas often
    # classify alike, so every advantage is 0 and the policy rightly gets no gradient.
    rng = np.random.default_rng(3)
    images, labels = rng.random((8, 12, 12, 1)).astype(np.float32), rng.integers(0, 4, 8)
    samples = 2 if baseline == "leave_one_out" else 1
    model = small_model(reward=reward, reinforce=Reinforce(baseline, samples=samples, normalize=True))
    model.compile(keras.optimizers.Adam(0.01), metrics=["accuracy"])
    model.build(images.shape)
    before = [np.array(w) for w in model.locator.weights]
    history = model.fit(images, labels, batch_size=8, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"])) and "accuracy" in history.history
    assert any(not np.allclose(b, np.array(w)) for b, w in zip(before, model.locator.weights))


@pytest.mark.parametrize("policy_trains_core", [True, False])
def test_the_location_policy_trains_the_core_unless_told_not_to(policy_trains_core):
    """The module docstring's claim: REINFORCE reaches the core by default, the locator alone with `False`.

    The gradient of the locations' log-probabilities (what the REINFORCE surrogate weighs) with
    respect to the core's and the locator's weights; the baseline never reaches the core.
    """
    import tensorflow as tf

    images = np.random.default_rng(5).random((3, 10, 10, 1)).astype(np.float32)
    model = small_model(policy_trains_core=policy_trains_core)
    model.build(images.shape)
    core, locator, value_head = model.cell.trainable_weights, model.locator.trainable_weights, model.value_head
    with tf.GradientTape(persistent=True) as tape:
        outputs = model(images, training=True)
        log_probs, baselines = tf.reduce_sum(outputs["log_probs"]), tf.reduce_sum(outputs["baselines"])

    def reaches(target, weights):  # whether any of `weights` gets a gradient that is not zero
        return any(g is not None and np.abs(np.asarray(g)).max() > 0 for g in tape.gradient(target, weights))

    assert [reaches(log_probs, core), reaches(log_probs, locator)] == [policy_trains_core, True]
    assert [reaches(baselines, core), reaches(baselines, value_head.trainable_weights)] == [False, True]


def test_the_hybrid_loss_gradient_is_the_papers_reinforce_estimator_over_t_minus_1_decisions():
    """The hybrid loss's gradient on the location head and the baseline, against NumPy formulas (T = 5).

    The paper's estimator (Mnih et al. 2014, eq. 2, with its baseline): the location head's weights
    W_m of `mu_t = tanh(W_m h_t + c)` get `-1/(T-1) sum_t mean_b (R_b - b_t) d/dW_m log pi(l_t)`,
    with `d log pi / d mu = (l_t - mu_t) / sigma^2` and `d mu / d(W_m h + c) = 1 - mu^2`; the cross-entropy
    sends them nothing (the sampled locations are constants). The baseline `b_t = W_v h_t + c_v` gets the
    gradient of its regression `1/(T-1) sum_t mean_b (R_b - b_t)^2`.
    """
    import tensorflow as tf

    rng = np.random.default_rng(7)
    images, labels = rng.random((6, 12, 12, 1)).astype(np.float32), np.array([0, 1, 2, 3, 0, 1])
    glimpses, sigma = 5, 0.05  # a small sigma: no sampled location is clipped, so l_t is the sample
    model = small_model(glimpses=glimpses, location_std=sigma, policy_trains_core=False, reinforce=Reinforce("value"))
    model.build(images.shape)
    seen = []  # h_t, as the location head reads it (the same tensor the value head reads)
    locator_call = model.locator.call
    model.locator.call = lambda inputs, **kw: (seen.append(np.asarray(inputs, np.float64)), locator_call(inputs, **kw))[
        1
    ]
    heads = [model.locator.kernel, model.locator.bias, model.value_head.kernel, model.value_head.bias]
    with tf.GradientTape() as tape:
        outputs = model(images, training=True)
        loss = model.compute_loss(images, labels, outputs, training=True)
    got = [np.asarray(g, np.float64) for g in tape.gradient(loss, heads)]

    decisions, batch = glimpses - 1, len(images)
    h = np.stack(seen)  # (T - 1, B, units)
    locations = np.asarray(outputs["locations"], np.float64)[:, 1:].transpose(1, 0, 2)  # (T - 1, B, 2): l_1 ..
    assert h.shape[:2] == (decisions, batch) and np.abs(locations).max() < 1
    W_m, c_m, W_v, c_v = (np.asarray(w, np.float64) for w in heads)
    mu = np.tanh(h @ W_m + c_m)  # (T - 1, B, 2)
    baselines = (h @ W_v + c_v)[..., 0]  # (T - 1, B)
    np.testing.assert_allclose(baselines, np.asarray(outputs["baselines"])[:, 0], rtol=1e-4, atol=1e-6)
    rewards = (np.asarray(outputs["logits"]).argmax(-1) == labels).astype(np.float64)  # the paper's 0/1 reward
    advantage = rewards[None] - baselines  # (T - 1, B)
    score = (locations - mu) / sigma**2 * (1 - mu**2)  # d log pi / d(W_m h + c), (T - 1, B, 2)
    weighted = advantage[..., None] * score
    expected_W_m = -np.einsum("tbu,tbj->uj", h, weighted) / batch / decisions
    expected_c_m = -weighted.sum(axis=(0, 1)) / batch / decisions
    regression = -2 * advantage / batch / decisions  # d/db_t of the mean squared (R - b_t), over the decisions
    expected_W_v = np.einsum("tbu,tb->u", h, regression)[:, None]
    expected_c_v = np.array([regression.sum()])
    for name, g, e in zip(("W_m", "c_m", "W_v", "c_v"), got, (expected_W_m, expected_c_m, expected_W_v, expected_c_v)):
        np.testing.assert_allclose(g, e, rtol=2e-3, atol=1e-6, err_msg=name)
    assert np.abs(expected_W_m).max() > 1e-3  # the estimate is not trivially zero


def test_a_step_compiled_with_xla_computes_what_the_plain_step_does():
    """`--jit-compile` (the study's default) changes the step's speed, not its arithmetic.

    Compared where no location is sampled (XLA draws other random numbers from the same seed): a
    training step of one glimpse (the cross-entropy through sensor, glimpse network, core and
    classifier), and the inference of three glimpses (each location the policy's mean).
    """
    rng = np.random.default_rng(6)
    images, labels = rng.random((8, 12, 12, 1)).astype(np.float32), rng.integers(0, 4, 8)
    weights, outputs = {}, {}
    for jit in (False, True):
        keras.utils.set_random_seed(0)
        model = small_model(glimpses=1)
        model.compile(keras.optimizers.Adam(0.01), jit_compile=jit)
        model.train_on_batch(images, labels)
        model.train_on_batch(images, labels)
        weights[jit] = [np.array(w) for w in model.trainable_weights]
        keras.utils.set_random_seed(0)
        looking = small_model(glimpses=3)
        looking.compile(jit_compile=jit)
        outputs[jit] = looking.predict(images, verbose=0)
    assert len(weights[False]) == len(weights[True]) > 10
    for eager, compiled in zip(weights[False], weights[True]):
        np.testing.assert_allclose(compiled, eager, rtol=1e-4, atol=1e-5)
    for key in ("logits", "locations"):
        np.testing.assert_allclose(outputs[True][key], outputs[False][key], rtol=1e-4, atol=1e-5)


def test_config_round_trip_and_keras_file(tmp_path):
    model = small_model(core="lstm", location_std=0.15, reward="log_likelihood", policy_trains_core=False)
    images = np.random.default_rng(4).random((2, 10, 10, 1)).astype(np.float32)
    expected = model(images)
    clone = RecurrentAttentionModel.from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    path = tmp_path / "ram.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for name in ("logits", "locations"):
        np.testing.assert_allclose(np.asarray(loaded(images)[name]), np.asarray(expected[name]), atol=1e-6)
    sensor = GlimpseSensor(5, 2, name="retina")
    assert GlimpseSensor.from_config(sensor.get_config()).get_config() == sensor.get_config()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"core": "transformer"}, "`core` must be one of ('gru', 'lstm', 'rnn'). Received: core='transformer'"),
        ({"location_std": 0}, "`location_std` must be a number > 0. Received: location_std=0"),
        ({"glimpses": 0}, "`glimpses` must be an int >= 1. Received: glimpses=0"),
        ({"reward": "accuracy"}, "`reward` must be one of ('correct', 'log_likelihood'). Received: reward='accuracy'"),
        ({"reinforce": "value"}, "`reinforce` must be a Reinforce, its config or None. Received: 'value'"),
        ({"patch_size": 2.5}, "`patch_size` must be an int >= 1. Received: patch_size=2.5"),
    ],
)
def test_bad_arguments_name_the_value(options, message):
    with pytest.raises(ValueError) as error:
        small_model(**options)
    assert message in str(error.value)


def test_benchmark_flags_are_checked_and_every_flag_has_help(capsys):
    args = vision_ram.parse_args([])
    assert args.glimpses == [1, 2, 4, 6, 8] and args.seeds == [0, 1] and args.size == 60 and args.clutter == 4
    assert args.fresh_canvases and args.paper_cnn and args.decay == "cosine" and args.steps == 6000
    assert args.reinforce == Reinforce("leave_one_out", 4, normalize=True)
    for argv, text in (
        (["--glimpses", "0,2"], "--glimpses must be >= 1. Received: [0, 2]"),
        (["--location-std", "0"], "--location-std must be > 0. Received: 0.0"),
        (["--baseline", "leave_one_out", "--samples", "1"], "needs `samples` of at least 2"),
        (["--object-scale", "0.5,0.2"], "--object-scale must be low,high"),
        (["--fragment-size", "99"], "--fragment-size must be in [1, --size]. Received: 99"),
        (["--steps", "0"], "--steps must be >= 1. Received: 0"),
        (["--name", "a/b"], "--name must be letters, digits, _ and -. Received: 'a/b'"),
        (["--warmup-steps", "6000"], "--warmup-steps must be >= 0 and < --steps (6000). Received: 6000"),
        (["--jit-compile", "maybe"], "--jit-compile"),
        (["--max-rotation", "-1"], "--max-rotation must be in [0, 180] degrees. Received: -1.0"),
    ):
        with pytest.raises(SystemExit):
            vision_ram.parse_args(argv)
        assert text in capsys.readouterr().err
    assert [a.dest for a in vision_ram.build_parser()._actions if not a.help] == []
    args = vision_ram.parse_args(
        ["--steps", "100", "--warmup-steps", "10", "--decay", "cosine", "--jit-compile", "false"]
    )
    assert args.jit_compile is False and float(vision_training.schedule_of(args)(100)) < 1e-9  # cosine: 0 at the end


@pytest.mark.slow
def test_benchmark_smoke_run_writes_its_json_and_figure(tmp_path, capsys):
    import json

    argv = ["--glimpses", "1,2", "--seeds", "0", "--steps", "3", "--train-size", "64", "--test-size", "16",
            "--validation-size", "16", "--batch-size", "16", "--size", "24", "--curve-every", "3",
            "--fresh-canvases", "false", "--out", str(tmp_path), "--name", "ram"]  # fmt: skip
    status, printed = run_main(vision_ram.main, argv, capsys)
    assert status == 0 and "ram_2" in printed and "over the CNN" in printed and "over the paper's CNN" in printed
    results = json.loads((tmp_path / "ram.json").read_text())
    assert [r["model"] for r in results["runs"]] == ["cnn", "paper_cnn", "ram", "ram"] and results["cpu"]["model"]
    ram = results["runs"][3]
    assert ram["values_read"] == 2 * 3 * 12 * 12 and len(ram["where"]["distance_px"]) == 2 and ram["curve"]
    assert (tmp_path / "ram.png").stat().st_size > 0
    fresh = argv[:-4] + [
        "--glimpses",
        "1",
        "--no-cnn",
        "--paper-cnn",
        "false",
        "--fresh-canvases",
        "true",
        "--out",
        str(tmp_path),
        "--name",
        "f",
    ]
    status, printed = run_main(vision_ram.main, fresh, capsys)
    assert status == 0, printed[-2000:]
    assert json.loads((tmp_path / "f.json").read_text())["flags"]["fresh_canvases"] is True


def test_fresh_canvases_are_kept_for_every_model_only_when_they_fit_in_half_the_free_memory(monkeypatch, capsys):
    argv = ["--fresh-canvases", "true", "--steps", "10", "--batch-size", "8", "--size", "20", "--train-size", "40"]
    args = vision_ram.parse_args(argv)
    needed = 10 * 8 * 20 * 20 * 4
    monkeypatch.setattr(machine, "available_memory_bytes", lambda: 2 * needed)
    assert train.canvas_chunks(args).keep and capsys.readouterr().out == ""
    monkeypatch.setattr(machine, "available_memory_bytes", lambda: 2 * needed - 1)
    chunks = train.canvas_chunks(args)
    assert not chunks.keep and "each model generates them again" in capsys.readouterr().out
    assert train.canvas_chunks(vision_ram.parse_args(argv[2:] + ["--fresh-canvases", "false"])) is None


def test_the_strided_cnn_is_its_formula_and_survives_a_keras_round_trip(tmp_path):
    model = build_strided_cnn((12, 11), num_classes=3, channels=2, filters=4, kernel_size=5, strides=3, units=6)
    images = np.random.default_rng(0).normal(size=(2, 12, 11, 2)).astype("float32")
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in model.get_layer("conv").weights)
    w1, b1 = (keras.ops.convert_to_numpy(w) for w in model.get_layer("hidden").weights)
    w2, b2 = (keras.ops.convert_to_numpy(w) for w in model.get_layer("logits").weights)
    rows, columns = (12 - 5) // 3 + 1, (11 - 5) // 3 + 1  # valid positions at stride 3: 3 x 3
    conv = np.zeros((2, rows, columns, 4))
    for i in range(rows):
        for j in range(columns):
            window = images[:, 3 * i : 3 * i + 5, 3 * j : 3 * j + 5, :]  # [B, 5, 5, 2]
            conv[:, i, j] = np.einsum("bhwc,hwcf->bf", window, kernel) + bias
    hidden = np.maximum(np.maximum(conv, 0).reshape(2, -1) @ w1 + b1, 0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(images)), hidden @ w2 + b2, rtol=1e-4, atol=1e-5)
    path = tmp_path / "strided.keras"
    model.save(path)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(keras.saving.load_model(path)(images)),
        keras.ops.convert_to_numpy(model(images)),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="kernel_size"):
        build_strided_cnn((8, 8), kernel_size=10)
    with pytest.raises(ValueError, match="strides"):
        build_strided_cnn((60, 60), strides=0)
