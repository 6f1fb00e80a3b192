"""Numerical tests of `keras_transformer.layers`.

Layers are compared, with their weights copied out, to the NumPy version of the tutorial's
formulas in `tests/reference.py` (never to unexplained constants), and held to the properties the
rest of the model relies on: padding invariance, exactly-zero padding rows, zero attention on
padded keys, causality, masks, config round trips and parameter counts.

Tiny sizes throughout: B=2, S=5, T=4, D=8, H=2, F=16.
"""

import math

import keras
import numpy as np
import pytest
import reference
from keras.src.initializers.random_initializers import compute_fans

from keras_transformer.layers import (
    DecoderBlock,
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiheadAttention,
    PositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)

B, S, T, D, H, F = 2, 5, 4, 8, 2, 16
V = 10  # vocabulary size
ATOL = 1e-5


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def to_numpy(x):
    if isinstance(x, keras.Variable):
        return x.numpy()  # (NumPy 2 warns when converting a TF variable with np.array)
    return keras.ops.convert_to_numpy(x)


def padded(rng, lengths, max_length, width=D):
    """Random float32 `[len(lengths), max_length, width]` with all-zero rows after each length."""
    x = rng.normal(size=(len(lengths), max_length, width)).astype("float32")
    for b, length in enumerate(lengths):
        x[b, length:] = 0.0
    return x


def real_positions(x):
    """Bool `[B, T]`: True where `x [B, T, D]` is not all zeros (or where ids `[B, T]` are non-zero)."""
    x = np.asarray(x)
    return x != 0 if x.ndim == 2 else np.any(x != 0, axis=-1)


def randomize(layer, rng, scale=0.5):
    """Set every weight of a built layer (gamma, beta and biases included) to random values, so
    that a comparison with the reference exercises every weight."""
    layer.set_weights([rng.normal(scale=scale, size=w.shape).astype("float32") for w in layer.get_weights()])


def attention_params(layer):
    """The weights of a built `MultiheadAttention`, named as `reference.multihead_attention` wants."""
    params = {}
    for name in ("query", "key", "value"):
        dense = getattr(layer, f"{name}_dense")
        params[f"{name}_kernel"] = to_numpy(dense.kernel)
        params[f"{name}_bias"] = to_numpy(dense.bias)
    if layer.use_output_projection:
        params["output_kernel"] = to_numpy(layer.output_dense.kernel)
        params["output_bias"] = to_numpy(layer.output_dense.bias)
    params["gamma"] = to_numpy(layer.layer_norm.gamma)
    params["beta"] = to_numpy(layer.layer_norm.beta)
    return params


def attention_reference(layer, queries, keys, values=None, **kwargs):
    activation = layer.get_config()["projection_activation"]
    return reference.multihead_attention(
        queries,
        keys,
        values,
        attention_params(layer),
        layer.num_heads,
        causality=layer.causality,
        use_output_projection=layer.use_output_projection,
        projection_activation=None if activation == "linear" else activation,
        epsilon=layer.epsilon,
        **kwargs,
    )


def feedforward_reference(layer, x, **kwargs):
    return reference.feedforward(
        x,
        to_numpy(layer.inner_conv.kernel)[0],  # Conv1D kernel [1, D, F] -> [D, F]
        to_numpy(layer.inner_conv.bias),
        to_numpy(layer.outer_conv.kernel)[0],  # [1, F, D] -> [F, D]
        to_numpy(layer.outer_conv.bias),
        to_numpy(layer.layer_norm.gamma),
        to_numpy(layer.layer_norm.beta),
        epsilon=layer.epsilon,
        **kwargs,
    )


def encoder_reference(block, x):
    outputs, _ = attention_reference(block.self_attention, x, x)
    return feedforward_reference(block.feed_forward, outputs)


def decoder_reference(block, x, memory):
    outputs, _ = attention_reference(block.self_attention, x, x)
    outputs, _ = attention_reference(block.cross_attention, outputs, memory)
    return feedforward_reference(block.feed_forward, outputs)


def built(layer, *inputs, rng=None):
    """Call `layer` once to build it; with `rng`, then randomize its weights."""
    layer(*inputs)
    if rng is not None:
        randomize(layer, rng)
    return layer


def attention_inputs(rng, kind):
    """(queries, keys, values) with padded rows at the end of some sequences."""
    queries = padded(rng, [2, T], T)
    if kind == "self":
        return queries, queries, None
    keys = padded(rng, [S, 3], S, width=6)  # other length, other width
    if kind == "cross":
        return queries, keys, None
    values = padded(rng, [S, 3], S, width=5)
    return queries, keys, values  # "cross_values"


# Every layer, with a factory and a function building its inputs. The first input decides the
# real positions of the output.
LAYERS = {
    "layer_norm": (lambda: LayerNorm(), lambda rng: [padded(rng, [2, T], T)]),
    "attention": (lambda: MultiheadAttention(H), lambda rng: [padded(rng, [2, T], T)] * 2),
    "attention_per_head": (
        lambda: MultiheadAttention(H, initialization="per_head"),
        lambda rng: [padded(rng, [2, T], T)] * 2,
    ),
    "attention_tutorial": (
        lambda: MultiheadAttention(H, causality=True, use_output_projection=False, projection_activation="relu"),
        lambda rng: [padded(rng, [2, T], T)] * 2,
    ),
    "attention_cross": (
        lambda: MultiheadAttention(H, num_units=4),
        lambda rng: [padded(rng, [2, T], T), padded(rng, [S, 3], S, width=6)],
    ),
    "feed_forward": (lambda: FeedForward((F, D)), lambda rng: [padded(rng, [2, T], T)]),
    "token_embedding": (
        lambda: TokenEmbedding(V, D),
        lambda rng: [np.array([[3, 1, 0, 0], [2, 5, 9, 4]])],
    ),
    "positional_encoding": (lambda: PositionalEncoding(), lambda rng: [padded(rng, [2, T], T)]),
    "learned_positional_encoding": (
        lambda: PositionalEncoding(learned=True, max_length=16),
        lambda rng: [padded(rng, [2, T], T)],
    ),
    "encoder": (lambda: EncoderBlock(H, F), lambda rng: [padded(rng, [3, S], S)]),
    "decoder": (
        lambda: DecoderBlock(H, F),
        lambda rng: [padded(rng, [2, T], T), padded(rng, [S, 3], S)],
    ),
}
# Every layer except LayerNorm, which by design returns `beta` at a zero row.
ZEROING_LAYERS = [name for name in LAYERS if name != "layer_norm"]


def make_layer(name, rng):
    factory, make_inputs = LAYERS[name]
    inputs = make_inputs(rng)
    layer = built(factory(), *inputs, rng=rng)
    return layer, inputs


def pad_sequences(x, extra):
    """Append `extra` padding positions (zero rows, or id 0) to the sequence axis of `x`."""
    width = [(0, 0)] * x.ndim
    width[1] = (0, extra)
    return np.pad(x, width)


# ---------------------------------------------------------------------------
# LayerNorm
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(B, T, D), (3, D)])
def test_layer_norm_matches_reference(shape):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=shape) * 3 + 1).astype("float32")
    layer = built(LayerNorm(), x, rng=rng)
    expected = reference.normalize(x, to_numpy(layer.gamma), to_numpy(layer.beta), epsilon=1e-8)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=ATOL)


def test_layer_norm_weights_have_channel_shape_and_start_at_ones_and_zeros():
    layer = built(LayerNorm(), np.ones((B, T, D), "float32"))
    assert tuple(layer.gamma.shape) == (D,)
    assert tuple(layer.beta.shape) == (D,)
    np.testing.assert_array_equal(to_numpy(layer.gamma), np.ones(D))
    np.testing.assert_array_equal(to_numpy(layer.beta), np.zeros(D))


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_layer_norm_of_zero_row_is_beta(policy):
    """A padding row normalizes to `beta`, finite in every compute dtype (the sublayers then
    multiply it by 0, which only gives 0 when it is finite)."""
    rng = np.random.default_rng(0)
    layer = built(LayerNorm(dtype=policy), np.ones((1, 1, D), "float32"), rng=rng)
    outputs = to_numpy(keras.ops.cast(layer(np.zeros((1, 1, D), "float32")), "float32"))
    beta = to_numpy(keras.ops.cast(layer.beta, layer.compute_dtype)).astype("float32")
    np.testing.assert_allclose(outputs[0, 0], beta, atol=ATOL)


# ---------------------------------------------------------------------------
# MultiheadAttention against the reference
# ---------------------------------------------------------------------------
ATTENTION_CASES = pytest.mark.parametrize(
    "causality, use_output_projection, projection_activation, kind",
    [
        (causality, projection, activation, kind)
        for causality in (False, True)
        for projection in (True, False)
        for activation in (None, "relu")
        for kind in ("self", "cross", "cross_values")
    ],
)


def run_attention_case(causality, use_output_projection, projection_activation, kind):
    rng = np.random.default_rng(0)
    queries, keys, values = attention_inputs(rng, kind)
    layer = MultiheadAttention(
        H,
        causality=causality,
        use_output_projection=use_output_projection,
        projection_activation=projection_activation,
    )
    built(layer, queries, keys, values, rng=rng)
    outputs, weights = layer(queries, keys, values, return_attention_scores=True)
    expected_outputs, expected_weights = attention_reference(layer, queries, keys, values)
    return to_numpy(outputs), to_numpy(weights), expected_outputs, expected_weights


@ATTENTION_CASES
def test_attention_outputs_match_reference(causality, use_output_projection, projection_activation, kind):
    case = (causality, use_output_projection, projection_activation, kind)
    outputs, _, expected, _ = run_attention_case(*case)
    assert outputs.shape == (B, T, D)
    np.testing.assert_allclose(outputs, expected, atol=ATOL)


@ATTENTION_CASES
def test_attention_weights_match_reference(causality, use_output_projection, projection_activation, kind):
    case = (causality, use_output_projection, projection_activation, kind)
    _, weights, _, expected = run_attention_case(*case)
    assert weights.shape == expected.shape == (B, H, T, T if kind == "self" else S)
    np.testing.assert_allclose(weights, expected, atol=ATOL)


@pytest.mark.parametrize("causality", [False, True])
def test_tutorial_configuration_reproduces_tutorial_code_at_real_positions(causality):
    """`use_output_projection=False, projection_activation="relu"` is the tutorial's code.

    Padding rows differ by design: the tutorial leaves LayerNorm's `beta` there, the layer
    zeros them (so that sign masks stay right in later layers).
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = MultiheadAttention(H, causality=causality, use_output_projection=False, projection_activation="relu")
    built(layer, x, x, rng=rng)
    outputs = to_numpy(layer(x, x))
    tutorial, _ = reference.multihead_attention(
        x,
        x,
        None,
        attention_params(layer),
        H,
        causality=causality,
        use_output_projection=False,
        projection_activation="relu",
        zero_padding_rows=False,
    )
    real = real_positions(x)
    np.testing.assert_allclose(outputs[real], tutorial[real], atol=ATOL)
    beta = to_numpy(layer.layer_norm.beta)
    np.testing.assert_allclose(tutorial[~real], np.broadcast_to(beta, tutorial[~real].shape), atol=ATOL)
    assert np.all(outputs[~real] == 0.0)


# ---------------------------------------------------------------------------
# Attention weights
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("causality", [False, True])
def test_attention_weights_on_padded_keys_are_exactly_zero(causality):
    rng = np.random.default_rng(0)
    queries, keys, _ = attention_inputs(rng, "cross")
    layer = built(MultiheadAttention(H, causality=causality), queries, keys)
    _, weights = layer(queries, keys, return_attention_scores=True)
    weights = to_numpy(weights)
    padded_keys = ~real_positions(keys)  # (B, S)
    assert padded_keys.any()
    assert np.all(weights.transpose(0, 3, 1, 2)[padded_keys] == 0.0)


@pytest.mark.parametrize("causality", [False, True])
def test_attention_weights_sum_to_one_at_real_queries_and_zero_at_padded_queries(causality):
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(MultiheadAttention(H, causality=causality), x, x)
    _, weights = layer(x, x, return_attention_scores=True)
    sums = to_numpy(weights).sum(axis=-1).transpose(0, 2, 1)  # (B, T, H)
    real = real_positions(x)
    np.testing.assert_allclose(sums[real], 1.0, atol=ATOL)
    assert np.all(sums[~real] == 0.0)


def test_causal_attention_weights_above_diagonal_are_zero():
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    layer = built(MultiheadAttention(H, causality=True), x, x)
    _, weights = layer(x, x, return_attention_scores=True)
    future = np.triu(np.ones((T, T), bool), k=1)
    assert np.all(to_numpy(weights)[:, :, future] == 0.0)


def test_vector_summing_to_zero_is_a_real_key():
    """The sign mask is `sum(|x|) > 0`, not the tutorial's `|sum(x)| > 0` (masks.py deviation)."""
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    x[0, 1] = np.tile([1.0, -1.0], D // 2)  # sums to zero, is not padding
    layer = built(MultiheadAttention(H), x, x, rng=rng)
    outputs, weights = layer(x, x, return_attention_scores=True)
    assert np.all(to_numpy(weights)[0, :, :, 1] > 0)
    expected, _ = attention_reference(layer, x, x)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=ATOL)


# ---------------------------------------------------------------------------
# Explicit and Keras masks
# ---------------------------------------------------------------------------
def test_explicit_keys_mask_takes_precedence_over_sign_mask():
    rng = np.random.default_rng(0)
    queries = padded(rng, [T, T], T)
    keys = padded(rng, [S, 3], S)
    keys_mask = real_positions(keys)
    keys_mask[0, 1] = False  # a non-zero key marked as padding
    keys_mask[1, 3] = True  # a zero key marked as real
    layer = built(MultiheadAttention(H), queries, keys, rng=rng)
    outputs, weights = layer(queries, keys, keys_mask=keys_mask, return_attention_scores=True)
    weights = to_numpy(weights)
    assert np.all(weights[0, :, :, 1] == 0.0)
    assert np.all(weights[1, :, :, 3] > 0.0)
    expected, expected_weights = attention_reference(layer, queries, keys, keys_mask=keys_mask)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=ATOL)
    np.testing.assert_allclose(weights, expected_weights, atol=ATOL)
    # The key marked as padding is ignored: changing it changes nothing.
    changed = keys.copy()
    changed[0, 1] = rng.normal(size=D) * 10
    changed_outputs = to_numpy(layer(queries, changed, keys_mask=keys_mask))
    np.testing.assert_allclose(changed_outputs, to_numpy(outputs), atol=ATOL)


def test_explicit_queries_mask_takes_precedence_over_sign_mask():
    rng = np.random.default_rng(0)
    x = padded(rng, [T, 3], T)
    queries_mask = real_positions(x)
    queries_mask[0, 1] = False  # a non-zero query marked as padding
    queries_mask[1, 3] = True  # a zero query marked as real
    layer = built(MultiheadAttention(H), x, x, rng=rng)
    outputs, weights = layer(x, x, queries_mask=queries_mask, return_attention_scores=True)
    outputs, weights = to_numpy(outputs), to_numpy(weights)
    assert np.all(outputs[0, 1] == 0.0) and np.all(weights[0, :, 1] == 0.0)
    assert np.any(outputs[1, 3] != 0.0)
    np.testing.assert_allclose(weights[1, :, 3].sum(-1), 1.0, atol=ATOL)
    expected, expected_weights = attention_reference(layer, x, x, queries_mask=queries_mask)
    np.testing.assert_allclose(outputs, expected, atol=ATOL)
    np.testing.assert_allclose(weights, expected_weights, atol=ATOL)


def masked_embeddings():
    """Embeddings with a Keras mask that differs from the sign mask: token 3's row is zeroed, so
    it embeds to a zero vector but is a real token. Returns (embedding layer, embed function)."""
    embedding = TokenEmbedding(V, D, mask_zero=True)
    embedding(np.ones((1, 1), "int32"))
    table = to_numpy(embedding.embeddings).copy()
    table[3] = 0.0
    embedding.set_weights([table])
    return embedding


SOURCE_IDS = np.array([[1, 3, 2, 0, 0], [4, 5, 6, 7, 3]])
TARGET_IDS = np.array([[3, 2, 0, 0], [8, 3, 9, 1]])


def call_with_masks(name, layer, inputs, masks):
    """Call `layer` on `inputs` passing `masks` (a list, one per input) explicitly."""
    if name.startswith("attention"):
        return layer(inputs[0], inputs[-1], queries_mask=masks[0], keys_mask=masks[-1])
    if name == "decoder":
        return layer(inputs[0], inputs[1], inputs_mask=masks[0], memory_mask=masks[1])
    return layer(inputs[0], mask=masks[0])


@pytest.mark.parametrize(
    "name", ["attention", "attention_cross", "feed_forward", "positional_encoding", "encoder", "decoder"]
)
def test_keras_mask_from_mask_zero_embedding_equals_explicit_mask(name):
    embedding = masked_embeddings()
    if name in ("attention_cross", "decoder"):
        ids = [TARGET_IDS, SOURCE_IDS]
    elif name == "attention":
        ids = [TARGET_IDS, TARGET_IDS]
    else:
        ids = [TARGET_IDS]
    with_keras_masks = [embedding(i) for i in ids]
    plain = [to_numpy(x) for x in with_keras_masks]  # the same values without a Keras mask
    masks = [i != 0 for i in ids]
    assert all(to_numpy(x._keras_mask).tolist() == m.tolist() for x, m in zip(with_keras_masks, masks))
    factory = {
        "attention": lambda: MultiheadAttention(H),
        "attention_cross": lambda: MultiheadAttention(H),
        "feed_forward": lambda: FeedForward((F, D)),
        "positional_encoding": lambda: PositionalEncoding(),
        "encoder": lambda: EncoderBlock(H, F),
        "decoder": lambda: DecoderBlock(H, F),
    }[name]
    layer = built(factory(), *plain, rng=np.random.default_rng(0))
    automatic = to_numpy(layer(*with_keras_masks))
    explicit = to_numpy(call_with_masks(name, layer, plain, masks))
    sign_masks = to_numpy(layer(*plain))
    np.testing.assert_allclose(automatic, explicit, atol=ATOL)
    # Token 3 embeds to zeros: the sign masks call it padding, the Keras mask does not.
    assert not np.allclose(automatic, sign_masks, atol=ATOL)


def test_explicit_mask_takes_precedence_over_keras_mask():
    embedding = masked_embeddings()
    x = embedding(TARGET_IDS)
    mask = TARGET_IDS != 0
    mask[1, 0] = False
    layer = built(MultiheadAttention(H), to_numpy(x), to_numpy(x))
    explicit = to_numpy(layer(x, x, queries_mask=mask, keys_mask=mask))
    plain = to_numpy(layer(to_numpy(x), to_numpy(x), queries_mask=mask, keys_mask=mask))
    np.testing.assert_allclose(explicit, plain, atol=ATOL)
    assert np.all(explicit[1, 0] == 0.0)


# ---------------------------------------------------------------------------
# Padding: invariance, zero rows, fully padded sequences
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["attention", "attention_tutorial", "attention_cross", "feed_forward", "encoder", "decoder"],
)
def test_appending_padding_changes_no_real_output(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    outputs = to_numpy(layer(*inputs))
    real = real_positions(inputs[0])
    choices = [[i] for i in range(len(inputs))] + [list(range(len(inputs)))]
    for which in choices:  # pad each input alone, then all of them
        longer = [pad_sequences(x, 3) if i in which else x for i, x in enumerate(inputs)]
        longer_outputs = to_numpy(layer(*longer))[:, : outputs.shape[1]]
        np.testing.assert_allclose(longer_outputs[real], outputs[real], atol=ATOL, err_msg=f"padded {which}")


@pytest.mark.parametrize("name", ZEROING_LAYERS)
def test_padding_rows_of_outputs_are_exactly_zero(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    outputs = to_numpy(layer(*inputs))
    padding = ~real_positions(inputs[0])
    assert padding.any()
    assert np.all(outputs[padding] == 0.0)


@pytest.mark.parametrize("name", ZEROING_LAYERS)
def test_fully_padded_sequences_give_finite_zero_outputs(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    for x in inputs:
        x[0] = 0  # the first sequence of every input is all padding
    outputs = to_numpy(layer(*inputs))
    assert np.all(np.isfinite(outputs))
    assert np.all(outputs[0] == 0.0)


@pytest.mark.parametrize("name", ["attention_cross", "decoder"])
def test_real_queries_with_fully_padded_keys_give_finite_outputs(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    inputs[1][0] = 0.0  # no real key for the first sequence
    outputs = to_numpy(layer(*inputs))
    assert np.all(np.isfinite(outputs))


# ---------------------------------------------------------------------------
# Causality
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["attention_causal", "decoder"])
@pytest.mark.parametrize("t", range(T))
def test_changing_position_t_changes_no_earlier_output(name, t):
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    memory = padded(rng, [S, 3], S)
    if name == "decoder":
        layer = built(DecoderBlock(H, F), x, memory, rng=rng)
        call = lambda inputs: to_numpy(layer(inputs, memory))  # noqa: E731
    else:
        layer = built(MultiheadAttention(H, causality=True), x, x, rng=rng)
        call = lambda inputs: to_numpy(layer(inputs, inputs))  # noqa: E731
    changed = x.copy()
    changed[:, t] = rng.normal(size=(B, D)) * 3
    outputs, changed_outputs = call(x), call(changed)
    np.testing.assert_allclose(changed_outputs[:, :t], outputs[:, :t], atol=ATOL)
    assert not np.allclose(changed_outputs[:, t], outputs[:, t], atol=ATOL)


# ---------------------------------------------------------------------------
# FeedForward and blocks against the reference
# ---------------------------------------------------------------------------
def test_feed_forward_matches_reference():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D)), x, rng=rng)
    np.testing.assert_allclose(to_numpy(layer(x)), feedforward_reference(layer, x), atol=ATOL)


def test_conv1d_with_kernel_size_one_is_a_dense_map():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D)), x, rng=rng)
    for conv, inputs, activation in [
        (layer.inner_conv, x, "relu"),
        (layer.outer_conv, rng.normal(size=(B, T, F)).astype("float32"), None),
    ]:
        kernel = to_numpy(conv.kernel)
        assert kernel.shape[0] == 1
        expected = reference.dense(inputs, kernel[0], to_numpy(conv.bias), activation)
        np.testing.assert_allclose(to_numpy(conv(inputs)), expected, atol=ATOL)


def test_encoder_block_matches_reference():
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    block = built(EncoderBlock(H, F), x, rng=rng)
    np.testing.assert_allclose(to_numpy(block(x)), encoder_reference(block, x), atol=ATOL)


def test_decoder_block_matches_reference():
    rng = np.random.default_rng(0)
    x, memory = padded(rng, [2, T], T), padded(rng, [S, 3], S)
    block = built(DecoderBlock(H, F), x, memory, rng=rng)
    outputs, weights = block(x, memory, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(outputs), decoder_reference(block, x, memory), atol=ATOL)
    assert to_numpy(weights["self_attention"]).shape == (B, H, T, T)
    assert to_numpy(weights["cross_attention"]).shape == (B, H, T, S)


# ---------------------------------------------------------------------------
# TokenEmbedding and PositionalEncoding
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [True, False])
def test_token_embedding_matches_reference(scale):
    rng = np.random.default_rng(0)
    ids = np.array([[3, 1, 0, 0], [2, 5, 9, 4]])
    layer = built(TokenEmbedding(V, D, scale=scale), ids, rng=rng)
    expected = reference.embedding(ids, to_numpy(layer.embeddings), scale=scale)
    np.testing.assert_allclose(to_numpy(layer(ids)), expected, atol=ATOL)


def test_padding_id_embeds_to_exact_zeros_even_with_nonzero_weight_row():
    layer = built(TokenEmbedding(V, D), np.ones((1, 1), "int32"))
    layer.set_weights([np.ones((V, D), "float32")])
    outputs = to_numpy(layer(np.array([[0, 1, 0]])))
    assert np.all(outputs[0, [0, 2]] == 0.0)
    np.testing.assert_allclose(outputs[0, 1], math.sqrt(D), atol=ATOL)


def test_token_embedding_scales_by_sqrt_d_model():
    ids = np.array([[3, 1, 0, 0], [2, 5, 9, 4]])
    scaled = built(TokenEmbedding(V, D, scale=True), ids)
    unscaled = built(TokenEmbedding(V, D, scale=False), ids)
    unscaled.set_weights(scaled.get_weights())
    np.testing.assert_allclose(to_numpy(scaled(ids)), math.sqrt(D) * to_numpy(unscaled(ids)), atol=ATOL)


@pytest.mark.parametrize("length, depth", [(T, D), (50, 16), (6, 7)])
def test_sinusoidal_encoding_matches_paper_formula(length, depth):
    encoding = to_numpy(sinusoidal_encoding(length, depth))
    np.testing.assert_allclose(encoding, reference.positional_encoding(length, depth), atol=ATOL)


def test_positional_encoding_adds_sinusoids_only_at_real_positions():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    outputs = to_numpy(PositionalEncoding()(x))
    real = real_positions(x)
    expected = x + reference.positional_encoding(T, D)[None] * real[:, :, None]
    np.testing.assert_allclose(outputs, expected, atol=ATOL)
    assert np.all(outputs[~real] == 0.0)


def test_learned_positional_encoding_has_max_length_by_d_weight_added_at_real_positions():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(PositionalEncoding(learned=True, max_length=16), x, rng=rng)
    table = to_numpy(layer.position_embeddings)
    assert table.shape == (16, D)
    real = real_positions(x)
    expected = x + table[None, :T] * real[:, :, None]
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=ATOL)


@pytest.mark.parametrize("num_heads", [2, 4])
def test_per_head_initialization_uses_the_fans_of_the_per_head_kernel_views(num_heads):
    """`initialization="per_head"` draws W^Q, W^K, W^V, W^O from Glorot uniform with the fans of
    their per-head views [D, H, K] and [H, K, D]; "glorot" (the tutorial's) from Glorot uniform
    on the [D, D] kernels."""
    width, heads = 64, num_heads
    head_width = width // heads
    x = np.zeros((1, 3, width), "float32")
    limits = {
        "glorot": (math.sqrt(6 / (2 * width)),) * 2,
        "per_head": (math.sqrt(6 / (width * heads + width * head_width)), math.sqrt(6 / (width + width * heads))),
    }
    for initialization, (projection_limit, output_limit) in limits.items():
        keras.utils.set_random_seed(0)
        layer = MultiheadAttention(num_heads=heads, initialization=initialization)
        layer(x, x)
        for dense, limit in [
            (layer.query_dense, projection_limit),
            (layer.key_dense, projection_limit),
            (layer.value_dense, projection_limit),
            (layer.output_dense, output_limit),
        ]:
            kernel = np.abs(to_numpy(dense.kernel))
            assert 0.95 * limit < kernel.max() <= limit, (initialization, dense.name)
    # The per-head fans are those of Glorot on the [D, H, K] and [H, K, D] views of the kernels.
    for shape, limit in [
        ((width, heads, head_width), limits["per_head"][0]),
        ((heads, head_width, width), limits["per_head"][1]),
    ]:
        fan_in, fan_out = compute_fans(shape)
        assert math.sqrt(6 / (fan_in + fan_out)) == pytest.approx(limit)


def test_unknown_initialization_raises_value_error():
    with pytest.raises(ValueError, match="initialization"):
        MultiheadAttention(num_heads=2, initialization="orthogonal")


# ---------------------------------------------------------------------------
# Configs and serialization
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(LAYERS))
def test_from_config_round_trip_gives_same_config_and_outputs(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    clone(*inputs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(clone(*inputs)), to_numpy(layer(*inputs)), atol=ATOL)


@pytest.mark.parametrize("name", list(LAYERS))
def test_keras_serialize_round_trip_gives_same_layer(name):
    rng = np.random.default_rng(0)
    layer, inputs = make_layer(name, rng)
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()
    restored(*inputs)
    restored.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(restored(*inputs)), to_numpy(layer(*inputs)), atol=ATOL)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: MultiheadAttention(num_heads=3, num_units=8), r"num_units=8, num_heads=3"),
        (lambda: MultiheadAttention(num_heads=0), r"num_heads=0"),
        (lambda: MultiheadAttention(num_heads=H, dropout_rate=1.0), r"dropout_rate=1.0"),
        (lambda: MultiheadAttention(num_heads=H, dropout_rate=-0.1), r"dropout_rate=-0.1"),
        (lambda: FeedForward((F, D), dropout_rate=1.5), r"dropout_rate=1.5"),
        (lambda: FeedForward((F,)), r"num_units=\(16,\)"),
        (lambda: PositionalEncoding(learned=True), r"max_length=None"),
        (lambda: LayerNorm(epsilon=0.0), r"epsilon=0.0"),
        (lambda: TokenEmbedding(0, D), r"vocab_size=0"),
        (lambda: EncoderBlock(H, d_ff=0), r"d_ff=0"),
    ],
    ids=[
        "attention_num_units_not_divisible",
        "attention_num_heads",
        "attention_dropout_one",
        "attention_dropout_negative",
        "feed_forward_dropout",
        "feed_forward_num_units_length",
        "learned_positions_without_max_length",
        "layer_norm_epsilon",
        "token_embedding_vocab_size",
        "block_d_ff",
    ],
)
def test_invalid_hyperparameters_raise_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: MultiheadAttention(num_heads=3), r"width=8, num_heads=3"),
        (
            lambda: MultiheadAttention(num_heads=H, num_units=4, use_output_projection=False),
            r"num_units=4, width=8",
        ),
        (lambda: FeedForward((F, 6)), r"num_units=\(16, 6\), input width=8"),
        (lambda: EncoderBlock(num_heads=3, d_ff=F), r"width=8, num_heads=3"),
    ],
    ids=[
        "attention_width_not_divisible",
        "attention_no_projection_num_units",
        "feed_forward_output_width",
        "block_width_not_divisible",
    ],
)
def test_inputs_incompatible_with_hyperparameters_raise_value_error(make, match):
    x = np.ones((B, T, D), "float32")
    layer = make()
    with pytest.raises(ValueError, match=match):
        if isinstance(layer, MultiheadAttention):
            layer(x, x)
        else:
            layer(x)


# ---------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------
ATTENTION_PARAMS = 4 * D * D + 4 * D + 2 * D  # W^Q, W^K, W^V, W^O with biases; gamma, beta
FEED_FORWARD_PARAMS = 2 * D * F + F + D + 2 * D  # W_1, b_1, W_2, b_2; gamma, beta


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: MultiheadAttention(H), ATTENTION_PARAMS),
        (lambda: MultiheadAttention(H, use_output_projection=False), 3 * D * D + 3 * D + 2 * D),
        (lambda: FeedForward((F, D)), FEED_FORWARD_PARAMS),
        (lambda: EncoderBlock(H, F), ATTENTION_PARAMS + FEED_FORWARD_PARAMS),
    ],
    ids=["attention", "attention_no_projection", "feed_forward", "encoder"],
)
def test_parameter_count_follows_formula(make, expected):
    layer = make()
    x = np.ones((B, T, D), "float32")
    layer(x, x) if isinstance(layer, MultiheadAttention) else layer(x)
    assert layer.count_params() == expected


def test_decoder_block_parameter_count_follows_formula():
    block = built(DecoderBlock(H, F), np.ones((B, T, D), "float32"), np.ones((B, S, D), "float32"))
    assert block.count_params() == 2 * ATTENTION_PARAMS + FEED_FORWARD_PARAMS


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: MultiheadAttention(H, dropout_rate=0.5),
        lambda: FeedForward((F, D), dropout_rate=0.5),
        lambda: EncoderBlock(H, F, dropout_rate=0.5),
        lambda: DecoderBlock(H, F, dropout_rate=0.5),
    ],
    ids=["attention", "feed_forward", "encoder", "decoder"],
)
def test_dropout_is_active_only_in_training_and_keeps_padding_rows_zero(make):
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = make()
    if isinstance(layer, MultiheadAttention):
        inputs = [x, x]
    elif isinstance(layer, DecoderBlock):
        inputs = [x, padded(rng, [S, 3], S)]
    else:
        inputs = [x]
    built(layer, *inputs)
    inference = to_numpy(layer(*inputs, training=False))
    np.testing.assert_array_equal(to_numpy(layer(*inputs, training=False)), inference)
    training = to_numpy(layer(*inputs, training=True))
    real = real_positions(x)
    assert not np.allclose(training[real], inference[real], atol=ATOL)
    assert np.all(training[~real] == 0.0)


# ---------------------------------------------------------------------------
# Mixed precision
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_padding_rows_zero_and_outputs_finite(policy):
    """Two stacked encoder blocks: the padding rows of the first must stay exactly zero (not NaN),
    or the second block's matmuls spread NaN to every real position of the sequence."""
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    first, second = EncoderBlock(H, F, dtype=policy), EncoderBlock(H, F, dtype=policy)
    middle = to_numpy(keras.ops.cast(first(x), "float32"))
    outputs = to_numpy(keras.ops.cast(second(middle), "float32"))
    real = real_positions(x)
    assert np.all(middle[~real] == 0.0)
    assert np.all(np.isfinite(outputs))
    assert np.all(outputs[~real] == 0.0)
