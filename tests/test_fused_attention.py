"""When `MultiheadAttention` runs the fused `keras.ops.dot_product_attention`, and that it is really called.

The fused and explicit paths compute the same outputs on every backend:
`tests/backends/test_any_backend.py` checks that on TensorFlow, JAX and PyTorch.
"""

import keras
import numpy as np
import pytest

from keras_transformer.layers import fused_attention
from keras_transformer.layers.attention import MultiheadAttention


@pytest.fixture
def fused_calls(monkeypatch):
    """A list that grows by one entry per call of `keras.ops.dot_product_attention`, which still runs."""
    calls, original = [], keras.ops.dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get("mask").shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", spy)
    return calls


def _inputs(length, batch=2, width=16):
    x = np.random.default_rng(0).normal(size=(batch, length, width)).astype("float32")
    x[0, -2:] = 0.0  # padding
    return x


def test_fused_runs_the_fused_call_with_a_full_mask_and_explicit_never_does(fused_calls):
    x = _inputs(6)
    MultiheadAttention(num_heads=4, attention_implementation="fused")(x, x)
    assert [tuple(shape) for shape in fused_calls] == [(2, 1, 6, 6)]  # [B, 1, T_q, T_k]: not the broadcast mask
    MultiheadAttention(num_heads=4, attention_implementation="explicit")(x, x)
    assert len(fused_calls) == 1


def test_requested_weights_and_weight_dropout_in_training_take_the_explicit_path(fused_calls):
    x = _inputs(6)
    fused = MultiheadAttention(num_heads=4, attention_implementation="fused")
    outputs, weights = fused(x, x, return_attention_scores=True)
    assert not fused_calls and tuple(weights.shape) == (2, 4, 6, 6)
    dropping = MultiheadAttention(num_heads=4, dropout_rate=0.1, attention_implementation="auto")
    dropping(x, x, training=True)
    assert not fused_calls


@pytest.mark.parametrize(
    "device, length, causality, fused",
    [
        (None, 4096, False, False),  # TensorFlow, or JAX on a CPU: no fused kernel, always explicit
        ("gpu", 64, False, False),  # below the crossover
        ("gpu", 256, False, True),
        ("gpu", 256, True, False),  # causal: a later crossover
        ("gpu", 1024, True, True),
        ("cpu", 64, True, True),  # PyTorch's CPU kernel: measured faster at every length
    ],
)
def test_auto_fuses_where_it_was_measured_faster(monkeypatch, fused_calls, device, length, causality, fused):
    monkeypatch.setattr(fused_attention, "fused_device", lambda: device)
    layer = MultiheadAttention(num_heads=2, causality=causality)
    assert layer.uses_fused(length) is fused
    x = _inputs(length, batch=1, width=8)
    layer(x, x)
    assert len(fused_calls) == int(fused)


def test_auto_is_explicit_on_this_cpu_and_says_so_once(caplog):
    caplog.set_level("INFO", logger="keras_transformer")
    fused_attention._logged.clear()
    layer = MultiheadAttention(num_heads=2)
    assert fused_attention.fused_device() is None  # TensorFlow: no fused kernel in Keras
    x = _inputs(300, batch=1, width=8)
    layer(x, x), layer(x, x)
    messages = [r.getMessage() for r in caplog.records if "MultiheadAttention" in r.getMessage()]
    assert messages == ['MultiheadAttention: explicit attention ("auto", tensorflow, 300 keys)']


def test_the_choice_round_trips_its_config_and_bad_choices_name_themselves():
    layer = MultiheadAttention(num_heads=2, attention_implementation="fused")
    config = layer.get_config()
    assert config["attention_implementation"] == "fused"
    assert MultiheadAttention.from_config(config).attention_implementation == "fused"
    del config["attention_implementation"]  # a config saved before the choice existed
    assert MultiheadAttention.from_config(config).attention_implementation == "auto"
    with pytest.raises(ValueError, match="Received: attention_implementation='flash'"):
        MultiheadAttention(attention_implementation="flash")
    with pytest.raises(
        ValueError,
        match="needs attention_score='scaled_dot' and dropout_rate=0 .*"
        "Received: attention_score='additive', dropout_rate=0.0",
    ):
        MultiheadAttention(attention_score="additive", attention_implementation="fused")
    with pytest.raises(ValueError, match="Received: attention_score='scaled_dot', dropout_rate=0.1"):
        MultiheadAttention(dropout_rate=0.1, attention_implementation="fused")


def test_a_training_step_is_the_same_through_either_path():
    x = _inputs(6)
    target = np.random.default_rng(1).normal(size=x.shape).astype("float32")
    weights = []
    for implementation in ("explicit", "fused"):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((6, 16))
        model = keras.Model(
            inputs, MultiheadAttention(num_heads=4, attention_implementation=implementation)(inputs, inputs)
        )
        model.compile(keras.optimizers.SGD(0.1), "mse")
        model.fit(x, target, epochs=2, batch_size=2, verbose=0, shuffle=False)
        weights.append(model.get_weights())
    for explicit, fused in zip(*weights):
        np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-6)


def test_the_benchmark_times_both_paths_from_the_same_weights_and_writes_its_json(tmp_path, capsys):
    import json

    from conftest import run_main

    from benchmarks.speed.fused_attention import __main__ as benchmark

    argv = ["--lengths", "8,16", "--tokens", "32", "--width", "8", "--heads", "2", "--steps", "1", "--rounds", "2"]
    status, printed = run_main(benchmark.main, argv + ["--out", str(tmp_path)], capsys)
    assert status == 0, printed
    results = json.loads((tmp_path / "fused_attention_speed_tensorflow.json").read_text())
    assert [(r["length"], r["causality"], r["batch"]) for r in results["runs"]] == [
        (8, False, 4),
        (8, True, 4),
        (16, False, 2),
        (16, True, 2),
    ]
    assert all(len(r["step_ms"]["fused"]) == 2 and r["fused_over_explicit_speed"] > 0 for r in results["runs"])
    assert results["cpu"] and "fused / explicit speed" in printed
    for argv, message in ((["--width", "10", "--heads", "4"], "--width must be divisible by --heads"),
                          (["--lengths", "0"], "--lengths must be positive ints"),
                          (["--lengths", "8,x"], "expected comma-separated ints")):  # fmt: skip
        with pytest.raises(SystemExit):
            benchmark.parse_args(argv)
        assert message in capsys.readouterr().err


def test_a_model_config_asking_for_fused_attention_with_attention_dropout_fails_when_made(fused_calls):
    from keras_transformer.config import preset
    from keras_transformer.models import build_transformer

    sizes = dict(source_vocab_size=20, target_vocab_size=20)
    with pytest.raises(ValueError, match="Received: attention_score='scaled_dot', attention_dropout_rate=0.1"):
        preset("tiny", attention_implementation="fused", dropout_rate=0.1, **sizes)
    config = preset("tiny", attention_implementation="fused", dropout_rate=0.1, attention_dropout_rate=0.0, **sizes)
    model = build_transformer(config)
    ids = np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32")
    model([ids, ids])
    assert len(fused_calls) == 3 * config.num_blocks  # encoder self, decoder self and cross attention
