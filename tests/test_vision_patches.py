"""The Vision Transformer's patch embedding and attention rollout, against NumPy references of their formulas."""

import keras
import numpy as np
import pytest
from conftest import to_numpy

from keras_transformer.vision import PatchEmbedding, attention_rollout


def _reference(images, patch, kernel, bias, cls, positions):
    """Equation 1 of the ViT paper in NumPy: row-major P x P patches, flattened, projected; class token; positions."""
    batch, height, width, _ = images.shape
    patches = [
        images[:, r : r + patch, c : c + patch, :].reshape(batch, -1)
        for r in range(0, height, patch)
        for c in range(0, width, patch)
    ]
    tokens = np.stack(patches, axis=1) @ kernel + bias  # (B, N, D)
    if cls is not None:
        tokens = np.concatenate([np.broadcast_to(cls, (batch, 1, tokens.shape[-1])), tokens], axis=1)
    return tokens + positions


@pytest.mark.parametrize("class_token", [True, False])
def test_patch_embedding_is_equation_1(class_token):
    keras.utils.set_random_seed(0)
    images = np.random.default_rng(0).normal(size=(2, 8, 12, 3)).astype("float32")
    layer = PatchEmbedding(patch_size=4, d_model=5, class_token=class_token)
    outputs = to_numpy(layer(images))
    assert outputs.shape == (2, 6 + class_token, 5) == layer.compute_output_shape(images.shape)
    if class_token:  # a class token that is not zero, so that its place is checked too
        layer.class_embedding.assign(np.arange(5, dtype="float32")[None, None])
        outputs = to_numpy(layer(images))
    expected = _reference(
        images,
        4,
        to_numpy(layer.projection.kernel),
        to_numpy(layer.projection.bias),
        to_numpy(layer.class_embedding) if class_token else None,
        to_numpy(layer.position_embeddings),
    )
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


def test_patch_embedding_round_trips_through_its_config_and_a_saved_model(tmp_path):
    inputs = keras.Input((8, 8, 1))
    model = keras.Model(inputs, PatchEmbedding(patch_size=2, d_model=4, name="patches")(inputs))
    images = np.random.default_rng(1).random((3, 8, 8, 1)).astype("float32")
    model.save(tmp_path / "vit.keras")
    loaded = keras.models.load_model(tmp_path / "vit.keras")
    np.testing.assert_allclose(to_numpy(loaded(images)), to_numpy(model(images)), atol=1e-6)
    config = model.get_layer("patches").get_config()
    assert (config["patch_size"], config["d_model"], config["class_token"]) == (2, 4, True)


@pytest.mark.parametrize("shape", [(1, 10, 8, 1), (1, 8, 9, 3)])
def test_an_image_side_that_is_no_multiple_of_the_patch_is_refused_by_name(shape):
    with pytest.raises(ValueError, match="must be a multiple of patch_size"):
        PatchEmbedding(patch_size=4, d_model=4)(np.zeros(shape, "float32"))


@pytest.mark.parametrize("arguments", [dict(patch_size=0, d_model=4), dict(patch_size=2, d_model=0)])
def test_bad_sizes_are_refused(arguments):
    with pytest.raises(ValueError):
        PatchEmbedding(**arguments)


def test_attention_rollout_multiplies_the_layers_with_the_residual_added():
    rng = np.random.default_rng(2)
    weights = [rng.random((2, 3, 4, 4)) for _ in range(3)]  # (B, heads, T, T), rows normalised below
    weights = [w / w.sum(-1, keepdims=True) for w in weights]
    expected = None
    for layer in weights:
        mixed = 0.5 * layer.mean(1) + 0.5 * np.eye(4)
        mixed /= mixed.sum(-1, keepdims=True)
        expected = mixed if expected is None else mixed @ expected
    rollout = to_numpy(attention_rollout([keras.ops.convert_to_tensor(w, "float32") for w in weights]))
    np.testing.assert_allclose(rollout, expected, rtol=1e-5)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, rtol=1e-5)
    # Attention that only reads itself leaves each position with itself.
    own = np.broadcast_to(np.eye(4), (1, 2, 4, 4)).astype("float32")
    np.testing.assert_allclose(to_numpy(attention_rollout([own, own])), np.eye(4)[None], atol=1e-6)


def test_the_vit_classifier_maps_the_class_tokens_rollout_onto_the_image(tmp_path):
    from keras_transformer.vision import models

    keras.utils.set_random_seed(0)
    classifier = models.build_classifier("vit", image_size=(8, 12))
    images = np.random.default_rng(3).random((2, 8, 12, 1)).astype("float32")
    outputs = classifier.attention_model(images)
    assert to_numpy(outputs["logits"]).shape == (2, 10) and to_numpy(outputs["attention_map"]).shape == (2, 8, 12)
    # Each 4 x 4 patch of the map holds that patch's share of the class token's rollout.
    weights = [
        to_numpy(block(x, return_attention_scores=True)[1]["self_attention"])
        for block, x in _block_inputs(classifier.model, images)
    ]
    shares = to_numpy(attention_rollout(weights))[:, 0, 1:].reshape(2, 2, 3)
    np.testing.assert_allclose(to_numpy(outputs["attention_map"])[:, ::4, ::4], shares, rtol=1e-4, atol=1e-6)
    classifier.attention_model.save(tmp_path / "vit.keras")
    loaded = keras.models.load_model(tmp_path / "vit.keras")
    np.testing.assert_allclose(to_numpy(loaded(images)["attention_map"]), to_numpy(outputs["attention_map"]), atol=1e-5)
    with pytest.raises(ValueError, match="needs image_size"):
        models.build_classifier("vit")


def _block_inputs(model, images):
    """Each encoder block of the ViT with the tokens it reads."""
    tokens = model.get_layer("patch_embedding")(images)
    for index in range(4):
        block = model.get_layer(f"encoder_block_{index}")
        yield block, tokens
        tokens = block(tokens)
