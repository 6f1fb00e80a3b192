"""Tests of the assembled encoder-decoder model, its config and greedy decoding.

The modules: `keras_transformer.models.translation`, `keras_transformer.config` and
`keras_transformer.decoding`.

The model is held to the properties the rest of the project relies on: the closed-form parameter
count, padding invariance (logits and loss), exactly-zero padding rows after every block, sign
masks that agree with id masks at every depth, causality, a connected encoder, save/load and
config round trips, attention-weight shapes and masking, and greedy decoding equal to a plain
Python loop over `model([source, prefix])`.

Tiny sizes throughout: B=2, S=5, T=4, D=8, H=2, F=16, two blocks, dropout 0, fixed seeds.
"""

import dataclasses
import json

import keras
import numpy as np
import pytest
from conftest import V_S, V_T, B, D, H, N, S, T, ids, pad, tiny_config, tiny_model, to_numpy

from keras_transformer import masks
from keras_transformer.config import PRESETS, ModelConfig, preset, variant_switches
from keras_transformer.data.tokenizers import PAD_ID
from keras_transformer.models import TransformerLayers, attention_weights, build_transformer
from keras_transformer.training import MaskedLabelSmoothedLoss

ATOL = 1e-5


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def shared_model(embedding_sharing="none", **overrides):
    """`tiny_model` with `embedding_sharing`; under "all" its one table holds the source's V_S ids."""
    sizes = {"target_vocab_size": V_S} if embedding_sharing == "all" else {}
    return tiny_model(embedding_sharing=embedding_sharing, **sizes, **overrides)


@pytest.fixture
def batch():
    """`(source_ids [2, 5], target_in_ids [2, 4], target_out_ids [2, 4])`.

    Both rows are padded in the first example, full length in the second.
    """
    rng = np.random.default_rng(0)
    source = ids([3, S], S, V_S, rng)
    target_in = ids([2, T], T, V_T, rng, start=True)
    target_out = ids([2, T], T, V_T, rng)
    return source, target_in, target_out


def run_blocks(model, source, target_in, explicit_masks=True):
    """Run the model layer by layer.

    Returns `(encoder_io, decoder_io, logits)`, where each `*_io` is a list over blocks of
    `(block_input, block_output)` NumPy arrays.
    """
    layers = TransformerLayers.from_model(model)
    source_mask, target_mask = masks.padding_mask(source), masks.padding_mask(target_in)
    hidden = layers.source_dropout(layers.source_positions(layers.source_embedding(source), mask=source_mask))
    encoder_io = []
    for block in layers.encoder_blocks:
        output = block(hidden, mask=source_mask) if explicit_masks else block(hidden)
        encoder_io.append((to_numpy(hidden), to_numpy(output)))
        hidden = output
    memory = hidden
    hidden = layers.target_dropout(layers.target_positions(layers.target_embedding(target_in), mask=target_mask))
    decoder_io = []
    for block in layers.decoder_blocks:
        if explicit_masks:
            output = block(hidden, memory, inputs_mask=target_mask, memory_mask=source_mask)
        else:
            output = block(hidden, memory)
        decoder_io.append((to_numpy(hidden), to_numpy(output)))
        hidden = output
    return encoder_io, decoder_io, to_numpy(layers.logits(hidden))


# ---------------------------------------------------------------------------
# Parameter count
# ---------------------------------------------------------------------------
def expected_parameter_count(config):
    """The closed-form parameter count from the config.

    The terms: embeddings V_s D + V_t D;
    encoder block: attention 4D^2 + 4D (W^Q, W^K, W^V, W^O with biases; 3D^2 + 3D without
        W^O) + its LayerNorm 2D, feed-forward 2DF + F + D + its LayerNorm 2D;
    decoder block: two attentions with their LayerNorms, plus the feed-forward and its LayerNorm;
    output projection D V_t + V_t; learned positions max_source_len D + max_target_len D.
    Shared tables (`embedding_sharing`) drop the output projection ("decoder"), and the source
    table too ("all"). Without `normalize` (the document's variant) there is no LayerNorm.
    """
    d, f = config.d_model, config.d_ff
    switches = variant_switches(config)
    attention = (4 * d * d + 4 * d) if switches["use_output_projection"] else (3 * d * d + 3 * d)
    layer_norm = 2 * d if switches["normalize"] else 0
    feed_forward = 2 * d * f + f + d
    encoder_block = attention + layer_norm + feed_forward + layer_norm
    decoder_block = 2 * (attention + layer_norm) + feed_forward + layer_norm
    count = config.target_vocab_size * d + config.num_blocks * (encoder_block + decoder_block)
    if switches["embedding_sharing"] != "all":
        count += config.source_vocab_size * d
    if switches["embedding_sharing"] == "none":
        count += d * config.target_vocab_size + config.target_vocab_size
    if switches["learned_positions"]:
        count += config.max_source_len * d + config.max_target_len * d
    return count


@pytest.mark.parametrize(
    "config",
    [
        tiny_config(),
        tiny_config(use_output_projection=False),
        tiny_config(use_output_projection=False, projection_activation="relu"),
        tiny_config(learned_positions=True, max_source_len=7, max_target_len=9),
        tiny_config(num_blocks=3, d_ff=24, source_vocab_size=30, target_vocab_size=20),
        preset("tiny", source_vocab_size=50, target_vocab_size=40),
        tiny_config(embedding_sharing="decoder"),
        tiny_config(embedding_sharing="all", source_vocab_size=V_T),
        tiny_config(variant="document"),
        tiny_config(variant="repository"),
        tiny_config(variant="paper", normalize=False, source_vocab_size=V_T),  # one table: one vocabulary
    ],
    ids=[
        "default",
        "no_output_projection",
        "tutorial_relu",
        "learned_positions",
        "three_blocks",
        "preset_tiny",
        "decoder_sharing",
        "all_sharing",
        "document",
        "repository",
        "paper_without_layernorm",
    ],
)
def test_parameter_count_follows_closed_form_formula(config):
    model = build_transformer(config)
    assert model.count_params() == expected_parameter_count(config)


@pytest.mark.parametrize("d_model", [64, 512])
def test_encoder_block_has_about_12_d_squared_parameters_when_d_ff_is_4d(d_model):
    # With F = 4D an encoder block holds (4D^2 + 4D) + 2D + (8D^2 + 4D + D) + 2D = 12 D^2 + 13 D:
    # about 12 D^2, with relative error 13 / (12 D) (2% at D=64, 0.2% at D=512).
    config = tiny_config(d_model=d_model, d_ff=4 * d_model, num_heads=8, num_blocks=1)
    model = build_transformer(config)
    block = TransformerLayers.from_model(model).encoder_blocks[0]
    assert block.count_params() == 12 * d_model**2 + 13 * d_model
    assert block.count_params() == pytest.approx(12 * d_model**2, rel=13 / (12 * d_model) + 1e-9)
    assert block.count_params() == pytest.approx(12 * d_model**2, rel=0.025)


# ---------------------------------------------------------------------------
# Padding
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides",
    [{}, {"learned_positions": True}, {"embedding_sharing": "decoder"}, {"embedding_sharing": "all"}],
    ids=["sinusoids", "learned", "decoder_sharing", "all_sharing"],
)
@pytest.mark.parametrize("extra_source, extra_target", [(3, 0), (0, 3), (2, 4)], ids=["source", "target", "both"])
def test_appending_padding_changes_no_real_logit_and_not_the_loss(extra_source, extra_target, overrides):
    model = shared_model(**overrides)
    rng = np.random.default_rng(1)
    source = ids([3, S], S, V_S, rng)
    target_in = ids([2, T], T, V_T, rng, start=True)
    target_out = ids([2, T], T, V_T, rng)

    logits = to_numpy(model([source, target_in]))
    padded_logits = to_numpy(model([pad(source, extra_source), pad(target_in, extra_target)]))

    assert padded_logits.shape == (B, T + extra_target, model.output_shape[-1])
    real = target_in != PAD_ID
    np.testing.assert_allclose(padded_logits[:, :T][real], logits[real], atol=ATOL, rtol=0)

    loss = MaskedLabelSmoothedLoss(0.1)
    unpadded_loss = float(loss(target_out, logits))
    padded_loss = float(loss(pad(target_out, extra_target), padded_logits))
    assert padded_loss == pytest.approx(unpadded_loss, abs=ATOL)


@pytest.mark.parametrize("extra", [0, 3])
def test_padding_rows_are_exactly_zero_after_every_block(model, batch, extra):
    source, target_in, _ = batch
    source, target_in = pad(source, extra), pad(target_in, extra)
    encoder_io, decoder_io, _ = run_blocks(model, source, target_in)
    assert len(encoder_io) == len(decoder_io) == N
    for ids_, io in ((source, encoder_io), (target_in, decoder_io)):
        padding = ids_ == PAD_ID
        assert padding.any()
        for block_input, block_output in io:
            assert np.all(block_input[padding] == 0.0)
            assert np.all(block_output[padding] == 0.0)
            # ... and only padding rows are zero.
            assert np.all(np.any(block_output[~padding] != 0.0, axis=-1))


def test_sign_masks_agree_with_id_masks_at_every_depth(model, batch):
    source, target_in, _ = batch
    encoder_io, decoder_io, _ = run_blocks(model, source, target_in)
    for ids_, io in ((source, encoder_io), (target_in, decoder_io)):
        expected = to_numpy(masks.padding_mask(ids_))
        for block_input, block_output in io:
            np.testing.assert_array_equal(to_numpy(masks.sign_mask(block_input)), expected)
            np.testing.assert_array_equal(to_numpy(masks.sign_mask(block_output)), expected)


def test_blocks_without_explicit_masks_equal_blocks_with_id_masks(model, batch):
    source, target_in, _ = batch
    encoder_io, decoder_io, logits = run_blocks(model, source, target_in, explicit_masks=True)
    sign_encoder_io, sign_decoder_io, sign_logits = run_blocks(model, source, target_in, explicit_masks=False)
    for (_, with_ids), (_, with_signs) in zip(encoder_io + decoder_io, sign_encoder_io + sign_decoder_io):
        np.testing.assert_allclose(with_signs, with_ids, atol=1e-6, rtol=0)
    np.testing.assert_allclose(sign_logits, logits, atol=1e-6, rtol=0)
    # The layer-by-layer run is the model itself.
    np.testing.assert_allclose(to_numpy(model([source, target_in])), logits, atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------
# Causality and connectivity
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("t", [1, 2, 3])
def test_changing_target_token_at_t_changes_no_earlier_logit(model, t):
    rng = np.random.default_rng(2)
    source = ids([S, 4], S, V_S, rng)
    target_in = ids([T, T], T, V_T, rng, start=True)
    changed = target_in.copy()
    changed[:, t] = 4 + (target_in[:, t] - 4 + 1) % (V_T - 4)  # a different real token
    assert np.all(changed[:, t] != target_in[:, t])

    logits = to_numpy(model([source, target_in]))
    changed_logits = to_numpy(model([source, changed]))
    np.testing.assert_allclose(changed_logits[:, :t], logits[:, :t], atol=ATOL, rtol=0)
    # The change does reach position t (the test is not vacuous).
    assert np.max(np.abs(changed_logits[:, t] - logits[:, t])) > 1e-3


def test_changing_a_source_token_changes_the_logits_of_that_sentence_only(model, batch):
    source, target_in, _ = batch
    changed = source.copy()
    changed[0, 1] = 4 + (source[0, 1] - 4 + 1) % (V_S - 4)
    assert changed[0, 1] != source[0, 1]

    logits = to_numpy(model([source, target_in]))
    changed_logits = to_numpy(model([changed, target_in]))
    real = target_in[0] != PAD_ID
    assert np.max(np.abs(changed_logits[0][real] - logits[0][real])) > 1e-3
    np.testing.assert_allclose(changed_logits[1], logits[1], atol=ATOL, rtol=0)


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("embedding_sharing", ["none", "decoder", "all"])
def test_keras_file_save_load_round_trip_gives_identical_logits(embedding_sharing, batch, tmp_path):
    model = shared_model(embedding_sharing)
    source, target_in, _ = batch
    path = tmp_path / "transformer.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.count_params() == model.count_params()
    np.testing.assert_array_equal(to_numpy(loaded([source, target_in])), to_numpy(model([source, target_in])))


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"use_output_projection": False, "projection_activation": "relu"},
        {"learned_positions": True},
        {"embedding_sharing": "decoder"},
        {"embedding_sharing": "all"},
    ],
    ids=["default", "tutorial", "learned_positions", "decoder_sharing", "all_sharing"],
)
def test_from_config_rebuilds_model_with_same_parameter_count_and_layers(overrides):
    model = shared_model(**overrides)
    rebuilt = keras.Model.from_config(model.get_config())
    assert rebuilt.count_params() == model.count_params()
    assert [layer.name for layer in rebuilt.layers] == [layer.name for layer in model.layers]
    # The rebuilt model runs and the layers can still be found by role.
    rebuilt.set_weights(model.get_weights())
    rng = np.random.default_rng(3)
    source, target_in = ids([3, S], S, V_S, rng), ids([2, T], T, V_T, rng, start=True)
    np.testing.assert_allclose(
        to_numpy(rebuilt([source, target_in])), to_numpy(model([source, target_in])), atol=1e-6, rtol=0
    )
    assert len(TransformerLayers.from_model(rebuilt).encoder_blocks) == N


@pytest.mark.parametrize(
    "config",
    [tiny_config(), tiny_config(learned_positions=True, use_output_projection=False, projection_activation="relu")]
    + [preset(name, source_vocab_size=50, target_vocab_size=40) for name in PRESETS],
    ids=["tiny_explicit", "tutorial"] + list(PRESETS),
)
def test_model_config_json_round_trip(config, tmp_path):
    path = tmp_path / "sub" / "model_config.json"
    config.save(path)
    assert json.loads(path.read_text()) == dataclasses.asdict(config)
    assert ModelConfig.load(path) == config
    assert ModelConfig.from_dict(config.to_dict()) == config


def test_preset_applies_overrides():
    config = preset("tiny", source_vocab_size=50, target_vocab_size=40, num_blocks=3)
    assert config.num_blocks == 3
    assert config.d_model == PRESETS["tiny"]["d_model"]
    assert (config.source_vocab_size, config.target_vocab_size) == (50, 40)


def test_d_model_not_divisible_by_num_heads_raises_naming_both_values():
    with pytest.raises(ValueError, match=r"d_model=10, num_heads=3"):
        ModelConfig(d_model=10, num_heads=3).validate()
    with pytest.raises(ValueError, match=r"d_model=10, num_heads=4"):
        preset("tiny", d_model=10, num_heads=4)
    with pytest.raises(ValueError, match=r"d_model=10, num_heads=3"):
        build_transformer(ModelConfig(**{**tiny_config().to_dict(), "d_model": 10, "num_heads": 3}))


def test_unknown_preset_raises_value_error():
    with pytest.raises(ValueError, match=r"`preset` must be one of \('tiny', .*Received: preset='huge'"):
        preset("huge")


def test_unknown_json_key_raises_value_error(tmp_path):
    path = tmp_path / "model_config.json"
    path.write_text(json.dumps({**tiny_config().to_dict(), "dmodel": 8}))
    with pytest.raises(ValueError, match=r"Unknown ModelConfig keys: \['dmodel'\]"):
        ModelConfig.load(path)
    with pytest.raises(ValueError, match=r"Unknown ModelConfig keys: \['dmodel'\]"):
        ModelConfig.from_dict({"dmodel": 8})


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"d_model": 0}, r"`d_model` must be an int >= 1. Received: d_model=0"),
        ({"num_blocks": 2.0}, r"`num_blocks` must be an int >= 1. Received: num_blocks=2.0"),
        ({"dropout_rate": 1.0}, r"`dropout_rate` must be a number in \[0, 1\)"),
        (
            {"projection_activation": "gelu"},
            r"`projection_activation` must be one of \(None, 'linear', 'relu'\). Received: .*='gelu'",
        ),
        ({"embedding_sharing": "encoder"}, r"`embedding_sharing` must be one of \('none', 'decoder', 'all'\)"),
        (
            {"embedding_sharing": "all", "source_vocab_size": 12, "target_vocab_size": 10},
            r"the vocabularies must be one .*source_vocab_size=12, target_vocab_size=10",
        ),
    ],
)
def test_invalid_model_config_values_raise_value_error(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**overrides).validate()


# ---------------------------------------------------------------------------
# Shared embedding tables
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("embedding_sharing", ["decoder", "all"])
def test_shared_table_computes_the_logits_as_decoder_states_times_its_transpose(embedding_sharing, batch):
    model = shared_model(embedding_sharing)
    source, target_in, _ = batch
    _, decoder_io, logits = run_blocks(model, source, target_in)
    table = to_numpy(TransformerLayers.from_model(model).target_embedding.embeddings)  # (V_t, D)
    np.testing.assert_allclose(logits, decoder_io[-1][1] @ table.T, atol=ATOL, rtol=0)  # no bias
    np.testing.assert_allclose(to_numpy(model([source, target_in])), logits, atol=ATOL, rtol=0)
    assert "logits" not in [layer.name for layer in model.layers]


def test_all_sharing_embeds_source_and_target_ids_with_one_table():
    model = shared_model("all")
    layers = TransformerLayers.from_model(model)
    tables = [weight for weight in model.weights if weight.path.endswith("embeddings")]
    assert len(tables) == 1 and layers.source_embedding is layers.target_embedding
    token_ids = np.array([[1, 5, V_S - 1, 0]])
    want = np.sqrt(D) * to_numpy(tables[0])[token_ids] * (token_ids != PAD_ID)[..., None]  # (1, 4, D)
    for embedding in (layers.source_embedding, layers.target_embedding):
        np.testing.assert_allclose(to_numpy(embedding(token_ids)), want, atol=ATOL, rtol=0)


def test_decoder_sharing_keeps_two_tables_of_their_own_sizes():
    model = shared_model("decoder")
    layers = TransformerLayers.from_model(model)
    assert layers.output_projection is None and layers.source_embedding is not layers.target_embedding
    shapes = sorted(tuple(weight.shape) for weight in model.weights if weight.path.endswith("embeddings"))
    assert shapes == sorted([(V_S, D), (V_T, D)])


# ---------------------------------------------------------------------------
# Attention weights
# ---------------------------------------------------------------------------
def test_attention_weights_have_documented_shapes_and_mask_padding(model, batch):
    source, target_in, _ = batch
    weights = attention_weights(model, source, target_in)
    assert len(weights["encoder"]) == len(weights["decoder"]) == N
    source_real, target_real = source != PAD_ID, target_in != PAD_ID
    for block in weights["encoder"]:
        self_weights = to_numpy(block["self_attention"])
        assert self_weights.shape == (B, H, S, S)
        assert np.all(self_weights.transpose(0, 2, 1, 3)[~source_real] == 0.0)  # padded queries
        assert np.all(self_weights.transpose(0, 3, 1, 2)[~source_real] == 0.0)  # padded keys
        np.testing.assert_allclose(self_weights.sum(-1).transpose(0, 2, 1)[source_real], 1.0, atol=1e-6)
    for block in weights["decoder"]:
        self_weights = to_numpy(block["self_attention"])
        cross_weights = to_numpy(block["cross_attention"])
        assert self_weights.shape == (B, H, T, T)
        assert cross_weights.shape == (B, H, T, S)
        # Cross-attention on padded source positions is exactly zero.
        assert np.all(cross_weights.transpose(0, 3, 1, 2)[~source_real] == 0.0)
        # Causal: nothing above the diagonal.
        assert np.all(np.triu(self_weights, k=1) == 0.0)
        for w in (self_weights, cross_weights):
            np.testing.assert_allclose(w.sum(-1).transpose(0, 2, 1)[target_real], 1.0, atol=1e-6)
            assert np.all(w.transpose(0, 2, 1, 3)[~target_real] == 0.0)
