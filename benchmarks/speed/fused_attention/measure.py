"""One attention layer's training step, explicit and fused from the same weights, timed alternately at one length."""

import time

import keras
import numpy as np

from keras_transformer.layers.attention import MultiheadAttention

IMPLEMENTATIONS = ("explicit", "fused")


def compiled(implementation, length, causality, width, heads, weights=None):
    """A model of one attention layer, `[B, T, D] -> [B, T, D]`, compiled for SGD on mean squared error."""
    inputs = keras.Input((length, width))
    layer = MultiheadAttention(num_heads=heads, causality=causality, attention_implementation=implementation)
    model = keras.Model(inputs, layer(inputs, inputs))
    if weights is not None:
        model.set_weights(weights)
    model.compile(keras.optimizers.SGD(1e-4), "mse")
    return model


def step_seconds(model, x, y, steps):
    """The seconds of each of `steps` training steps."""
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        model.train_on_batch(x, y)
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(args, length, causality):
    """Every timed step of both implementations at one length, and the speed ratio fused / explicit."""
    batch = max(1, args.tokens // length)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, args.width)).astype("float32")
    x[:, length - length // 8 :] = 0.0  # padding: an all-zero vector is padding for the sign masks
    y = rng.normal(size=x.shape).astype("float32")
    keras.utils.set_random_seed(0)
    models = {"explicit": compiled("explicit", length, causality, args.width, args.heads)}
    models["fused"] = compiled("fused", length, causality, args.width, args.heads, models["explicit"].get_weights())
    for model in models.values():
        model.train_on_batch(x, y)  # compiles
    seconds = {name: [] for name in IMPLEMENTATIONS}
    for round_ in range(args.rounds):
        for name in IMPLEMENTATIONS if round_ % 2 == 0 else IMPLEMENTATIONS[::-1]:
            seconds[name] += step_seconds(models[name], x, y, args.steps)
    medians = {name: float(np.median(values)) for name, values in seconds.items()}
    return {
        "length": length,
        "causality": causality,
        "batch": batch,
        "median_ms": {name: 1000 * value for name, value in medians.items()},
        "fused_over_explicit_speed": medians["explicit"] / medians["fused"],
        "step_ms": {name: [1000 * s for s in values] for name, values in seconds.items()},
    }
