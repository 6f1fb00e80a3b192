"""The model variants: the paper, the document's tutorial code, Kyubyong's repository, and the library's own.

`ModelConfig.variant` sets every switch where the sources differ; these tests hold the table to
what each source does (written out here from the sources, not read from the table), check that
explicit fields override it, that configs saved before variants existed still build the model
they built, that a whole model of each variant computes its source's formulas (NumPy, from
tests/reference.py), and that `train.py --variant` trains and exports each tutorial variant.
"""

import json
from pathlib import Path

import keras
import numpy as np
import pytest
import reference
import tensorflow as tf
from conftest import TINY_MODEL, tiny_train_config
from test_language_runs import LM_MODEL, LM_SETTINGS, _flags, _quiet
from test_layers import attention_params, conv_weights, norm_weights, to_numpy

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import (
    TRANSLATION_SWITCHES,
    VARIANT_SWITCHES,
    LanguageModelConfig,
    ModelConfig,
    language_model_preset,
    preset,
    variant_switches,
)
from keras_transformer.layers import Dropout
from keras_transformer.models import build_transformer
from keras_transformer.models.translation import TransformerLayers

# Each source's choice at every switch, for a config whose dropout_rate is 0.1.
# paper: section 3.2.2 (W^O, linear projections), 3.1 (LayerNorm(x + Sublayer(x))), 5.4 (dropout on
#   each sub-layer's output and on the embeddings; none on the attention weights or inside the FFN),
#   3.5 (sinusoids), 3.4 (one embedding matrix for both embeddings and the pre-softmax transformation).
#   It does not say how padding is masked; its implementation (tensor2tensor) masks from the ids.
# document: multihead_attention (linear Q/K/V, no W^O, dropout on the weights at the model's rate,
#   normalize commented out) and feedforward (dropout 0.2 after each convolution, normalize commented out);
#   positional_encoding, as in the repository, with a frequency per column (10000^(2i/D) at column i);
#   masks sign(reduce_sum(abs(x))) of each sub-layer's inputs, nothing zeroed after a sub-layer.
# repository: multihead_attention (relu Q/K/V, no W^O, dropout on the weights, normalize applied) and
#   feedforward (no dropout, normalize applied); positional_encoding with a frequency per column, but
#   hyperparams.py's default is learned positions (sinusoid = False); masks sign(abs(reduce_sum(x))).
# library: the paper's layers with the tutorial's dropout placement (weights and FFN(x), not the
#   attention sub-layer's output): what this package built before variants existed.
SOURCES = {
    "paper": dict(
        positional_frequencies="paper",
        use_output_projection=True,
        projection_activation="linear",
        normalize=True,
        attention_dropout_rate=0.0,
        attention_residual_dropout_rate=0.1,
        feed_forward_dropout_rate=0.1,
        inner_dropout_rate=0.0,
        padding_masks="ids",
        learned_positions=False,
        embedding_sharing="all",
    ),
    "document": dict(
        positional_frequencies="tutorial",
        use_output_projection=False,
        projection_activation="linear",
        normalize=False,
        attention_dropout_rate=0.1,
        attention_residual_dropout_rate=0.0,
        feed_forward_dropout_rate=0.2,
        inner_dropout_rate=0.2,
        padding_masks="abs_sum",
        learned_positions=False,
        embedding_sharing="none",
    ),
    "repository": dict(
        positional_frequencies="tutorial",
        use_output_projection=False,
        projection_activation="relu",
        normalize=True,
        attention_dropout_rate=0.1,
        attention_residual_dropout_rate=0.0,
        feed_forward_dropout_rate=0.0,
        inner_dropout_rate=0.0,
        padding_masks="sum",
        learned_positions=True,
        embedding_sharing="none",
    ),
    "library": dict(
        positional_frequencies="paper",
        use_output_projection=True,
        projection_activation="linear",
        normalize=True,
        attention_dropout_rate=0.1,
        attention_residual_dropout_rate=0.0,
        feed_forward_dropout_rate=0.1,
        inner_dropout_rate=0.0,
        padding_masks="ids",
        learned_positions=False,
        embedding_sharing="none",
    ),
}


@pytest.mark.parametrize("variant", sorted(SOURCES))
def test_each_variant_sets_every_switch_as_its_source_does(variant):
    assert variant_switches(preset("small", variant=variant)) == SOURCES[variant]
    language_model = {name: value for name, value in SOURCES[variant].items() if name not in TRANSLATION_SWITCHES}
    assert variant_switches(language_model_preset("small", "decoder", variant=variant)) == language_model


def test_the_default_variant_is_the_library_s_as_before_variants_existed():
    assert ModelConfig().variant == "library" and LanguageModelConfig().variant == "library"


@pytest.mark.parametrize("variant", sorted(SOURCES))
def test_sublayers_of_a_built_model_get_the_variant_s_switches(variant):
    model = build_transformer(
        preset("tiny", variant=variant, dropout_rate=0.1, source_vocab_size=11, target_vocab_size=11)
    )
    expected = SOURCES[variant]
    block = model.get_layer("decoder_block_0")
    zeroed = expected["padding_masks"] == "ids"
    for attention in (block.self_attention, block.cross_attention):
        assert attention.use_output_projection == expected["use_output_projection"]
        assert attention.normalize == expected["normalize"]
        assert attention.dropout_rate == expected["attention_dropout_rate"]
        assert attention.residual_dropout_rate == expected["attention_residual_dropout_rate"]
        assert attention.zero_padding == zeroed
        assert attention.sign_mask_rule == ("abs_sum" if zeroed else expected["padding_masks"])
    assert block.feed_forward.dropout_rate == expected["feed_forward_dropout_rate"]
    assert block.feed_forward.inner_dropout_rate == expected["inner_dropout_rate"]
    assert block.feed_forward.zero_padding == zeroed
    assert model.get_layer("target_positions").learned == expected["learned_positions"]
    shared = {"all": ["embedding"], "none": ["logits", "source_embedding", "target_embedding"]}
    assert (
        sorted(name for name in shared["none"] + shared["all"] if name in [layer.name for layer in model.layers])
        == (shared[expected["embedding_sharing"]])
    )


def test_explicit_fields_override_the_variant_and_the_rest_follow_it():
    config = preset("small", variant="document", normalize=True, inner_dropout_rate=0.05)
    switches = variant_switches(config)
    assert switches["normalize"] is True and switches["inner_dropout_rate"] == 0.05
    assert switches["use_output_projection"] is False and switches["feed_forward_dropout_rate"] == 0.2


def test_rates_that_follow_dropout_rate_move_with_it():
    switches = variant_switches(preset("small", variant="paper", dropout_rate=0.3))
    assert switches["attention_residual_dropout_rate"] == 0.3 and switches["feed_forward_dropout_rate"] == 0.3
    assert switches["attention_dropout_rate"] == 0.0


def test_a_config_saved_before_variants_loads_and_builds_the_same_switches(tmp_path):
    values = preset("tiny", source_vocab_size=11, dropout_rate=0.1).to_dict()
    for name in ("variant", *VARIANT_SWITCHES):  # the fields variants added
        values.pop(name)
    values.update(use_output_projection=False, projection_activation="relu")  # as an old run saved them
    path = tmp_path / "model_config.json"
    path.write_text(json.dumps(values))
    switches = variant_switches(ModelConfig.load(path))
    assert switches == {**SOURCES["library"], "use_output_projection": False, "projection_activation": "relu"}


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"variant": "tutorial"}, r"`variant` must be one of .*Received: variant='tutorial'"),
        ({"normalize": "yes"}, r"`normalize` must be a bool. Received: normalize='yes'"),
        ({"use_output_projection": 1}, r"`use_output_projection` must be a bool"),
        ({"attention_residual_dropout_rate": 1.0}, r"`attention_residual_dropout_rate` must be a number in \[0, 1\)"),
        ({"inner_dropout_rate": -0.1}, r"`inner_dropout_rate` must be a number in \[0, 1\)"),
    ],
)
def test_bad_variant_settings_are_errors_naming_the_value(overrides, match):
    with pytest.raises(ValueError, match=match):
        ModelConfig(**overrides).validate()
    with pytest.raises(ValueError, match=match):
        LanguageModelConfig(**overrides).validate()


def test_cli_offers_the_variants_and_rejects_others(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--variant {library,paper,document,repository}" in help_text
    assert "--attention-residual-dropout-rate ATTENTION_RESIDUAL_DROPOUT_RATE" in help_text
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--variant", "tutorial"])
    assert exit_info.value.code == 2


def _train_argv(train_config):
    """`keras-transformer train` flags of a tiny `TrainConfig`, so a run goes through the command line."""
    names = ("preset", "train_size", "precision", "validation_size", "test_size", "source_vocab_size")
    names += ("target_vocab_size", "epochs", "steps_per_epoch", "batch_size", "warmup_steps", "run_dir")
    names += ("export_dir", "model_name")
    values = {**{name: getattr(train_config, name) for name in names}, **TINY_MODEL}
    argv = ["train"]
    for name, value in values.items():
        argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["paper", "document", "repository"])
def test_train_py_trains_and_exports_a_variant(variant, tmp_path, capsys):
    """The paper's one table needs one vocabulary: the run learns it without being told."""
    train_config = tiny_train_config(tmp_path)
    assert main([*_train_argv(train_config), "--variant", variant, "--dropout-rate", "0.1"]) == 0
    assert "Done in" in capsys.readouterr().out
    saved_train, model_config, model, _ = runs.load_run(train_config.run_dir)
    assert model_config.variant == variant
    assert variant_switches(model_config) == SOURCES[variant]
    attention = model.get_layer("encoder_block_0").self_attention
    assert attention.use_output_projection == SOURCES[variant]["use_output_projection"]
    assert attention.normalize == SOURCES[variant]["normalize"]
    assert saved_train.joint_vocab == (variant == "paper")
    summary = json.loads((Path(train_config.run_dir) / runs.SUMMARY_FILE).read_text())
    assert (Path(summary["export_path"]) / "saved_model.pb").is_file()


# ---------------------------------------------------------------------------
# The whole model against a NumPy reference, variant by variant
# ---------------------------------------------------------------------------
# The model's `Dropout` layer at each place the reference drops, by the reference's kind.
MODEL_DROPOUTS = {
    "weights": "attention_dropout",
    "residual": "residual_dropout",
    "inner": "inner_dropout",
    "output": "output_dropout",
}
# The `SOURCES` switch of each kind's rate; the embeddings' is `dropout_rate` in every source.
RATE_SWITCHES = {
    "weights": "attention_dropout_rate",
    "residual": "attention_residual_dropout_rate",
    "inner": "inner_dropout_rate",
    "output": "feed_forward_dropout_rate",
}


def numpy_transformer(model, config, source_ids, target_in_ids, dropout=None):
    """A one-or-more-block encoder-decoder's logits, computed by tests/reference.py's formulas.

    Each sublayer is the tutorial's function (`reference.multihead_attention`,
    `reference.feedforward`) with the variant's switches, on the model's weights; the embeddings
    are the tutorial's `embedding` (row 0 zero, times sqrt(D)) plus the variant's positions
    (sinusoids or the learned table), at real positions only (Kyubyong's train.py multiplies the
    sum by the embedding's sign mask). Padding: with `padding_masks="ids"` the package's masks
    from the ids and outputs zeroed there; else each sublayer's sign masks of its own inputs
    (`reference.sign_mask` or `reference.repository_sign_mask`) and nothing zeroed, as the
    tutorial code. Dropout is left out (inference), unless `dropout(layer, kind, x)` is given:
    the reference then calls it wherever its source drops (`reference`'s kinds, and "embedding"
    after the positions), with the model's `Dropout` layer of that place.
    """
    switches = variant_switches(config)
    layers = TransformerLayers.from_model(model)
    heads = config.num_heads
    from_ids = switches["padding_masks"] == "ids"
    rule = {"abs_sum": reference.sign_mask, "sum": reference.repository_sign_mask}.get(switches["padding_masks"])
    options = dict(
        use_output_projection=switches["use_output_projection"],
        projection_activation="relu" if switches["projection_activation"] == "relu" else None,
        normalize=switches["normalize"],
        zero_padding_rows=from_ids,
        **({} if from_ids else {"mask_function": rule}),
    )

    def dropped(owner, kind):
        """The reference's `dropout(kind, x)` of one sublayer, or None."""
        if dropout is None:
            return None
        return lambda kind, x: dropout(getattr(owner, MODEL_DROPOUTS[kind]), kind, x)

    def embedded(ids, embedding, positions_layer, embedding_dropout):
        mask = (np.asarray(ids) != 0).astype(float)
        if switches["learned_positions"]:
            positions = to_numpy(positions_layer.position_embeddings)[: ids.shape[1]][None]  # (1, T, D)
        else:
            sinusoids = {"paper": reference.positional_encoding, "tutorial": reference.tutorial_positional_encoding}
            positions = sinusoids[switches["positional_frequencies"]](ids.shape[1], config.d_model)[None]
        outputs = reference.embedding(ids, to_numpy(embedding.embeddings)) + positions * mask[:, :, None]
        return (outputs if dropout is None else dropout(embedding_dropout, "embedding", outputs)), mask

    def feed_forward(layer, x, mask):
        gamma, beta = norm_weights(layer)
        return reference.feedforward(
            x,
            *conv_weights(layer),
            gamma,
            beta,
            normalize=switches["normalize"],
            mask=mask,
            zero_padding_rows=from_ids,
            dropout=dropped(layer, "feed_forward"),
        )

    def attention(layer, queries, keys, queries_mask, keys_mask, causality=False):
        masks = dict(queries_mask=queries_mask, keys_mask=keys_mask) if from_ids else {}
        return reference.multihead_attention(
            queries,
            keys,
            None,
            attention_params(layer),
            heads,
            causality,
            **masks,
            **options,
            dropout=dropped(layer, ""),
        )[0]

    memory, source_mask = embedded(source_ids, layers.source_embedding, layers.source_positions, layers.source_dropout)
    for block in layers.encoder_blocks:
        memory = attention(block.self_attention, memory, memory, source_mask, source_mask)
        memory = feed_forward(block.feed_forward, memory, source_mask)
    hidden, target_mask = embedded(
        target_in_ids, layers.target_embedding, layers.target_positions, layers.target_dropout
    )
    for block in layers.decoder_blocks:
        hidden = attention(block.self_attention, hidden, hidden, target_mask, target_mask, causality=True)
        hidden = attention(block.cross_attention, hidden, memory, target_mask, source_mask)
        hidden = feed_forward(block.feed_forward, hidden, target_mask)
    kernel, bias = (None if weight is None else to_numpy(weight) for weight in layers.logits_weights())
    return hidden @ kernel + (0.0 if bias is None else bias)


# A batch with padding on both sides, and the ids the random models below read.
SOURCE_IDS = np.array([[3, 5, 7, 2, 0, 0], [4, 12, 6, 9, 8, 1]], "int32")
TARGET_IN_IDS = np.array([[1, 6, 9, 0, 0], [1, 2, 10, 7, 4]], "int32")


def random_variant_model(variant, num_blocks=2):
    """`(config, model)`: a tiny model of `variant` with dropout 0.1 and seeded random weights (scale 0.2)."""
    target_vocab_size = 13 if variant == "paper" else 11  # the paper's one table needs one vocabulary
    config = preset(
        "tiny",
        variant=variant,
        num_blocks=num_blocks,
        dropout_rate=0.1,
        source_vocab_size=13,
        target_vocab_size=target_vocab_size,
    )
    model = build_transformer(config)
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(scale=0.2, size=w.shape).astype("float32") for w in model.get_weights()])
    return config, model


@pytest.mark.parametrize("variant", sorted(SOURCES))
def test_the_whole_model_of_each_variant_is_its_source_s_formulas(variant):
    """Every position's logits, padding included: what the tutorial variants leave there is theirs too."""
    config, model = random_variant_model(variant)
    logits = to_numpy(model([SOURCE_IDS, TARGET_IN_IDS], training=False))
    expected = numpy_transformer(model, config, SOURCE_IDS, TARGET_IN_IDS)
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("variant", sorted(SOURCES))
def test_a_model_of_each_variant_saves_and_loads_with_its_switches(variant, tmp_path):
    """The switches live in the layers' configs: a loaded model computes the same, padding rows included."""
    _, model = random_variant_model(variant, num_blocks=1)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    for name in ("encoder_block_0", "decoder_block_0", "target_positions"):
        assert loaded.get_layer(name).get_config() == model.get_layer(name).get_config()
    inputs = [np.array([[3, 5, 7, 0, 0]], "int32"), np.array([[1, 6, 0, 0]], "int32")]
    np.testing.assert_allclose(to_numpy(loaded(inputs)), to_numpy(model(inputs)), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(SOURCES))
def test_in_training_each_variant_drops_where_and_as_often_as_its_source(variant, monkeypatch):
    """Every dropout of a training pass, checked against the source's: its place, its rate, no other.

    Each `Dropout` call draws its mask from a seeded NumPy generator and records it; the NumPy
    reference applies the mask recorded at each place its source drops (a source rate of 0 there:
    the model must not drop), and both logits agree at every position.
    """
    recorded = {}
    rng = np.random.default_rng(1)

    def recording_call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        keep = rng.random(tuple(inputs.shape)) >= self.rate
        recorded[id(self)] = (self.rate, keep)
        return inputs * keras.ops.convert_to_tensor(keep / (1 - self.rate), inputs.dtype)

    monkeypatch.setattr(Dropout, "call", recording_call)
    config, model = random_variant_model(variant)
    logits = to_numpy(model([SOURCE_IDS, TARGET_IN_IDS], training=True))
    used = set()

    def source_dropout(layer, kind, x):
        rate = 0.1 if kind == "embedding" else SOURCES[variant][RATE_SWITCHES[kind]]
        if rate == 0:
            assert id(layer) not in recorded, f"the model drops at {kind} ({layer.name}); the {variant} does not"
            return x
        assert id(layer) in recorded, f"the {variant} drops at {kind} ({layer.name}); the model does not"
        model_rate, keep = recorded[id(layer)]
        assert model_rate == pytest.approx(rate), (kind, layer.name)
        used.add(id(layer))
        return x * keep / (1 - rate)

    expected = numpy_transformer(model, config, SOURCE_IDS, TARGET_IN_IDS, dropout=source_dropout)
    assert used == set(recorded) and len(used) > 2 * config.num_blocks
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["document", "repository"])
def test_a_language_model_of_a_tutorial_variant_trains_and_its_export_generates_as_in_process(variant, tmp_path):
    """The sign masks' per-position cache bits survive tracing: the exported generator is the in-process one."""
    status, output = _quiet(["train", *_flags(LM_SETTINGS, LM_MODEL, tmp_path), "--variant", variant])
    assert status == 0, output
    summary = json.loads((tmp_path / "run" / runs.SUMMARY_FILE).read_text())
    assert summary["model_config"]["variant"] == variant
    examples = summary["test"]["examples"]
    served = tf.saved_model.load(summary["export_path"]).signatures["serving_default"](
        prompt=tf.constant([example["prompt"] for example in examples])
    )
    assert [text.decode() for text in served["continuation"].numpy()] == [
        example["continuation"] for example in examples
    ]
