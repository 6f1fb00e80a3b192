"""The layers, the model, `model.fit` and decoding on whichever Keras backend runs the tests.

The suite runs these on TensorFlow; `tests/test_backends.py` runs them again under
`KERAS_BACKEND=jax` and `KERAS_BACKEND=torch` with TensorFlow made unimportable, and with a
bundle of TensorFlow's results (`backend_bundle.py`) for them to reproduce from the same weights.
Only Keras, NumPy and the backend-neutral modules of `keras_transformer` are imported here.
"""

import dataclasses
import os

import keras
import numpy as np
import pytest
from keras import ops

from backends.backend_bundle import (
    REFERENCE_ENV,
    SAVE_TO_ENV,
    V_S,
    V_T,
    check_bundle,
    logits,
    model_config,
    model_inputs,
    numpy,
)
from keras_transformer.decoding import beam_search, greedy_decode
from keras_transformer.layers import TokenEmbedding
from keras_transformer.models import build_transformer
from keras_transformer.training import LateDropout, MaskedAccuracy, argmax_hits

# At the first decoding step the decoder self-attends over one key; Keras warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(1)
    return build_transformer(model_config())


def test_the_reference_bundle_is_reproduced_from_its_weights(tmp_path):
    if REFERENCE_ENV not in os.environ:
        pytest.skip(f"no bundle from another backend in ${REFERENCE_ENV}; tests/test_backends.py gives one")
    check_bundle(os.environ[REFERENCE_ENV], os.environ.get(SAVE_TO_ENV, tmp_path))


def test_appending_padding_changes_no_real_logit(model):
    source, target_in, _ = model_inputs()
    unpadded = logits(model, source, target_in)
    padded = logits(model, np.pad(source, ((0, 0), (0, 3))), np.pad(target_in, ((0, 0), (0, 2))))
    real = target_in != 0
    np.testing.assert_allclose(padded[:, : target_in.shape[1]][real], unpadded[real], rtol=1e-5, atol=1e-5)


def test_changing_a_target_token_changes_no_earlier_logit(model):
    source, target_in, _ = model_inputs()
    changed = target_in.copy()
    changed[:, 2] = (changed[:, 2] % (V_T - 4)) + 4  # another real token at position 2
    before, after = logits(model, source, target_in), logits(model, source, changed)
    np.testing.assert_allclose(after[:, :2], before[:, :2], rtol=1e-5, atol=1e-6)
    assert np.abs(after[0, 2:] - before[0, 2:]).max() > 1e-4


def test_cached_greedy_decoding_is_the_uncached_decoding(model):
    source, _, _ = model_inputs()
    cached = greedy_decode(model, source, 7)
    uncached = greedy_decode(model, source, 7, use_cache=False)
    np.testing.assert_array_equal(numpy(cached[0]), numpy(uncached[0]))
    np.testing.assert_allclose(numpy(cached[1]), numpy(uncached[1]), rtol=1e-5, atol=1e-5)


def test_cached_decoding_of_the_document_variant_keeps_its_sign_masks():
    """The document's masks come from each sublayer's inputs; the cache keeps one bit per position."""
    keras.utils.set_random_seed(2)
    document = build_transformer(dataclasses.replace(model_config(), variant="document", num_blocks=2))
    source, _, _ = model_inputs()
    cached = greedy_decode(document, source, 7)
    uncached = greedy_decode(document, source, 7, use_cache=False)
    np.testing.assert_array_equal(numpy(cached[0]), numpy(uncached[0]))
    beam = beam_search(document, source, 7, beam_size=1, alpha=0.0)  # its cache reordered at every step
    np.testing.assert_array_equal(numpy(beam[0]), numpy(cached[0]))


@pytest.mark.parametrize("decoder", [greedy_decode, beam_search])
def test_decoders_of_an_empty_batch_return_empty_results(model, decoder):
    ids, scores = decoder(model, np.zeros((0, 4), "int32"), 5)
    assert tuple(ids.shape) == (0, 5) and tuple(scores.shape) == (0,)


def test_first_adam_step_moves_every_embedding_entry_of_a_batch_token_by_the_learning_rate():
    # Adam's first step is `lr * g / (|g| + epsilon)`, with `g` the summed gradient of every
    # occurrence of a token; ids 5 and 9 occur twice, 7 once, the others not at all.
    ids = np.array([[5, 5, 7, 0], [5, 9, 9, 0]], "int32")
    weights = np.random.default_rng(0).normal(size=(2, 4, 8)).astype("float32")
    token_ids = keras.Input((None,), dtype="int32")
    embedding = keras.Model(token_ids, TokenEmbedding(V_S, 8)(token_ids))
    embedding.compile(keras.optimizers.Adam(0.01, epsilon=1e-12), loss=lambda y, outputs: ops.sum(outputs * y))
    before = embedding.get_weights()[0]
    embedding.fit(ids, weights, batch_size=2, epochs=1, verbose=0)
    moved = np.abs(embedding.get_weights()[0] - before) / 0.01  # [V, D], in learning rates
    in_batch = np.isin(np.arange(V_S), [5, 7, 9])
    np.testing.assert_allclose(moved[in_batch], 1.0, rtol=1e-4)
    np.testing.assert_array_equal(moved[~in_batch], 0.0)


def test_late_dropout_trains_at_the_raised_rate_from_the_start_step_on():
    # Identity through a Dropout: the training loss (MSE to the input) is 0 without dropout.
    x = np.random.default_rng(0).normal(size=(8, 64)).astype("float32")
    inputs = keras.Input((64,))
    weighted = keras.layers.Dense(64, use_bias=False, kernel_initializer="identity")(inputs)
    probe = keras.Model(inputs, keras.layers.Dropout(1e-6, seed=1)(weighted))
    probe.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="mse")
    late = LateDropout(0.5, start_step=5, from_rate=1e-6)

    history = probe.fit(x, x, batch_size=2, epochs=2, shuffle=False, verbose=0, callbacks=[late])

    losses = np.array(history.history["loss"])  # mean over each epoch's 4 steps
    assert late.raised_at == 5
    assert losses[0] < 1e-6  # steps 1..4 at 1e-6
    # Steps 6..8 drop half the inputs and double the rest: MSE = E[x^2], about 1.
    assert 0.5 < losses[1] < 1.5 * 3 / 4
    assert probe.layers[-1].rate == 0.5
    np.testing.assert_allclose(numpy(probe(x)), x, atol=1e-5)  # inference is unchanged
    # A later `fit` keeps training at the raised rate.
    again = probe.fit(x, x, batch_size=8, epochs=1, verbose=0, callbacks=[late])
    assert again.history["loss"][0] > 0.5 and late.raised_at == 5


# ---------------------------------------------------------------- fused attention


def _attention_pair(**kwargs):
    """The explicit and the fused `MultiheadAttention`, built on the same weights."""
    from keras_transformer.layers.attention import MultiheadAttention

    explicit = MultiheadAttention(num_heads=4, attention_implementation="explicit", **kwargs)
    fused = MultiheadAttention(num_heads=4, attention_implementation="fused", **kwargs)
    return explicit, fused


def _padded_inputs():
    rng = np.random.default_rng(0)
    queries = rng.normal(size=(3, 7, 16)).astype("float32")
    keys = rng.normal(size=(3, 5, 16)).astype("float32")
    queries[0, 5:] = 0.0  # padding queries
    keys[1, 3:] = 0.0  # padding keys
    keys[2] = 0.0  # a source that is all padding
    return queries, keys


@pytest.mark.parametrize("causality", [False, True])
def test_fused_attention_is_the_explicit_attention_with_padding_and_causality(causality):
    queries, keys = _padded_inputs()
    keys = queries if causality else keys
    explicit, fused = _attention_pair(causality=causality)
    explicit(queries, keys), fused(queries, keys)
    fused.set_weights(explicit.get_weights())
    expected, got = numpy(explicit(queries, keys)), numpy(fused(queries, keys))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.all(got[0, 5:] == 0.0)  # padding queries stay exactly zero


def test_fused_attention_over_a_key_value_cache_is_the_explicit_attention():
    """A decoding step: one new query over cached keys and values, of which the last two are not yet written."""
    queries, keys = _padded_inputs()
    explicit, fused = _attention_pair()
    explicit(queries, keys), fused(queries, keys)
    fused.set_weights(explicit.get_weights())
    key, value = explicit.project_keys_values(keys)
    allowed = ops.convert_to_tensor(np.array([[1, 1, 1, 0, 0]] * 3, bool)[:, None, None, :])  # (B, 1, 1, T_k)
    step = ops.convert_to_tensor(queries[:, 2:3])  # `attend` takes tensors (a layer call converts arrays)
    queries_mask = ops.convert_to_tensor(np.ones((3, 1), bool))
    # `attend` called directly, outside a layer call: PyTorch tracks gradients, so stop them to read the values.
    expected = numpy(ops.stop_gradient(explicit.attend(step, key, value, allowed, queries_mask)))
    got = numpy(ops.stop_gradient(fused.attend(step, key, value, allowed, queries_mask)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_fused_attention_matches_in_bfloat16_within_its_precision():
    queries, keys = _padded_inputs()
    explicit, fused = _attention_pair(dtype="mixed_bfloat16")
    explicit(queries, keys), fused(queries, keys)
    fused.set_weights(explicit.get_weights())
    expected = numpy(ops.cast(explicit(queries, keys), "float32"))
    got = numpy(ops.cast(fused(queries, keys), "float32"))
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)
    assert np.all(got[0, 5:] == 0.0)


def test_auto_fuses_on_this_backend_where_it_was_measured_faster():
    from keras_transformer.layers.attention import MultiheadAttention
    from keras_transformer.layers.fused_attention import fused_device

    device = fused_device()
    assert device in {"tensorflow": {None}, "jax": {None, "gpu"}, "torch": {"cpu", "gpu"}}[keras.backend.backend()]
    layer = MultiheadAttention(num_heads=2)
    assert layer.uses_fused(64) is (device == "cpu")  # on a GPU, 64 keys is below the crossover
    assert layer.uses_fused(1024) is (device is not None)


def test_accuracy_without_an_argmax_counts_what_the_argmax_would_ties_included():
    """`argmax_hits` is `argmax == label` on every backend: the first of tied largest logits predicts."""
    rng = np.random.default_rng(0)
    logits = rng.integers(-2, 3, size=(4, 7, 6)).astype("float32")  # small integers: many ties
    labels = rng.integers(0, 6, size=(4, 7)).astype("int32")
    labels[:, 0] = np.argmax(logits[:, 0], -1)  # some right for sure
    expected = np.argmax(logits, -1) == labels
    np.testing.assert_array_equal(ops.convert_to_numpy(argmax_hits(logits, labels)), expected)
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    real = labels != 0
    assert float(metric.result()) == pytest.approx(expected[real].mean())
