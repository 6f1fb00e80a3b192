"""One backend's results, saved for another backend to reproduce from the same weights.

`write_bundle(folder)` saves, from the current Keras backend: a tiny `build_transformer` model as
a `.keras` file with its logits, cached greedy and beam-search ids and scores, the losses and
logits of a `model.fit` of a few steps from those weights (the project's loss and optimizer), and
every public layer the model leaves out or uses with other arguments (config, weights, inputs,
outputs). `check_bundle(folder)` rebuilds all of it on the current backend from the folder alone
(models with `keras.saving.load_model(..., safe_mode=True)`, layers from their configs with
`safe_mode=True` and the saved weights) and asserts the same results: ids exactly, floats within
`RTOL` / `ATOL`. It saves the model it trained, which `check_trained_model` loads back on the
first backend.

Only Keras, NumPy and the backend-neutral modules of `keras_transformer` are used, no TensorFlow,
so that bundles can be written and checked on TensorFlow, JAX and PyTorch alike.
"""

import json
from pathlib import Path

import keras
import numpy as np

from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.data.special_tokens import START_ID
from keras_transformer.decoding import beam_search, greedy_decode
from keras_transformer.layers import (
    Attention,
    AttentionScore,
    EncoderBlock,
    MultiheadAttention,
    PositionalEncoding,
    TokenEmbedding,
)
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.models import KeyValueLookup, build_transformer
from keras_transformer.training import compile_transformer

# The folder of a bundle written on another backend, for `test_any_backend.py` to reproduce, and
# the folder where it saves the model it trained.
REFERENCE_ENV, SAVE_TO_ENV = "KERAS_TRANSFORMER_REFERENCE_BUNDLE", "KERAS_TRANSFORMER_SAVE_TO"
# Float32 results of two backends differ by their kernels' orders of summation, about 1e-6.
RTOL, ATOL = 1e-4, 1e-5
# The tiny sizes: batch, source and target lengths, d_model, heads, d_ff, source and target
# vocabularies, tokens decoded, training steps.
B, S, T, D, H, F, V_S, V_T, MAX_LENGTH, FIT_STEPS = 3, 6, 5, 8, 2, 16, 13, 11, 6, 3


def numpy(x):
    """A backend tensor (or a NumPy array) as a NumPy array."""
    return keras.ops.convert_to_numpy(x)


def logits(model, source_ids, target_in_ids):
    """A Transformer's logits as NumPy `[B, T, V_T]`, by `predict_on_batch`.

    `predict_on_batch` compiles the forward pass where the backend compiles (JAX: one XLA program
    instead of one per operation, several times faster for a first call).
    """
    return numpy(model.predict_on_batch([source_ids, target_in_ids]))


def _floats(rng, shape, padding_rows=()):
    """Float32 `shape`, uniform in [-1, 1), with the `(b, t)` rows of `padding_rows` all zero."""
    x = rng.uniform(-1.0, 1.0, size=shape).astype("float32")
    for b, t in padding_rows:
        x[b, t] = 0.0
    return x


def _ids(rng, lengths, max_length, vocab_size, start=False):
    """Int32 `[len(lengths), max_length]`: random real ids (>= 4), then padding (0).

    With `start`, each row begins with `<s>`. Ids repeat within the batch, which matters to the
    optimizer's update of an embedding row.
    """
    out = np.zeros((len(lengths), max_length), "int32")
    for b, length in enumerate(lengths):
        out[b, :length] = rng.integers(4, vocab_size, size=length)
        if start:
            out[b, 0] = START_ID
    return out


ESTIMATOR = Reinforce("leave_one_out", 2, normalize=True, entropy_weight=0.1)


def _reinforce_loss(layer, a):
    outputs = layer({name: a[name] for name in ("keys", "values", "query")})
    reward = -keras.losses.sparse_categorical_crossentropy(a["answers"], outputs["logits"], from_logits=True)  # (B,)
    rewards = keras.ops.stack([reward, 0.5 * reward])  # (S, B)
    log_probs = keras.ops.stack([outputs["log_prob"], outputs["log_prob"] - 1.0])
    return outputs["logits"], outputs["entropy"], layer.reinforce.loss(rewards, log_probs, entropies=outputs["entropy"])


def layer_cases():
    """`{name: (make_layer, inputs, call)}`: the public layers outside the model's configuration.

    The model has `TokenEmbedding`, sinusoidal `PositionalEncoding`, `EncoderBlock`,
    `DecoderBlock`, and in them `MultiheadAttention` (scaled dot product, causal and not),
    `FeedForward`, `LayerNorm` and `AttentionScore("scaled_dot")`; these cases add learned
    positions, the document's configuration (no `W^O`, no LayerNorm), the four other score
    functions, the single-head `Attention` (soft and hard), the lookup model and the logits of a
    shared embedding table. `make_layer()`
    makes the layer, `inputs` is a dict of NumPy arrays, `call(layer, inputs)` runs the layer on
    them and returns an array or a nest of arrays.
    """
    rng = np.random.default_rng(0)
    x_padding = [(0, 4), (0, 5), (2, 5)]
    x = _floats(rng, (B, S, D), x_padding)  # [B, S, D]
    x_mask = np.abs(x).sum(-1) > 0  # [B, S]
    y = _floats(rng, (B, T, D), [(1, 3), (1, 4)])  # [B, T, D]
    y_mask = np.abs(y).sum(-1) > 0  # [B, T]
    values = _floats(rng, (B, S, 3), x_padding)
    head_queries, head_keys = _floats(rng, (B, H, T, 4)), _floats(rng, (B, H, S, 4))
    allowed = np.broadcast_to(x_mask[:, None, None, :], (B, H, T, S))
    lookup = {
        "keys": rng.integers(0, 6, (B, 4)).astype("int32"),
        "values": rng.integers(0, 5, (B, 4)).astype("int32"),
        "query": rng.integers(0, 6, (B,)).astype("int32"),
    }
    return {
        "learned_positional_encoding": (
            lambda: PositionalEncoding(learned=True, max_length=S),
            {"x": x, "mask": x_mask},
            lambda layer, a: layer(a["x"], mask=a["mask"]),
        ),
        "additive_attention": (
            lambda: MultiheadAttention(H, attention_score="additive"),
            {"y": y, "x": x, "y_mask": y_mask, "x_mask": x_mask},
            lambda layer, a: layer(
                a["y"], a["x"], queries_mask=a["y_mask"], keys_mask=a["x_mask"], return_attention_scores=True
            ),
        ),
        "document_cosine_encoder_block": (
            lambda: EncoderBlock(H, F, attention_score="cosine", use_output_projection=False, normalize=False),
            {"x": x, "mask": x_mask},
            lambda layer, a: layer(a["x"], mask=a["mask"], return_attention_scores=True),
        ),
        "key_value_bilinear_attention": (
            lambda: Attention(attention_score="bilinear"),
            {"y": y, "x": x, "values": values},
            lambda layer, a: layer(a["y"], a["x"], a["values"], return_attention_scores=True),
        ),
        "causal_hard_attention": (
            lambda: Attention(causality=True, hard="argmax"),
            {"x": x},
            lambda layer, a: layer(a["x"], a["x"], return_attention_scores=True, return_log_prob=True),
        ),
        "dot_score": (
            lambda: AttentionScore("dot"),
            {"q": head_queries, "k": head_keys, "allowed": allowed},
            lambda layer, a: layer(a["q"], a["k"], a["allowed"]),
        ),
        "key_value_lookup": (lambda: KeyValueLookup(6, 5, D), lookup, lambda layer, a: layer(a)),
        # The REINFORCE estimator's loss on the rewards of two reads (the argmax read's reward, and
        # half of it), with leave-one-out, normalisation and the entropy bonus.
        "reinforce_lookup": (
            lambda: KeyValueLookup(6, 5, D, variant="reinforce", reinforce=ESTIMATOR),
            {**lookup, "answers": rng.integers(0, 5, (B,)).astype("int32")},
            _reinforce_loss,
        ),
        # The logits of a model that shares its embedding table (`embedding_sharing`): h E^T.
        "embedding_table_logits": (
            lambda: TokenEmbedding(V_T, D),
            {"y": y},
            lambda layer, a: layer(a["y"], reverse=True),
        ),
    }


def model_config():
    """The tiny `ModelConfig` of the bundle's Transformer, without dropout (deterministic)."""
    return ModelConfig(
        source_vocab_size=V_S,
        target_vocab_size=V_T,
        d_model=D,
        num_heads=H,
        d_ff=F,
        num_blocks=1,
        dropout_rate=0.0,
        max_source_len=12,
        max_target_len=12,
    ).validate()


def train_config():
    """The bundle's `TrainConfig`; XLA on JAX, where a step without it runs op by op (slower).

    A run of `FIT_STEPS` steps whose learning rate cools down over nearly all of it
    (`lr_cooldown`), so the fit checks the cooldown on every backend.
    """
    return TrainConfig(
        warmup_steps=4,
        label_smoothing=0.1,
        epochs=1,
        steps_per_epoch=FIT_STEPS,
        lr_cooldown=0.9,
        jit_compile=keras.backend.backend() == "jax",
    ).validate()


def model_inputs():
    """`(source_ids, target_in_ids, target_out_ids)`, int32 `[B, S]`, `[B, T]`, `[B, T]`, padded."""
    rng = np.random.default_rng(1)
    source = _ids(rng, [S, 4, 2], S, V_S)
    target_in = _ids(rng, [T, 3, 4], T, V_T, start=True)
    target_out = np.zeros_like(target_in)
    target_out[:, :-1] = target_in[:, 1:]
    return source, target_in, target_out


def _model_results(model):
    """Logits, greedy (cached) and beam-search outputs of a Transformer: a dict of NumPy arrays."""
    source, target_in, _ = model_inputs()
    greedy_ids, greedy_scores = greedy_decode(model, source, MAX_LENGTH)
    beam_ids, beam_scores = beam_search(model, source, MAX_LENGTH, beam_size=2)
    return {
        "logits": logits(model, source, target_in),
        "greedy_ids": numpy(greedy_ids),
        "greedy_scores": numpy(greedy_scores),
        "beam_ids": numpy(beam_ids),
        "beam_scores": numpy(beam_scores),
    }


def _fit(model):
    """Compile `model` with `compile_transformer` and fit it `FIT_STEPS` steps on one batch.

    Returns:
        `(losses, logits)`: the loss of each step, `[FIT_STEPS]`, and the trained model's logits
        `[B, T, V_T]`.
    """
    source, target_in, target_out = model_inputs()
    compile_transformer(model, model_config(), train_config())
    history = model.fit((source, target_in), target_out, batch_size=B, epochs=FIT_STEPS, shuffle=False, verbose=0)
    return np.array(history.history["loss"]), logits(model, source, target_in)


def write_bundle(folder, seed=0):
    """Run the layers and a tiny Transformer on this backend and save what they give to `folder`.

    Args:
        folder: the bundle's folder (made if missing).
        seed: the seed of the weights.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(seed)
    arrays, configs = {}, {}
    for name, (make, inputs, call) in layer_cases().items():
        layer = make()
        outputs = keras.tree.flatten(call(layer, inputs))
        configs[name] = keras.saving.serialize_keras_object(layer)
        arrays.update({f"{name}/input/{key}": value for key, value in inputs.items()})
        arrays.update({f"{name}/weight/{i}": value for i, value in enumerate(layer.get_weights())})
        arrays.update({f"{name}/output/{i}": numpy(value) for i, value in enumerate(outputs)})

    model = build_transformer(model_config())
    model.save(folder / "initial.keras")
    arrays.update({f"initial/{key}": value for key, value in _model_results(model).items()})
    arrays["fit/losses"], arrays["fit/logits"] = _fit(model)
    np.savez(folder / "arrays.npz", **arrays)
    (folder / "bundle.json").write_text(json.dumps({"backend": keras.backend.backend(), "layers": configs}))


def _assert_close(actual, expected, what):
    np.testing.assert_allclose(numpy(actual), expected, rtol=RTOL, atol=ATOL, err_msg=what)


def _read(folder):
    """`(arrays, meta, description)` of the bundle in `folder`, checked from this backend."""
    meta = json.loads((Path(folder) / "bundle.json").read_text())
    arrays = dict(np.load(Path(folder) / "arrays.npz"))
    return arrays, meta, f"the {meta['backend']} bundle on {keras.backend.backend()}"


def check_bundle(folder, save_to):
    """Assert that this backend reproduces the bundle in `folder` from its configs and weights.

    Args:
        folder: a folder written by `write_bundle`, on any backend.
        save_to: folder where the model trained here is saved, as `trained.keras`.

    Raises:
        AssertionError: a result differs; the message names it and both backends.
    """
    arrays, meta, here = _read(folder)
    for name, (_, inputs, call) in layer_cases().items():
        layer = keras.saving.deserialize_keras_object(meta["layers"][name], safe_mode=True)
        inputs = {key: arrays[f"{name}/input/{key}"] for key in inputs}
        call(layer, inputs)  # builds the layer
        layer.set_weights([arrays[f"{name}/weight/{i}"] for i in range(len(layer.weights))])
        for i, output in enumerate(keras.tree.flatten(call(layer, inputs))):
            _assert_close(output, arrays[f"{name}/output/{i}"], f"{here}: {name}, output {i}")

    model = keras.saving.load_model(Path(folder) / "initial.keras", safe_mode=True)
    for key, value in _model_results(model).items():
        if key.endswith("_ids"):
            np.testing.assert_array_equal(value, arrays[f"initial/{key}"], err_msg=f"{here}: {key}")
        else:
            _assert_close(value, arrays[f"initial/{key}"], f"{here}: {key}")
    losses, logits = _fit(model)
    _assert_close(losses, arrays["fit/losses"], f"{here}: losses of model.fit")
    _assert_close(logits, arrays["fit/logits"], f"{here}: logits after model.fit")
    Path(save_to).mkdir(parents=True, exist_ok=True)
    model.save(Path(save_to) / "trained.keras")


def check_trained_model(saved, folder):
    """Assert that the model another backend trained from the bundle in `folder` loads here.

    Args:
        saved: the `save_to` folder of `check_bundle` on the other backend.
        folder: the bundle that backend reproduced, written on this backend.

    Raises:
        AssertionError: the loaded model's logits are not this backend's trained logits, or its
            optimizer has not taken `FIT_STEPS` steps.
    """
    arrays, _, _ = _read(folder)
    model = keras.saving.load_model(Path(saved) / "trained.keras", safe_mode=True)
    source, target_in, _ = model_inputs()
    here = f"a model trained on another backend from the {keras.backend.backend()} bundle"
    _assert_close(logits(model, source, target_in), arrays["fit/logits"], f"{here}: logits")
    assert int(numpy(model.optimizer.iterations)) == FIT_STEPS, f"{here}: optimizer steps"
