"""Decoder-only and encoder-only language models: masks, weight tying, heads, configs, saving, training.

Random tiny models (B=2, T=5, D=8, H=2, F=16, V=11, two blocks), checked for what each kind must
do: a decoder-only model's logits at a position never depend on later tokens, an encoder-only
model's do, padding changes neither, and a tied model's output layer is its embedding table.
"""

import json

import keras
import numpy as np
import pytest
from conftest import to_numpy

from keras_transformer.config import PRESETS, LanguageModelConfig, TrainConfig, language_model_preset
from keras_transformer.data.special_tokens import START_ID
from keras_transformer.layers import DecoderOnlyBlock, EncoderBlock
from keras_transformer.models import (
    LanguageModelLayers,
    build_decoder_only,
    build_encoder_only,
    build_language_model,
)
from keras_transformer.training import MaskedLabelSmoothedLoss, compile_transformer

B, T, D, H, F, V, N, C = 2, 5, 8, 2, 16, 11, 2, 3  # batch, length, width, heads, d_ff, vocabulary, blocks, classes


def lm_config(kind, **overrides):
    """A `LanguageModelConfig` of the tiny sizes above, without dropout."""
    values = dict(vocab_size=V, d_model=D, num_heads=H, d_ff=F, num_blocks=N, dropout_rate=0.0, max_length=12)
    return LanguageModelConfig(**{**values, **overrides, "kind": kind}).validate()


def lm_model(kind, seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return build_language_model(lm_config(kind, **overrides))


def logits_of(model, token_ids):
    """The language-model logits `[B, T, V]` of either kind, as NumPy."""
    outputs = model(token_ids, training=False)
    return to_numpy(outputs["logits"] if isinstance(outputs, dict) else outputs)


def token_ids(lengths=(T, 3), length=T, seed=0):
    """Int32 `[len(lengths), length]`: `<s>`, random real ids (>= 4), then padding."""
    rng = np.random.default_rng(seed)
    out = np.zeros((len(lengths), length), "int32")
    for b, n in enumerate(lengths):
        out[b, :n] = rng.integers(4, V, size=n)
        out[b, 0] = START_ID
    return out


def with_token_changed(ids, t):
    """A copy of `ids` with the real token at position `t` of every row replaced by another real one."""
    changed = ids.copy()
    changed[:, t] = np.where(ids[:, t] == 4, 5, 4)
    return changed


MODEL_VARIANTS = {
    "tied": {},
    "untied-learned-positions-tutorial-attention": {
        "tie_embeddings": False,
        "learned_positions": True,
        "use_output_projection": False,
        "projection_activation": "relu",
        "attention_score": "cosine",
    },
}


@pytest.fixture(scope="module", params=list(MODEL_VARIANTS), ids=list(MODEL_VARIANTS))
def decoder_model(request):
    return lm_model("decoder", seed=1, **MODEL_VARIANTS[request.param])


@pytest.fixture(scope="module")
def encoder_model():
    return lm_model("encoder", seed=2, num_classes=C)


def test_decoder_only_model_is_causal_and_ignores_padding(decoder_model):
    ids = token_ids(lengths=(T, T))
    # Row t + 1 has its token at position t changed; row 0 is the original (one call for all).
    variants = np.concatenate([ids] + [with_token_changed(ids, t) for t in range(T)])
    logits = logits_of(decoder_model, variants).reshape(T + 1, B, T, V)
    for t in range(1, T):
        np.testing.assert_allclose(logits[t + 1][:, :t], logits[0][:, :t], atol=1e-6, err_msg=f"token {t}")
        assert np.abs(logits[t + 1][:, t] - logits[0][:, t]).max() > 1e-4, f"token {t} changed nothing at {t}"
    padded = np.pad(ids, ((0, 0), (0, 3)))
    np.testing.assert_allclose(logits_of(decoder_model, padded)[:, :T], logits[0], atol=1e-5)


def test_encoder_only_model_is_bidirectional_and_ignores_padding(encoder_model):
    ids = token_ids(lengths=(T, 3))
    outputs = encoder_model(ids)
    logits, class_logits = to_numpy(outputs["logits"]), to_numpy(outputs["class_logits"])
    assert logits.shape == (B, T, V) and class_logits.shape == (B, C)
    later_changed = logits_of(encoder_model, with_token_changed(ids, 2))
    # Position 0 sees the later token, in both rows (row 1's position 2 is its last real token).
    assert (np.abs(later_changed[:, 0] - logits[:, 0]).max(axis=-1) > 1e-4).all()
    padded = encoder_model(np.pad(ids, ((0, 0), (0, 4))))
    real = ids != 0
    np.testing.assert_allclose(to_numpy(padded["logits"])[:, :T][real], logits[real], atol=1e-5)
    np.testing.assert_allclose(to_numpy(padded["class_logits"]), class_logits, atol=1e-5)


def test_classification_head_reads_the_first_position_and_tied_logits_the_embedding_table(encoder_model):
    layers = LanguageModelLayers.from_model(encoder_model)
    ids = token_ids(lengths=(4, 2))
    hidden = to_numpy(keras.Model(encoder_model.input, layers.blocks[-1].output)(ids))  # (B, T, D)
    outputs = encoder_model(ids)
    kernel, bias = (to_numpy(w) for w in layers.classifier.weights)
    np.testing.assert_allclose(to_numpy(outputs["class_logits"]), hidden[:, 0] @ kernel + bias, rtol=1e-5, atol=1e-5)
    table = to_numpy(layers.token_embedding.embeddings)
    np.testing.assert_allclose(to_numpy(outputs["logits"]), hidden @ table.T, rtol=1e-5, atol=1e-5)


def test_tied_logits_are_the_one_embedding_variable():
    model = lm_model("decoder", tie_embeddings=True)
    layers = LanguageModelLayers.from_model(model)
    assert layers.output_projection is None and "logits" not in [layer.name for layer in model.layers]
    table = layers.token_embedding.embeddings
    assert sum(variable is table for variable in model.trainable_variables) == 1
    assert [tuple(variable.shape) for variable in model.trainable_variables].count((V, D)) == 1
    ids = token_ids()
    hidden = to_numpy(keras.Model(model.input, layers.blocks[-1].output)(ids))  # (B, T, D)
    np.testing.assert_allclose(logits_of(model, ids), hidden @ to_numpy(table).T, rtol=1e-5, atol=1e-5)
    # One table serves both ends: changing it changes the embeddings and the output layer at once.
    table.assign(to_numpy(table) * 2.0)
    doubled = to_numpy(keras.Model(model.input, layers.blocks[-1].output)(ids))
    np.testing.assert_allclose(logits_of(model, ids), doubled @ to_numpy(table).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("kind", "overrides"),
    [("decoder", {"learned_positions": True}), ("encoder", {"num_classes": C, "tie_embeddings": False})],
    ids=["decoder-learned-positions", "encoder-classifier-untied"],
)
def test_keras_file_and_get_config_round_trips(kind, overrides, tmp_path):
    model = lm_model(kind, seed=3, **overrides)
    ids = token_ids()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    for expected, got in zip(keras.tree.flatten(model(ids)), keras.tree.flatten(loaded(ids))):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))
    # Loading rebuilt the model from its config: the same config, through JSON as the file holds it
    # (Keras writes the first position's index as a tuple and rebuilds a list).
    assert json.loads(json.dumps(loaded.get_config())) == json.loads(json.dumps(model.get_config()))
    assert loaded.count_params() == model.count_params()
    for block in LanguageModelLayers.from_model(model).blocks:
        assert type(block) is (DecoderOnlyBlock if kind == "decoder" else EncoderBlock)
        assert type(block).from_config(block.get_config()).get_config() == block.get_config()


def test_language_model_preset_takes_the_translation_sizes_and_round_trips_as_json(tmp_path):
    for name, sizes in PRESETS.items():
        config = language_model_preset(name, "encoder", vocab_size=50)
        assert {key: getattr(config, key) for key in sizes} == sizes
        assert (config.kind, config.vocab_size) == ("encoder", 50)
    config = language_model_preset("small", "decoder", vocab_size=300, tie_embeddings=False, max_length=40)
    config.save(tmp_path / "lm.json")
    assert LanguageModelConfig.load(tmp_path / "lm.json") == config


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"kind": "seq2seq"}, "`kind` must be one of .* kind='seq2seq'"),
        ({"vocab_size": 0}, "vocab_size=0"),
        ({"max_length": -1}, "max_length=-1"),
        ({"num_heads": 3}, "d_model=8, num_heads=3"),
        ({"dropout_rate": 1.0}, "dropout_rate=1.0"),
        ({"attention_score": "fuzzy"}, "attention_score='fuzzy'"),
        ({"projection_activation": "tanh"}, "'tanh'"),
        ({"attention_initialization": "zeros"}, "'zeros'"),
        ({"tie_embeddings": "yes"}, "tie_embeddings='yes'"),
        ({"num_classes": -2}, "num_classes=-2"),
        ({"kind": "decoder", "num_classes": 2}, "Only an encoder .* kind='decoder', num_classes=2"),
    ],
)
def test_invalid_language_model_config_raises_value_error_naming_the_value(overrides, match):
    values = dict(kind="encoder", vocab_size=V, d_model=D, num_heads=H, d_ff=F, num_blocks=N)
    with pytest.raises(ValueError, match=match):
        LanguageModelConfig(**{**values, **overrides}).validate()


def test_builders_and_presets_reject_the_wrong_kind_or_name():
    with pytest.raises(ValueError, match="`build_decoder_only` builds kind='decoder' models. Received: kind='encoder'"):
        build_decoder_only(lm_config("encoder"))
    with pytest.raises(ValueError, match="`build_encoder_only` builds kind='encoder' models. Received: kind='decoder'"):
        build_encoder_only(lm_config("decoder"))
    with pytest.raises(ValueError, match="`preset` must be one of .*Received: preset='huge'"):
        language_model_preset("huge", "decoder")
    with pytest.raises(ValueError, match="Unknown LanguageModelConfig keys: \\['source_vocab_size'\\]"):
        LanguageModelConfig.from_dict({"source_vocab_size": 5})


@pytest.mark.learning(seed=4)
def test_tiny_decoder_only_model_learns_a_few_sequences_with_fit(learning):
    """30 steps on four sequences whose next tokens are determined: the loss falls below a tenth of its start.

    Measured over seeds 0 to 4 with oneDNN on, off and limited to AVX2 (Zen 5 EPYC): after / before
    loss 0.010 to 0.055 (bar 0.1).
    """
    config = lm_config("decoder", d_model=16, d_ff=32, num_blocks=1)
    keras.utils.set_random_seed(learning.seed)
    model = build_decoder_only(config)
    # The translation model's training pieces: masked loss (label 0 ignored), Adam on the Noam schedule.
    compile_transformer(model, config, TrainConfig(warmup_steps=10, learning_rate_scale=0.5, label_smoothing=0.0))
    sequences = token_ids(lengths=(6, 6, 5, 4), length=6, seed=5)
    sequences[:, 0] = [4, 5, 6, 7]  # distinct first tokens: every next token is determined by the ones before
    inputs, labels = sequences[:, :-1], sequences[:, 1:]
    loss = MaskedLabelSmoothedLoss(0.0)
    before = float(loss(labels, model(inputs)))
    steps = 30
    model.fit(np.tile(inputs, (steps, 1)), np.tile(labels, (steps, 1)), batch_size=4, shuffle=False, verbose=0)
    after = float(loss(labels, model(inputs)))
    learning.check("after / before loss", after / before, below=0.1)
