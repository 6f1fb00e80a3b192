"""Image classification data as tf.data pipelines: the cluttered glyphs, or a TFDS image dataset.

TensorFlow only (the layers and models are backend-neutral; this module is not). Every source goes
through the same steps (`prepare_images`): images to float32 in [0, 1], optionally to a fixed
channel count and size (padded, not stretched, keeping the aspect ratio), then batched as
`(images [B, H, W, C], labels [B])`:

    image_dataset(data, batch_size, ...)         a `ClutteredGlyphs` (or arrays) in memory
    fresh_canvas_dataset(batch_size, ...)        newly generated cluttered glyphs, none seen twice
                                                 (`CanvasChunks`: generated once, shared by several)
    tfds_image_dataset(name, split, ...)         a TFDS dataset read with `as_supervised=True`, e.g.
                                                 "mnist", "cifar10", "caltech_birds2011"
                                                 (fine-grained birds): whatever the user has
                                                 downloaded; nothing is downloaded unless
                                                 `download=True`
"""

import itertools
import threading

import numpy as np
import tensorflow as tf

from keras_transformer.checks import check_choice, check_int
from keras_transformer.vision.cluttered import generate


def prepare_images(images, channels=None, image_size=None):
    """Images to float32 in [0, 1], with `channels` channels and `image_size` height and width.

    Args:
        images: uint8 (0 .. 255) or float (already in [0, 1]) tensor `[..., H, W, C]`.
        channels: None (keep), 1 (RGB to grayscale) or 3 (grayscale repeated).
        image_size: None (keep) or `(height, width)`: resized to fit inside, keeping the aspect
            ratio, and padded with zeros to exactly that size.

    Returns:
        float32 tensor `[..., height, width, channels]`.
    """
    check_choice("channels", channels, (None, 1, 3))
    if images.dtype == tf.uint8:
        images = tf.cast(images, tf.float32) / 255.0
    else:
        images = tf.cast(images, tf.float32)
    if channels is not None and images.shape[-1] != channels:
        if channels == 1:
            images = tf.image.rgb_to_grayscale(images)
        else:
            images = tf.image.grayscale_to_rgb(images)
    if image_size is not None:
        images = tf.image.resize_with_pad(images, *image_size)
    return images


def image_dataset(data, batch_size, shuffle=False, seed=0, repeat=False):
    """A `ClutteredGlyphs` (or `(images, labels)` arrays) as a batched tf.data pipeline.

    Args:
        data: a `keras_transformer.vision.cluttered.ClutteredGlyphs`, or a pair of arrays
            `(images [N, H, W, C], labels [N])`.
        batch_size: int, examples per batch (the last batch may be smaller).
        shuffle: bool, shuffle the examples (again every epoch), seeded.
        seed: int, the shuffle's seed.
        repeat: bool, repeat forever (for `model.fit(steps_per_epoch=...)`).

    Returns:
        `tf.data.Dataset` of `(images float32 [B, H, W, C], labels int32 [B])`.
    """
    images, labels = (data.images, data.labels) if hasattr(data, "images") else data
    dataset = tf.data.Dataset.from_tensor_slices((images, tf.cast(labels, tf.int32)))
    if shuffle:
        dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset.batch(batch_size).map(lambda x, y: (prepare_images(x), y)).prefetch(tf.data.AUTOTUNE)


class CanvasChunks:
    """The fresh training canvases of one task, chunk by chunk, each generated at most once.

    Chunk k is `cluttered.generate(chunk_size, seed=task_seed, split="train", stream=k,
    **options)`: never a canvas of the task's fixed training, validation or test split, nor of
    another chunk. Datasets reading the same `CanvasChunks` (`fresh_canvas_dataset(chunks=...)`:
    every model of a comparison) generate each chunk once between them. With `keep=True` every
    chunk generated stays in memory, `chunk_size x H x W x 4` bytes of images each (20,000 60x60
    canvases: 288 MB); with `keep=False` only the last one is kept.

    Args:
        chunk_size: int >= 1, canvases per chunk.
        task_seed: int, the task's seed (`generate`'s `seed`).
        keep: bool, keep every chunk (to share them) or only the last.
        **options: the other arguments of `cluttered.generate` (`size`, `clutter`, ...).

    Raises:
        ValueError: `chunk_size` below 1 or an option `generate` refuses (checked here, before
            any training starts); the message names it.
    """

    def __init__(self, chunk_size, task_seed=0, keep=True, **options):
        self.chunk_size = check_int("chunk_size", chunk_size, 1)
        self.task_seed = task_seed
        self.keep = bool(keep)
        self.options = dict(options)
        generate(0, seed=task_seed, split="train", stream=0, **self.options)  # the options, checked now
        self._chunks = {}
        self._lock = threading.Lock()

    def __call__(self, k):
        """Chunk k: `(images float32 [chunk_size, H, W, 1], labels int32 [chunk_size])`, generated once."""
        with self._lock:  # datasets read it from tf.data's producer threads
            if k not in self._chunks:
                data = generate(self.chunk_size, seed=self.task_seed, split="train", stream=k, **self.options)
                if not self.keep:
                    self._chunks.clear()
                self._chunks[k] = (data.images, data.labels.astype(np.int32))
            return self._chunks[k]

    def __len__(self):
        """The number of chunks held in memory."""
        return len(self._chunks)


def fresh_canvas_dataset(batch_size, seed=0, chunk_size=10000, task_seed=0, chunks=None, **options):
    """Training canvases never seen twice: chunk after chunk of newly generated ones, as a tf.data pipeline.

    The canvases are the chunks of a `CanvasChunks` in order, each chunk shuffled with `seed`:
    every model trained on the same task sees the same canvases (in its own seed's order), and
    none of them is a canvas of the task's fixed training, validation or test split. Endless (for
    `model.fit(steps_per_epoch=...)`). A chunk not yet generated is generated when the previous
    one is used up, in tf.data's producer thread, on the cores the training uses: its cost adds
    to the steps' time, once per chunk for all the datasets that share `chunks`.

    Args:
        batch_size: int, canvases per batch.
        seed: int, the shuffle's seed.
        chunk_size: int >= 1, canvases generated at a time (without `chunks`).
        task_seed: int, the task's seed (`generate`'s `seed`; without `chunks`).
        chunks: None (this dataset's own chunks, each dropped when used up) or a `CanvasChunks`
            to read (and fill), shared with other datasets; then `chunk_size`, `task_seed` and
            `options` are its own and must not be given.
        **options: the other arguments of `cluttered.generate` (`size`, `clutter`, ...).

    Returns:
        `tf.data.Dataset` of `(images float32 [B, H, W, 1], labels int32 [B])`.

    Raises:
        ValueError: both `chunks` and `options`, or a bad chunk size or option.
    """
    if chunks is None:
        chunks = CanvasChunks(chunk_size, task_seed, keep=False, **options)
    elif options:
        raise ValueError(f"Pass the task's options to `CanvasChunks`, not with `chunks`. Received: {sorted(options)}")

    def batches_of_chunks():
        rng = np.random.default_rng(seed)
        for k in itertools.count():
            images, labels = chunks(k)
            order = rng.permutation(len(labels))
            yield images[order], labels[order]

    signature = (tf.TensorSpec((None, None, None, 1), tf.float32), tf.TensorSpec((None,), tf.int32))
    dataset = tf.data.Dataset.from_generator(batches_of_chunks, output_signature=signature).unbatch()
    return dataset.batch(batch_size).map(lambda x, y: (prepare_images(x), y)).prefetch(tf.data.AUTOTUNE)


def tfds_image_dataset(
    name,
    split,
    batch_size,
    image_size=None,
    channels=None,
    data_dir=None,
    download=False,
    shuffle=False,
    seed=0,
    repeat=False,
):
    """A TFDS image classification dataset through the same pipeline as the cluttered glyphs.

    Args:
        name: a TFDS name with `(image, label)` supervised keys, e.g. `"mnist"`, `"cifar10"`,
            `"caltech_birds2011"`.
        split: a TFDS split, e.g. `"train"`, `"test"`, `"train[:10%]"`.
        batch_size: int, examples per batch.
        image_size: None (the images' own size; needed when they differ, to batch them) or
            `(height, width)`.
        channels: None, 1 or 3; see `prepare_images`.
        data_dir: the TFDS data folder, or None for TFDS's default.
        download: bool, let TFDS download and prepare the dataset if it is missing.
        shuffle: bool, shuffle the examples (a buffer of 10,000), seeded.
        seed: int, the shuffle's seed.
        repeat: bool, repeat forever.

    Returns:
        `(dataset, num_classes)`: a `tf.data.Dataset` of `(images float32 [B, H, W, C], labels
        int32 [B])` and the number of classes of the dataset's label feature.

    Raises:
        ValueError: the dataset cannot be loaded (not installed, not downloaded); the message
            names it.
    """
    import tensorflow_datasets as tfds

    try:
        dataset, info = tfds.load(
            name, split=split, data_dir=data_dir, as_supervised=True, download=download, with_info=True
        )
    except Exception as error:  # tfds raises several types for a missing or unknown dataset
        raise ValueError(f"Cannot load TFDS dataset {name!r} (split {split!r}): {error}") from error
    num_classes = info.features[info.supervised_keys[1]].num_classes
    if shuffle:
        dataset = dataset.shuffle(10_000, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.map(lambda x, y: (prepare_images(x, channels, image_size), tf.cast(y, tf.int32)))
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE), num_classes
