"""The cluttered-glyph task, its tf.data pipeline (TFDS offline with `tfds.testing.mock_data`), and the pointing scores.

The task is checked for what the experiment relies on: deterministic, independent splits; boxes
that hold the glyph and nothing of the clutter; placements that, cut out by a spatial transformer,
give the glyph centred and upright (a nearest-template reader of those glimpses reads every label);
errors naming their argument.
"""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.vision import SpatialTransformer
from keras_transformer.vision.cluttered import (
    FONT,
    GLYPH_SETS,
    angle_error,
    generate,
    generate_splits,
    glyph_bitmaps,
    placement_theta,
    theta_placement,
)
from keras_transformer.vision.datasets import (
    CanvasChunks,
    fresh_canvas_dataset,
    image_dataset,
    prepare_images,
    tfds_image_dataset,
)
from keras_transformer.vision.pointing import box_masks, mass_in_box, pointing_hits, pointing_summary, uniform_share


def test_splits_are_deterministic_and_independent():
    first = generate_splits({"train": 20, "test": 10}, seed=3, size=32)
    again = generate_splits({"test": 10, "train": 50}, seed=3, size=32)
    np.testing.assert_array_equal(first["test"].images, again["test"].images)  # the train size changes nothing
    np.testing.assert_array_equal(first["test"].boxes, again["test"].boxes)
    assert not np.array_equal(first["train"].images[:10], first["test"].images)
    other_seed = generate(10, seed=4, split="test", size=32)
    assert not np.array_equal(other_seed.images, first["test"].images)


def test_streams_are_further_draws_of_a_split_never_its_own_canvases_nor_each_others():
    own = generate(20, seed=3, split="train", size=32)
    streams = [generate(20, seed=3, split="train", size=32, stream=k) for k in (0, 1)]
    np.testing.assert_array_equal(streams[0].images, generate(20, seed=3, split="train", size=32, stream=0).images)
    for a, b in ((own, streams[0]), (own, streams[1]), (streams[0], streams[1])):
        assert not any(np.array_equal(x, y) for x in a.images for y in b.images)
    test = generate(20, seed=3, split="test", size=32)
    assert not any(np.array_equal(x, y) for x in streams[0].images for y in test.images)
    with pytest.raises(ValueError, match="`stream` must be an int >= 0. Received: stream=-1"):
        generate(4, stream=-1)


def test_canvases_labels_and_placements_have_their_documented_ranges():
    data = generate(64, seed=0, size=40, object_scale=(0.3, 0.4), max_rotation=20.0)
    assert data.images.shape == (64, 40, 40, 1) and data.images.dtype == np.float32
    assert data.images.min() >= 0.0 and data.images.max() <= 1.0 + 1e-6
    assert data.labels.dtype == np.int32 and set(data.labels) <= set(range(10)) and data.num_classes == 10
    assert np.all((data.heights >= 12.0) & (data.heights <= 16.0))
    assert np.all(np.abs(data.angles) <= np.radians(20.0) + 1e-6)
    top, left, bottom, right = data.boxes.T
    assert np.all((0 <= top) & (top < bottom) & (bottom <= 40) & (0 <= left) & (left < right) & (right <= 40))
    # The centre lies in the box, and the box is about the glyph's size.
    assert np.all((top <= data.centres[:, 0]) & (data.centres[:, 0] <= bottom))
    assert np.all((left <= data.centres[:, 1]) & (data.centres[:, 1] <= right))
    assert np.all((bottom - top >= 0.6 * data.heights) & (bottom - top <= 1.3 * data.heights + 2))
    assert len(data.head(5)) == 5 and data.head(5).characters == data.characters


def test_the_box_holds_the_whole_glyph_and_no_clutter():
    clean = generate(32, seed=1, size=40, clutter=0)
    cluttered = generate(32, seed=1, size=40, clutter=10)
    inside = box_masks(clean.boxes, 40, 40)[..., None]
    np.testing.assert_array_equal(clean.boxes, cluttered.boxes)
    np.testing.assert_array_equal(np.where(inside, cluttered.images, 0), np.where(inside, clean.images, 0))
    assert np.all(np.where(inside, 0, clean.images) <= 0.1)  # no ink of the glyph outside its box
    assert np.mean(np.where(inside, 0, cluttered.images) > 0.5) > 0.02  # but clutter there


def test_the_box_is_the_tight_box_of_the_mask_and_clutter_never_sets_a_mask_pixel():
    clean = generate(32, seed=1, size=40, clutter=0)
    cluttered = generate(32, seed=1, size=40, clutter=10, noise=0.1)
    assert cluttered.masks.shape == (32, 40, 40) and cluttered.masks.dtype == bool
    np.testing.assert_array_equal(clean.masks, cluttered.masks)  # the glyph's ink alone, whatever the clutter
    np.testing.assert_array_equal(clean.masks, clean.images[..., 0] > 0.1)  # without clutter: the canvas's ink
    for mask, box in zip(cluttered.masks, cluttered.boxes):
        rows, columns = np.nonzero(mask)
        assert tuple(box) == (rows.min(), columns.min(), rows.max() + 1, columns.max() + 1)
    assert np.all(cluttered.masks <= box_masks(cluttered.boxes, 40, 40))
    clutter_ink = (cluttered.images[..., 0] > 0.5) & ~box_masks(cluttered.boxes, 40, 40)
    assert clutter_ink.any() and not np.any(clutter_ink & cluttered.masks)
    head = cluttered.head(3)
    np.testing.assert_array_equal(head.masks, cluttered.masks[:3])
    assert generate(0, size=24).masks.shape == (0, 24, 24)


def test_noise_stays_in_range_and_the_fine_set_renders_its_letters():
    data = generate(8, seed=2, size=24, glyphs="fine", noise=0.2)
    assert data.characters == GLYPH_SETS["fine"] and data.images.min() >= 0.0 and data.images.max() <= 1.0
    bitmaps = glyph_bitmaps("OQ")
    assert bitmaps.shape == (2, 32, 24)
    difference = np.abs(bitmaps[0] - bitmaps[1]) > 0.5
    assert 0 < difference.mean() < 0.1  # Q is an O with a tail: a small difference


def test_placement_glimpses_are_the_glyph_centred_and_upright():
    data = generate(40, seed=5, size=48, clutter=4, max_rotation=40.0)
    theta = placement_theta(data, glimpse_fraction=1.25)
    glimpses = SpatialTransformer(output_size=(20, 20))(data.images, theta=theta).numpy()[..., 0]  # (N, 20, 20)
    # Templates: each glyph upright and centred in a square of the same margin, at the same size.
    bitmaps = glyph_bitmaps(data.characters)[..., None]  # (K, 32, 24, 1)
    side = 1.25 * 28  # the glyph's 7 rows are 28 bitmap pixels
    square = np.zeros((len(bitmaps), 35, 35, 1), "float32")
    square[:, 1:33, 5:29] = bitmaps
    templates = SpatialTransformer(output_size=(20, 20))(square, theta=np.tile([[1, 0, 0], [0, 1, 0]], (10, 1, 1)))
    templates = templates.numpy()[..., 0].reshape(10, -1)
    assert side <= 35

    def normalized(v):
        v = v - v.mean(-1, keepdims=True)
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    read = (normalized(glimpses.reshape(40, -1)) @ normalized(templates).T).argmax(-1)
    assert np.mean(read == data.labels) == 1.0
    canvases = SpatialTransformer(output_size=(20, 20))(data.images).numpy()[..., 0].reshape(40, -1)  # no placement
    assert np.mean((normalized(canvases) @ normalized(templates).T).argmax(-1) == data.labels) < 0.5

    centres, sides, angles = theta_placement(theta, 48)
    np.testing.assert_allclose(centres, data.centres, atol=1e-4)
    np.testing.assert_allclose(sides, 1.25 * data.heights, rtol=1e-5)
    assert np.all(angle_error(angles, data.angles) < 1e-5)
    assert angle_error(np.pi - 0.1, -np.pi + 0.1) == pytest.approx(0.2)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"split": "dev"}, "`split` must be one of"),
        ({"size": 8}, "`size` must be an int >= 16. Received: size=8"),
        ({"object_scale": (0.5, 0.3)}, r"Received: object_scale=\(0.5, 0.3\)"),
        ({"max_rotation": 200}, r"`max_rotation` must be a number in \[0, 180\]. Received: max_rotation=200"),
        ({"clutter": -1}, "`clutter` must be an int >= 0. Received: clutter=-1"),
        ({"fragment_size": 0}, "Received: fragment_size=0"),
        ({"glyphs": "0a"}, r"No bitmap for \['a'\]"),
    ],
)
def test_bad_task_arguments_are_errors_naming_the_value(arguments, message):
    with pytest.raises(ValueError, match=message):
        generate(4, **arguments)


@pytest.mark.parametrize("options", [{}, {"clutter": 0}, {"noise": 0.2}])
def test_no_examples_is_an_empty_task_of_the_documented_shapes(options):
    data = generate(0, size=32, **options)
    assert data.images.shape == (0, 32, 32, 1) and data.images.dtype == np.float32
    assert data.labels.shape == (0,) and data.boxes.shape == (0, 4) and data.centres.shape == (0, 2)
    assert data.heights.shape == (0,) and data.angles.shape == (0,)


def test_every_glyph_of_the_font_is_seven_rows_of_five():
    assert all(len(rows) == 7 and all(len(row) == 5 for row in rows) for rows in FONT.values())
    assert len({rows for rows in FONT.values()}) == len(FONT)  # no two glyphs alike


# ---------------------------------------------------------------------------
# tf.data pipelines
# ---------------------------------------------------------------------------
def test_image_dataset_batches_the_task_and_shuffles_with_its_seed():
    data = generate(10, seed=0, size=24)
    batches = list(image_dataset(data, batch_size=4))
    assert [tuple(images.shape) for images, _ in batches] == [(4, 24, 24, 1), (4, 24, 24, 1), (2, 24, 24, 1)]
    images, labels = batches[0]
    assert images.dtype == tf.float32 and labels.dtype == tf.int32
    np.testing.assert_array_equal(images.numpy(), data.images[:4])
    shuffled = [labels.numpy() for _, labels in image_dataset(data, 10, shuffle=True, seed=1)]
    again = [labels.numpy() for _, labels in image_dataset(data, 10, shuffle=True, seed=1)]
    np.testing.assert_array_equal(shuffled, again)
    assert sorted(shuffled[0]) == sorted(data.labels)
    repeated = image_dataset((data.images, data.labels), 4, repeat=True).take(5)
    assert len(list(repeated)) == 5


def test_fresh_canvas_dataset_is_chunk_after_chunk_of_new_canvases_in_the_seeds_order():
    batches = list(fresh_canvas_dataset(4, seed=2, chunk_size=6, task_seed=1, size=24).take(3))  # 12 canvases
    images = np.concatenate([x.numpy() for x, _ in batches])
    labels = np.concatenate([y.numpy() for _, y in batches])
    assert images.shape == (12, 24, 24, 1) and batches[0][0].dtype == tf.float32 and labels.dtype == np.int32
    rng = np.random.default_rng(2)
    for k in range(2):  # chunk k: stream k of the task's training split, in the seed's order
        chunk = generate(6, seed=1, split="train", size=24, stream=k)
        order = rng.permutation(6)
        np.testing.assert_array_equal(images[6 * k : 6 * k + 6], chunk.images[order])
        np.testing.assert_array_equal(labels[6 * k : 6 * k + 6], chunk.labels[order])
    other = np.concatenate(
        [x.numpy() for x, _ in fresh_canvas_dataset(6, seed=5, chunk_size=6, task_seed=1, size=24).take(1)]
    )
    assert sorted(map(bytes, other)) == sorted(map(bytes, images[:6])) and not np.array_equal(other, images[:6])


def test_datasets_sharing_canvas_chunks_see_the_same_canvases_generated_once():
    chunks = CanvasChunks(6, task_seed=1, size=24)
    first = [x.numpy() for x, _ in fresh_canvas_dataset(4, seed=2, chunks=chunks).take(3)]  # chunks 0 and 1
    held = [chunks(k)[0] for k in range(2)]  # (tf.data may have read ahead into chunk 2)
    again = [x.numpy() for x, _ in fresh_canvas_dataset(4, seed=2, chunks=chunks).take(3)]
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(again))
    alone = [x.numpy() for x, _ in fresh_canvas_dataset(4, seed=2, chunk_size=6, task_seed=1, size=24).take(3)]
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(alone))  # the same canvases as unshared
    np.testing.assert_array_equal(chunks(0)[0], generate(6, seed=1, split="train", size=24, stream=0).images)
    assert all(chunks(k)[0] is held[k] for k in range(2))  # generated once, read by both datasets


def test_canvas_chunks_without_keep_hold_one_chunk_and_bad_arguments_fail_before_training():
    chunks = CanvasChunks(5, keep=False, size=20)
    chunks(0), chunks(1), chunks(2)
    assert len(chunks) == 1
    with pytest.raises(ValueError, match="chunk_size"):
        CanvasChunks(0, size=20)
    with pytest.raises(ValueError, match="size"):
        CanvasChunks(5, size=8)
    with pytest.raises(ValueError, match="CanvasChunks"):
        fresh_canvas_dataset(4, chunks=chunks, size=20)


def test_prepare_images_scales_pads_and_converts_channels():
    rgb = tf.constant(np.full((2, 10, 20, 3), 255, np.uint8))
    out = prepare_images(rgb, channels=1, image_size=(16, 16))
    assert out.shape == (2, 16, 16, 1) and out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy()[:, 4:12], 1.0, atol=1e-3)  # 2:1 fits 16 wide, 8 high (grey: 0.9999)
    assert np.all(out.numpy()[:, :4] == 0.0) and np.all(out.numpy()[:, 12:] == 0.0)  # padded, not stretched
    assert prepare_images(tf.zeros((1, 4, 4, 1)), channels=3).shape == (1, 4, 4, 3)
    with pytest.raises(ValueError, match="Received: channels=2"):
        prepare_images(rgb, channels=2)


@pytest.mark.parametrize(
    "name, channels, size, classes",
    [("mnist", None, (28, 28), 10), ("cifar10", 1, (40, 40), 10), ("caltech_birds2011", 3, (48, 48), 200)],
)
def test_tfds_image_datasets_go_through_the_same_pipeline_offline(name, channels, size, classes):
    with tfds.testing.mock_data(num_examples=6):
        dataset, num_classes = tfds_image_dataset(name, "train", 4, image_size=size, channels=channels)
        images, labels = next(iter(dataset))
    assert num_classes == classes
    assert images.shape[:3] == (4, *size) and images.dtype == tf.float32 and labels.dtype == tf.int32
    assert images.shape[-1] == (channels or 1)
    assert 0.0 <= images.numpy().min() and images.numpy().max() <= 1.0
    assert np.all((labels.numpy() >= 0) & (labels.numpy() < classes))


def test_a_tfds_dataset_that_cannot_be_loaded_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match="Cannot load TFDS dataset 'no_such_images'"):
        tfds_image_dataset("no_such_images", "train", 4, data_dir=str(tmp_path))


# ---------------------------------------------------------------------------
# Pointing scores
# ---------------------------------------------------------------------------
def test_pointing_scores_of_known_maps():
    boxes = np.array([[0, 0, 2, 2], [1, 1, 3, 4]])  # areas 4 and 6 of 16
    uniform = np.ones((2, 4, 4))
    on_box = box_masks(boxes, 4, 4).astype(float)
    np.testing.assert_allclose(uniform_share(boxes, 4, 4), [4 / 16, 6 / 16])
    np.testing.assert_allclose(mass_in_box(uniform, boxes), [4 / 16, 6 / 16])
    np.testing.assert_allclose(mass_in_box(on_box, boxes), [1.0, 1.0])
    np.testing.assert_allclose(mass_in_box(np.zeros((2, 4, 4)), boxes), [4 / 16, 6 / 16])  # no mass: uniform
    off = np.zeros((2, 4, 4))
    off[:, 3, 0] = 1.0  # a peak outside both boxes
    np.testing.assert_array_equal(pointing_hits(off, boxes), [0.0, 0.0])
    np.testing.assert_array_equal(pointing_hits(on_box, boxes), [1.0, 1.0])
    np.testing.assert_allclose(pointing_hits(uniform, boxes), [4 / 16, 6 / 16])  # ties: a random pick among them
    summary = pointing_summary(on_box, boxes)
    assert summary["mass_in_box"] == 1.0 and summary["lift"] == pytest.approx(1 / (10 / 32))
    with pytest.raises(ValueError, match="non-negative"):
        mass_in_box(-uniform, boxes)
