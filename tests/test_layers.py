"""Numerical tests of `keras_transformer.layers`.

Layers are compared, with their weights copied out, to the NumPy versions of the tutorial's
formulas in `tests/reference.py` (the document's code and Kyubyong's repository; never to
unexplained constants), and held to the properties the rest of the model relies on: padding
invariance, exactly-zero padding rows, zero attention on padded keys, causality, masks, config
round trips and parameter counts.

Tiny sizes throughout: B=2, S=5, T=4, D=8, H=2, F=16.
"""

import json
import math

import keras
import numpy as np
import pytest
import reference
from keras.src.initializers.random_initializers import compute_fans

from keras_transformer.layers import (
    DecoderBlock,
    DecoderOnlyBlock,
    Dropout,
    EncoderBlock,
    FeedForward,
    LayerNorm,
    MultiheadAttention,
    PositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)
from keras_transformer.masks import sign_mask

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
    """Set every weight of a built layer (gamma, beta and biases included) to random values.

    So a comparison with the reference exercises every weight.
    """
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
    if layer.normalize:
        params["gamma"] = to_numpy(layer.layer_norm.gamma)
        params["beta"] = to_numpy(layer.layer_norm.beta)
    return params


def attention_reference(layer, queries, keys, values=None, **kwargs):
    """The reference with the layer's configuration, the package's sign masks and zeroing."""
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
        normalize=layer.normalize,
        epsilon=layer.epsilon,
        **{"zero_padding_rows": True, **kwargs},
    )


def conv_weights(layer):
    """`(W_1, b_1, W_2, b_2)` of a built `FeedForward`, its `Conv1D` kernels `[1, in, out]` as `[in, out]`."""
    inner, outer = layer.inner_conv, layer.outer_conv
    return to_numpy(inner.kernel)[0], to_numpy(inner.bias), to_numpy(outer.kernel)[0], to_numpy(outer.bias)


def norm_weights(layer):
    """`(gamma, beta)` of a built layer's LayerNorm, or `(None, None)` without one."""
    if not layer.normalize:
        return None, None
    return to_numpy(layer.layer_norm.gamma), to_numpy(layer.layer_norm.beta)


def feedforward_reference(layer, x, **kwargs):
    """The reference with the layer's configuration and the package's zeroing."""
    return reference.feedforward(
        x,
        *conv_weights(layer),
        *norm_weights(layer),
        epsilon=layer.epsilon,
        normalize=layer.normalize,
        **{"zero_padding_rows": True, **kwargs},
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
    "attention_repository": (
        lambda: MultiheadAttention(H, causality=True, use_output_projection=False, projection_activation="relu"),
        lambda rng: [padded(rng, [2, T], T)] * 2,
    ),
    "attention_document": (
        lambda: MultiheadAttention(H, causality=True, use_output_projection=False, normalize=False),
        lambda rng: [padded(rng, [2, T], T)] * 2,
    ),
    "attention_cross": (
        lambda: MultiheadAttention(H, num_units=4),
        lambda rng: [padded(rng, [2, T], T), padded(rng, [S, 3], S, width=6)],
    ),
    "feed_forward": (lambda: FeedForward((F, D)), lambda rng: [padded(rng, [2, T], T)]),
    "feed_forward_document": (
        lambda: FeedForward((F, D), dropout_rate=0.2, inner_dropout_rate=0.2, normalize=False),
        lambda rng: [padded(rng, [2, T], T)],
    ),
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
    "encoder_document": (
        lambda: EncoderBlock(
            H, F, dropout_rate=0.2, inner_dropout_rate=0.2, use_output_projection=False, normalize=False
        ),
        lambda rng: [padded(rng, [3, S], S)],
    ),
    "decoder": (
        lambda: DecoderBlock(H, F),
        lambda rng: [padded(rng, [2, T], T), padded(rng, [S, 3], S)],
    ),
    "decoder_repository": (
        lambda: DecoderBlock(H, F, use_output_projection=False, projection_activation="relu"),
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


def test_layer_norm_gradients_match_finite_differences_of_the_reference():
    """The written-out gradient of `LayerNorm` (inputs, gamma, beta) against central differences in float64."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2, 3, D)) * 3 + 1).astype("float32")
    upstream = rng.normal(size=x.shape)
    layer = built(LayerNorm(), x, rng=rng)
    gamma, beta = to_numpy(layer.gamma).astype(np.float64), to_numpy(layer.beta).astype(np.float64)
    inputs = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        loss = tf.reduce_sum(layer(inputs) * upstream)
    gradients = [g.numpy() for g in tape.gradient(loss, [inputs, layer.gamma, layer.beta])]

    def numeric(f, at, step=1e-6):
        grad = np.zeros_like(at)
        for index in np.ndindex(at.shape):
            shifted = [at.copy(), at.copy()]
            shifted[0][index] += step
            shifted[1][index] -= step
            grad[index] = (f(shifted[0]) - f(shifted[1])) / (2 * step)
        return grad

    def of(x, g, b):
        return np.sum(reference.normalize(x, g, b) * upstream)

    x64 = x.astype(np.float64)
    expected = [
        numeric(lambda v: of(v, gamma, beta), x64),
        numeric(lambda v: of(x64, v, beta), gamma),
        numeric(lambda v: of(x64, gamma, v), beta),
    ]
    for actual, wanted in zip(gradients, expected):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-4)


def test_layer_norm_weights_have_channel_shape_and_start_at_ones_and_zeros():
    layer = built(LayerNorm(), np.ones((B, T, D), "float32"))
    assert tuple(layer.gamma.shape) == (D,)
    assert tuple(layer.beta.shape) == (D,)
    np.testing.assert_array_equal(to_numpy(layer.gamma), np.ones(D))
    np.testing.assert_array_equal(to_numpy(layer.beta), np.zeros(D))


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_layer_norm_of_zero_row_is_beta(policy):
    """A padding row normalizes to `beta`, finite in every compute dtype.

    The sublayers then multiply it by 0, which only gives 0 when it is finite.
    """
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


def run_attention_case(causality, use_output_projection, projection_activation, kind, single_query=False):
    """Outputs and weights of the layer and of the reference; with `single_query`, of the last query only.

    The last query is padding in the first sequence and real in the second. One query is the shape
    of cached decoding, which has its own elementwise code path.
    """
    rng = np.random.default_rng(0)
    queries, keys, values = attention_inputs(rng, kind)
    layer = MultiheadAttention(
        H,
        causality=causality,
        use_output_projection=use_output_projection,
        projection_activation=projection_activation,
    )
    built(layer, queries, keys, values, rng=rng)
    if single_query:
        queries = queries[:, -1:]
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


@ATTENTION_CASES
def test_a_single_query_matches_reference(causality, use_output_projection, projection_activation, kind):
    case = (causality, use_output_projection, projection_activation, kind)
    outputs, weights, expected_outputs, expected_weights = run_attention_case(*case, single_query=True)
    assert outputs.shape == (B, 1, D) and weights.shape == (B, H, 1, T if kind == "self" else S)
    np.testing.assert_allclose(outputs, expected_outputs, atol=ATOL)
    np.testing.assert_allclose(weights, expected_weights, atol=ATOL)


# ---------------------------------------------------------------------------
# The two versions of the tutorial code: the document's and Kyubyong's repository's
# ---------------------------------------------------------------------------
def document_attention(causality):
    return MultiheadAttention(H, causality=causality, use_output_projection=False, normalize=False)


def repository_attention(causality):
    return MultiheadAttention(H, causality=causality, use_output_projection=False, projection_activation="relu")


@pytest.mark.parametrize("kind", ["self", "cross"])
@pytest.mark.parametrize("causality", [False, True])
def test_document_configuration_of_attention_is_the_document_code(causality, kind):
    """`use_output_projection=False, normalize=False` is the document's code, padding rows included.

    Without `W^O` and LayerNorm, the residual sum is already zero at padding queries.
    """
    rng = np.random.default_rng(0)
    queries, keys, _ = attention_inputs(rng, kind)
    layer = built(document_attention(causality), queries, keys, rng=rng)
    outputs, weights = layer(queries, keys, return_attention_scores=True)
    expected, expected_weights = reference.document_multihead_attention(
        queries, keys, attention_params(layer), H, causality
    )
    assert np.all(expected[~real_positions(queries)] == 0.0)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)


@pytest.mark.parametrize("causality", [False, True])
def test_repository_configuration_of_attention_is_the_repository_code_at_real_positions(causality):
    """`use_output_projection=False, projection_activation="relu"` is Kyubyong's repository's code.

    That holds where no real vector sums to zero (where its masks and the document's agree).
    Padding rows differ by design: the repository leaves LayerNorm's `beta` there, the layer
    zeros them (so that sign masks stay right in later layers).
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    np.testing.assert_array_equal(reference.repository_sign_mask(x), reference.sign_mask(x))
    layer = built(repository_attention(causality), x, x, rng=rng)
    outputs, weights = layer(x, x, return_attention_scores=True)
    expected, expected_weights = reference.repository_multihead_attention(x, x, attention_params(layer), H, causality)
    real = real_positions(x)
    np.testing.assert_allclose(to_numpy(outputs)[real], expected[real], atol=ATOL)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    beta = to_numpy(layer.layer_norm.beta)
    np.testing.assert_allclose(expected[~real], np.broadcast_to(beta, expected[~real].shape), atol=ATOL)
    assert np.all(to_numpy(outputs)[~real] == 0.0)


def test_document_configuration_of_feed_forward_is_the_document_code_at_real_positions():
    """At inference, `FeedForward(dropout_rate=0.2, inner_dropout_rate=0.2, normalize=False)` is the document's code.

    At padding rows the document leaves `FFN(0)`; the layer, zeros.
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D), dropout_rate=0.2, inner_dropout_rate=0.2, normalize=False), x, rng=rng)
    outputs = to_numpy(layer(x))
    expected = reference.document_feedforward(x, *conv_weights(layer))
    real = real_positions(x)
    np.testing.assert_allclose(outputs[real], expected[real], atol=ATOL)
    assert np.all(outputs[~real] == 0.0)
    assert not np.allclose(expected[~real], 0.0)


def test_repository_configuration_of_feed_forward_is_the_repository_code_at_real_positions():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D)), x, rng=rng)
    outputs = to_numpy(layer(x))
    expected = reference.repository_feedforward(x, *conv_weights(layer), *norm_weights(layer))
    real = real_positions(x)
    np.testing.assert_allclose(outputs[real], expected[real], atol=ATOL)
    assert np.all(outputs[~real] == 0.0)


@pytest.mark.parametrize("causality", [False, True])
def test_document_configuration_of_encoder_block_is_the_document_code_at_real_positions(causality):
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    block = EncoderBlock(H, F, dropout_rate=0.2, inner_dropout_rate=0.2, use_output_projection=False, normalize=False)
    block = built(block, x, rng=rng)
    outputs = to_numpy(block(x))
    attended, _ = reference.document_multihead_attention(x, x, attention_params(block.self_attention), H)
    expected = reference.document_feedforward(attended, *conv_weights(block.feed_forward))
    real = real_positions(x)
    np.testing.assert_allclose(outputs[real], expected[real], atol=ATOL)
    assert np.all(outputs[~real] == 0.0)


def test_vector_summing_to_zero_is_real_as_in_the_document_but_padding_to_the_repository():
    """The one difference of the two versions' masks.

    The layer's sign mask is the document's `sum(|x|) > 0`; Kyubyong's repository's
    `|sum(x)| > 0` calls a real vector whose entries sum to zero padding.
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    x[0, 1] = np.tile([1.0, -1.0], D // 2)  # sums to exactly zero, is not padding
    assert reference.sign_mask(x)[0, 1] == 1.0
    assert reference.repository_sign_mask(x)[0, 1] == 0.0
    layer = built(repository_attention(causality=False), x, x, rng=rng)
    outputs, weights = layer(x, x, return_attention_scores=True)
    outputs, weights = to_numpy(outputs), to_numpy(weights)
    assert np.all(weights[0, :, :, 1] > 0.0)  # a real key
    assert np.any(outputs[0, 1] != 0.0)  # a real query
    # With the document's masks, everything else being the repository's, the reference agrees.
    expected, _ = attention_reference(layer, x, x, mask_function=reference.sign_mask)
    np.testing.assert_allclose(outputs, expected, atol=ATOL)
    # With the repository's own masks, the first sequence differs; the second has no such vector.
    repository, repository_weights = reference.repository_multihead_attention(x, x, attention_params(layer), H)
    assert np.all(repository_weights[0, :, :, 1] == 0.0)
    assert not np.allclose(outputs[0], repository[0], atol=1e-3)
    np.testing.assert_allclose(outputs[1], repository[1], atol=ATOL)


@pytest.mark.parametrize("causality", [False, True])
def test_repository_masks_and_padding_are_the_repository_code_everywhere(causality):
    """With `sign_mask_rule="sum", zero_padding=False` as well, the layer is Kyubyong's code at every row.

    Padding rows hold LayerNorm's `beta`, and a real vector summing to zero is padding, as there.
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T - 2], T)
    x[0, 1] = np.tile([1.0, -1.0], D // 2)  # sums to exactly zero: padding to the repository
    layer = MultiheadAttention(
        H,
        causality=causality,
        use_output_projection=False,
        projection_activation="relu",
        sign_mask_rule="sum",
        zero_padding=False,
    )
    layer = built(layer, x, x, rng=rng)
    outputs, weights = layer(x, x, return_attention_scores=True)
    expected, expected_weights = reference.repository_multihead_attention(x, x, attention_params(layer), H, causality)
    np.testing.assert_allclose(to_numpy(outputs), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    assert np.all(to_numpy(weights)[0, :, :, 1] == 0.0)  # the zero-sum vector is a masked key
    padding = ~real_positions(x)
    np.testing.assert_allclose(to_numpy(outputs)[padding], np.broadcast_to(to_numpy(layer.layer_norm.beta), (2, D)))


def test_the_repository_rule_calls_real_rows_padding_after_a_layer_norm_at_initialization():
    """LayerNorm's rows sum to `sum(beta)`, zero at first, plus rounding: the zero-sum rule often says padding.

    docs/deviations.md quotes the fractions (17.6% of rows at D = 32 in float32); the
    document's rule calls none of these real rows padding.
    """
    x = np.random.default_rng(0).normal(size=(1, 2000, D)).astype("float32")
    normalized = LayerNorm()(x)
    called_padding = ~to_numpy(sign_mask(normalized, rule="sum"))
    assert called_padding.mean() > 0.02
    assert to_numpy(sign_mask(normalized)).all()


@pytest.mark.parametrize("normalize", [False, True], ids=["document", "repository"])
def test_feed_forward_without_zero_padding_is_the_tutorial_code_at_padding_rows_too(normalize):
    """`zero_padding=False` leaves `FFN(0)` (the document) or `LayerNorm(FFN(0))` (the repository) at padding."""
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D), normalize=normalize, zero_padding=False), x, rng=rng)
    gamma, beta = norm_weights(layer) if normalize else (None, None)
    expected = reference.feedforward(x, *conv_weights(layer), gamma, beta, normalize=normalize)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=ATOL)
    assert not np.allclose(expected[~real_positions(x)], 0.0)


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
    """Embeddings with a Keras mask that differs from the sign mask.

    Token 3's row is zeroed, so it embeds to a zero vector but is a real token. Returns
    (embedding layer, embed function).
    """
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
    [
        "attention",
        "attention_repository",
        "attention_document",
        "attention_cross",
        "feed_forward",
        "feed_forward_document",
        "encoder",
        "encoder_document",
        "decoder",
        "decoder_repository",
    ],
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


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("length", [T, 1])  # 1: one position, the shape of cached decoding
def test_feed_forward_gives_what_its_convolution_layers_give(policy, length):
    """The sublayer computes its `Conv1D`s as matmuls: the same numbers as calling the layers."""
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)[:, -length:]  # with length 1: padding in the first sequence, real in the second
    layer = built(FeedForward((F, D), dtype=policy), x, rng=rng)
    outputs = layer(x)
    assert outputs.shape == (B, length, D) and keras.backend.standardize_dtype(outputs.dtype) == layer.compute_dtype
    if policy == "float32":
        np.testing.assert_allclose(to_numpy(outputs), feedforward_reference(layer, x), atol=ATOL)
    inputs = keras.ops.cast(x, layer.compute_dtype)
    expected = layer.layer_norm(layer.outer_conv(layer.inner_conv(inputs)) + inputs)
    real = real_positions(x)
    np.testing.assert_allclose(
        to_numpy(keras.ops.cast(outputs, "float32"))[real],
        to_numpy(keras.ops.cast(expected, "float32"))[real],
        atol=ATOL if policy == "float32" else 2e-2,
    )
    assert not to_numpy(keras.ops.cast(outputs, "float32"))[~real].any()


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


BLOCK_CONFIGURATIONS = pytest.mark.parametrize(
    "kwargs",
    [{}, {"use_output_projection": False, "normalize": False}, {"projection_activation": "relu"}],
    ids=["default", "document", "relu"],
)


@BLOCK_CONFIGURATIONS
def test_encoder_block_matches_reference(kwargs):
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    block = built(EncoderBlock(H, F, **kwargs), x, rng=rng)
    np.testing.assert_allclose(to_numpy(block(x)), encoder_reference(block, x), atol=ATOL)


@BLOCK_CONFIGURATIONS
def test_decoder_block_matches_reference(kwargs):
    rng = np.random.default_rng(0)
    x, memory = padded(rng, [2, T], T), padded(rng, [S, 3], S)
    block = built(DecoderBlock(H, F, **kwargs), x, memory, rng=rng)
    outputs, weights = block(x, memory, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(outputs), decoder_reference(block, x, memory), atol=ATOL)
    assert to_numpy(weights["self_attention"]).shape == (B, H, T, T)
    assert to_numpy(weights["cross_attention"]).shape == (B, H, T, S)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("return_attention_scores", [False, True], ids=["outputs", "with-weights"])
@pytest.mark.parametrize("block_class", [EncoderBlock, DecoderOnlyBlock, DecoderBlock])
def test_block_on_symbolic_inputs_describes_what_its_call_returns(block_class, return_attention_scores, policy):
    """A block in a functional model gives the shapes and dtypes its call gives on real tensors."""
    rng = np.random.default_rng(0)
    inputs = [padded(rng, [2, T], T)] + ([padded(rng, [S, 3], S)] if block_class is DecoderBlock else [])
    block = block_class(H, F, dtype=policy)
    real = block(*inputs, return_attention_scores=return_attention_scores)
    for batch_size, lengths in ((B, (T, S)), (None, (None, None))):  # known and unknown sizes
        symbolic = [keras.Input((length, D), batch_size=batch_size) for length in lengths[: len(inputs)]]
        spec = block(*symbolic, return_attention_scores=return_attention_scores)
        keras.tree.assert_same_structure(spec, real)
        for got, want in zip(keras.tree.flatten(spec), keras.tree.flatten(real)):
            assert got.dtype == keras.backend.standardize_dtype(want.dtype), (got, want.dtype)
            if batch_size is None:  # unknown batch and lengths; every size the spec knows is right
                assert got.shape[0] is None and all(g in (None, w) for g, w in zip(got.shape, want.shape))
            else:
                assert got.shape == tuple(want.shape)


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


@pytest.mark.parametrize("length, depth", [(T, D), (50, 16), (6, 7)])
def test_tutorial_frequencies_match_the_tutorial_code_and_differ_from_the_paper(length, depth):
    encoding = to_numpy(sinusoidal_encoding(length, depth, frequencies="tutorial"))
    np.testing.assert_allclose(encoding, reference.tutorial_positional_encoding(length, depth), atol=ATOL)
    assert not np.allclose(encoding, reference.positional_encoding(length, depth), atol=1e-3)
    shifted = to_numpy(sinusoidal_encoding(3, depth, start=length - 3, frequencies="tutorial"))
    np.testing.assert_allclose(shifted, encoding[-3:], atol=ATOL)  # what cached decoding reads, one position at a time


def test_positional_encoding_frequencies_round_trip_and_bad_ones_are_errors():
    layer = PositionalEncoding(frequencies="tutorial")
    assert PositionalEncoding.from_config(json.loads(json.dumps(layer.get_config()))).frequencies == "tutorial"
    with pytest.raises(ValueError, match=r"`frequencies` must be one of .*Received: frequencies='column'"):
        PositionalEncoding(frequencies="column")


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
    """`initialization="per_head"` draws W^Q, W^K, W^V, W^O from Glorot uniform with per-head fans.

    The fans are those of their per-head views [D, H, K] and [H, K, D]; "glorot" (the
    tutorial's) draws from Glorot uniform on the [D, D] kernels.
    """
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


def test_head_width_is_num_units_over_num_heads_once_built():
    x = np.ones((B, T, D), "float32")
    layer = MultiheadAttention(H, num_units=4)
    assert layer.head_width is None
    layer(x, x)
    assert layer.head_width == 4 // H
    with pytest.raises(AttributeError):
        layer.head_width = 3


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


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: MultiheadAttention(H, normalize=False), {"normalize": False}),
        (
            lambda: FeedForward((F, D), inner_dropout_rate=0.3, normalize=False),
            {"inner_dropout_rate": 0.3, "normalize": False},
        ),
        (
            lambda: DecoderBlock(H, F, inner_dropout_rate=0.3, normalize=False),
            {"inner_dropout_rate": 0.3, "normalize": False},
        ),
        (
            lambda: MultiheadAttention(H, sign_mask_rule="sum", zero_padding=False),
            {"sign_mask_rule": "sum", "zero_padding": False},
        ),
        (lambda: FeedForward((F, D), zero_padding=False), {"zero_padding": False}),
        (lambda: EncoderBlock(H, F, padding_masks="sum"), {"padding_masks": "sum"}),
    ],
    ids=["attention", "feed_forward", "decoder", "attention_padding", "feed_forward_padding", "block_padding"],
)
def test_normalize_and_inner_dropout_rate_are_in_the_config_and_round_trip(make, expected):
    config = make().get_config()
    assert {key: config[key] for key in expected} == expected
    clone = type(make()).from_config(json.loads(json.dumps(config)))
    assert {key: getattr(clone, key) for key in expected} == expected


def test_blocks_pass_normalize_and_inner_dropout_rate_to_their_sublayers():
    x, memory = np.ones((B, T, D), "float32"), np.ones((B, S, D), "float32")
    block = built(DecoderBlock(H, F, inner_dropout_rate=0.3, normalize=False), x, memory)
    assert not block.self_attention.normalize and not block.cross_attention.normalize
    assert not block.feed_forward.normalize
    assert block.feed_forward.inner_dropout_rate == 0.3
    default = built(DecoderBlock(H, F), x, memory)
    assert default.self_attention.normalize and default.cross_attention.normalize and default.feed_forward.normalize
    assert default.feed_forward.inner_dropout_rate == 0.0


@pytest.mark.parametrize("activation", ["relu", keras.activations.relu], ids=["string", "function"])
def test_block_projection_activation_config_is_json_and_round_trips(activation):
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    block = built(EncoderBlock(H, F, projection_activation=activation), x, rng=rng)
    config = block.get_config()
    assert config["projection_activation"] == "relu"
    restored = EncoderBlock.from_config(json.loads(json.dumps(config)))
    assert restored.get_config() == config
    assert restored.self_attention.projection_activation is keras.activations.relu
    restored(x)
    restored.set_weights(block.get_weights())
    np.testing.assert_allclose(to_numpy(restored(x)), to_numpy(block(x)), atol=ATOL)


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
        (lambda: MultiheadAttention(num_heads=H, residual_dropout_rate=1.0), r"`residual_dropout_rate`.*=1.0"),
        (lambda: FeedForward((F, D), dropout_rate=1.5), r"dropout_rate=1.5"),
        (lambda: FeedForward((F, D), inner_dropout_rate=1.0), r"`inner_dropout_rate`.*inner_dropout_rate=1.0"),
        (lambda: FeedForward((F, D), inner_dropout_rate=-0.1), r"`inner_dropout_rate`.*inner_dropout_rate=-0.1"),
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
        "attention_residual_dropout_one",
        "feed_forward_dropout",
        "feed_forward_inner_dropout_one",
        "feed_forward_inner_dropout_negative",
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
NORM_PARAMS = 2 * D  # gamma, beta: not created with normalize=False


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: MultiheadAttention(H), ATTENTION_PARAMS),
        (lambda: MultiheadAttention(H, use_output_projection=False), 3 * D * D + 3 * D + 2 * D),
        (lambda: MultiheadAttention(H, normalize=False), ATTENTION_PARAMS - NORM_PARAMS),
        (lambda: FeedForward((F, D)), FEED_FORWARD_PARAMS),
        (lambda: FeedForward((F, D), normalize=False), FEED_FORWARD_PARAMS - NORM_PARAMS),
        (lambda: EncoderBlock(H, F), ATTENTION_PARAMS + FEED_FORWARD_PARAMS),
        (lambda: EncoderBlock(H, F, normalize=False), ATTENTION_PARAMS + FEED_FORWARD_PARAMS - 2 * NORM_PARAMS),
    ],
    ids=[
        "attention",
        "attention_no_projection",
        "attention_no_normalize",
        "feed_forward",
        "feed_forward_no_normalize",
        "encoder",
        "encoder_no_normalize",
    ],
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
        lambda: MultiheadAttention(H, residual_dropout_rate=0.5),
        lambda: FeedForward((F, D), dropout_rate=0.5),
        lambda: FeedForward((F, D), inner_dropout_rate=0.5),
        lambda: EncoderBlock(H, F, dropout_rate=0.5),
        lambda: EncoderBlock(H, F, inner_dropout_rate=0.5),
        lambda: DecoderBlock(H, F, dropout_rate=0.5),
        lambda: DecoderBlock(H, F, attention_residual_dropout_rate=0.5),
    ],
    ids=[
        "attention",
        "attention_residual",
        "feed_forward",
        "feed_forward_inner",
        "encoder",
        "encoder_inner",
        "decoder",
        "decoder_attention_residual",
    ],
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


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_dropout_drops_each_element_with_probability_rate_and_keeps_the_mean(rate):
    n = 400_000
    outputs = to_numpy(Dropout(rate, seed=1)(np.ones(n, "float32"), training=True))
    dropped = outputs == 0.0
    sigma = math.sqrt(rate * (1 - rate) / n)
    assert abs(dropped.mean() - rate) < 5 * sigma
    kept = np.unique(outputs[~dropped])
    assert kept.shape == (1,)
    np.testing.assert_allclose(kept[0], 1.0 / (1.0 - rate), rtol=1e-4)
    assert abs(outputs.mean() - 1.0) < 5 * sigma / (1 - rate)
    # Neighbours (which may share one random word) are dropped independently.
    both = dropped[0::2] & dropped[1::2]
    assert abs(both.mean() - rate**2) < 5 * math.sqrt(rate**2 * (1 - rate**2) / (n // 2))


def test_dropout_at_a_rate_too_small_for_16_bits_drops_at_that_rate():
    """2e-6 would round to 1/65536 (7.6x the rate): such rates take Keras's float draws."""
    n = 2_000_000
    outputs = to_numpy(Dropout(2e-6, seed=1)(np.ones(n, "float32"), training=True))
    assert np.count_nonzero(outputs == 0.0) <= 15  # about 4 expected; 1/65536 would drop about 30


@pytest.mark.parametrize("shape", [(3, 5, 7), (1,), (2, 0, 4)])
def test_dropout_output_and_gradient_are_the_inputs_times_one_mask(shape):
    """Each element is zero or `inputs * factor`; the gradient is `upstream * mask`, the same mask."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.uniform(1.0, 2.0, size=shape).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    inputs = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = Dropout(0.3, seed=2)(inputs, training=True)
        loss = tf.reduce_sum(outputs * upstream)
    mask = outputs.numpy() / x
    assert outputs.shape == shape and outputs.dtype == tf.float32
    assert np.all(np.isclose(mask, 0.0) | np.isclose(mask, 1.0 / 0.7, rtol=1e-4))
    np.testing.assert_allclose(tape.gradient(loss, inputs).numpy(), upstream * mask, rtol=1e-6, atol=1e-7)


def test_dropout_masks_follow_the_seed_and_change_from_call_to_call():
    x = np.ones((4, 6, 8), "float32")
    first, again = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    calls = [to_numpy(first(x, training=True)) for _ in range(2)]
    np.testing.assert_array_equal(to_numpy(again(x, training=True)), calls[0])
    assert not np.array_equal(calls[0], calls[1])
    np.testing.assert_array_equal(to_numpy(first(x, training=False)), x)
    np.testing.assert_array_equal(to_numpy(Dropout(0.0)(x, training=True)), x)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_dropout_runs_in_a_compiled_function_on_shapes_known_at_run_time(jit_compile):
    import tensorflow as tf

    layer = Dropout(0.25, seed=3, dtype="mixed_bfloat16")  # computes in bfloat16
    run = tf.function(
        lambda x: layer(x, training=True),
        input_signature=[tf.TensorSpec([None, None, 5], tf.bfloat16)],
        jit_compile=jit_compile,
    )
    outputs = run(tf.ones([3, 7, 5], tf.bfloat16))  # 105 elements: an odd count
    factor = tf.cast(tf.constant(1 / 0.75), tf.bfloat16)
    assert outputs.shape == (3, 7, 5) and outputs.dtype == tf.bfloat16
    assert set(np.unique(tf.cast(outputs, tf.float32).numpy())) == {0.0, float(tf.cast(factor, tf.float32))}


def test_dropout_config_round_trips_as_keras_dropout_config():
    layer = Dropout(0.3, noise_shape=(None, 1, 8), seed=5, name="drop")
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(restored) is Dropout and isinstance(restored, keras.layers.Dropout)
    assert restored.get_config() == layer.get_config()
    assert {"rate", "noise_shape", "seed"} <= set(layer.get_config())


def test_attention_residual_dropout_drops_the_sublayer_output_before_the_residual():
    """The paper's residual dropout (section 5.4): `queries + dropout(context)`, then LayerNorm.

    Without LayerNorm, `outputs - queries` is the sub-layer's output: in training each element
    is that of inference, dropped (zero) or kept and scaled by `1 / (1 - rate)`; the weights
    are not dropped (`dropout_rate=0`), so nothing else changes.
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    layer = built(MultiheadAttention(H, residual_dropout_rate=0.5, normalize=False), x, x, rng=rng)
    context = to_numpy(layer(x, x, training=False)) - x
    dropped = to_numpy(layer(x, x, training=True)) - x
    real = real_positions(x)
    kept = np.isclose(dropped, 2.0 * context, atol=ATOL)
    zeroed = np.abs(dropped) < ATOL
    assert np.all((kept | zeroed)[real])
    assert 0.3 < zeroed[real].mean() < 0.7
    plain = built(MultiheadAttention(H, normalize=False), x, x)
    plain.set_weights(layer.get_weights())
    np.testing.assert_array_equal(to_numpy(layer(x, x, training=False)), to_numpy(plain(x, x)))


def test_block_dropout_rates_reach_their_sublayers_and_round_trip():
    x, memory = np.ones((B, T, D), "float32"), np.ones((B, S, D), "float32")
    rates = dict(attention_dropout_rate=0.2, attention_residual_dropout_rate=0.3, feed_forward_dropout_rate=0.4)
    block = built(DecoderBlock(H, F, dropout_rate=0.1, inner_dropout_rate=0.5, **rates), x, memory)
    for attention in (block.self_attention, block.cross_attention):
        assert (attention.dropout_rate, attention.residual_dropout_rate) == (0.2, 0.3)
    assert (block.feed_forward.dropout_rate, block.feed_forward.inner_dropout_rate) == (0.4, 0.5)
    clone = DecoderBlock.from_config(json.loads(json.dumps(block.get_config())))
    assert clone.get_config() == block.get_config()
    follows = built(DecoderBlock(H, F, dropout_rate=0.1), x, memory)  # the rates left None follow dropout_rate
    assert (follows.self_attention.dropout_rate, follows.self_attention.residual_dropout_rate) == (0.1, 0.0)
    assert follows.feed_forward.dropout_rate == 0.1


def test_feed_forward_outside_training_equals_feed_forward_without_dropout():
    rng = np.random.default_rng(0)
    x = padded(rng, [2, T], T)
    layer = built(FeedForward((F, D), dropout_rate=0.5, inner_dropout_rate=0.5), x, rng=rng)
    plain = built(FeedForward((F, D)), x)
    plain.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(layer(x, training=False)), to_numpy(plain(x)), atol=ATOL)


def test_inner_dropout_drops_the_relu_activations():
    """With an orthogonal `W_2` and no LayerNorm, `(outputs - inputs - b_2) W_2^T` are the inner activations.

    They are the activations after dropout: each one dropped (zero) or kept and scaled by
    `1 / (1 - rate)`. (Dropout after `W_2` instead would mix them.)
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [T, T], T)
    layer = built(FeedForward((D, D), inner_dropout_rate=0.5, normalize=False), x, rng=rng)
    orthogonal = np.linalg.qr(rng.normal(size=(D, D)))[0].astype("float32")
    layer.outer_conv.kernel.assign(orthogonal[None])
    inner_kernel, inner_bias, _, outer_bias = conv_weights(layer)
    hidden = reference.dense(x, inner_kernel, inner_bias, "relu")  # (B, T, D)

    def inner_activations(outputs):
        return (to_numpy(outputs) - x - outer_bias) @ orthogonal.T

    np.testing.assert_allclose(inner_activations(layer(x, training=False)), hidden, atol=ATOL)
    dropped = inner_activations(layer(x, training=True))
    zeroed = np.abs(dropped) < ATOL
    kept = np.isclose(dropped, 2.0 * hidden, atol=ATOL)
    assert np.all(zeroed | kept)
    active = hidden > 0.1
    assert np.any(zeroed & active) and np.any(kept & active)


# ---------------------------------------------------------------------------
# Mixed precision
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_padding_rows_zero_and_outputs_finite(policy):
    """Two stacked encoder blocks: the padding rows of the first must stay exactly zero (not NaN).

    Otherwise the second block's matmuls spread NaN to every real position of the sequence.
    """
    rng = np.random.default_rng(0)
    x = padded(rng, [3, S], S)
    first, second = EncoderBlock(H, F, dtype=policy), EncoderBlock(H, F, dtype=policy)
    middle = to_numpy(keras.ops.cast(first(x), "float32"))
    outputs = to_numpy(keras.ops.cast(second(middle), "float32"))
    real = real_positions(x)
    assert np.all(middle[~real] == 0.0)
    assert np.all(np.isfinite(outputs))
    assert np.all(outputs[~real] == 0.0)
