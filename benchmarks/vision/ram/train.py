"""The runs of the recurrent attention study: one RAM of T glimpses, and each CNN baseline, trained and measured."""

import keras
import numpy as np

from benchmarks.harness import machine, vision_training
from keras_transformer.vision.recurrent import RecurrentAttentionModel, build_strided_cnn


def task_options(args):
    """The arguments of `cluttered.generate` the task flags give (all but the number of canvases, seed and split)."""
    return {
        "size": args.size,
        "object_scale": tuple(args.object_scale),
        "clutter": args.clutter,
        "fragment_size": args.fragment_size,
        "max_rotation": args.max_rotation,
    }


def canvas_chunks(args):
    """With `--fresh-canvases`, the task's fresh training canvases (task seed 0, as the splits); None without.

    Every model and seed of the run reads the same chunks (`CanvasChunks`). When all the canvases
    of a model's training (`--steps` x `--batch-size` of `--size`^2 float32 pixels) fit in half the
    free memory, each chunk is generated once and kept for the next models; otherwise only the
    last is kept, and each model generates the chunks again (the same canvases, at the
    generation's cost), as the printed note says.
    """
    if not args.fresh_canvases:
        return None
    from keras_transformer.vision.datasets import CanvasChunks

    needed = args.steps * args.batch_size * args.size**2 * 4
    free = machine.available_memory_bytes()
    keep = free is None or needed <= free // 2
    if not keep:
        print(
            f"fresh canvases: the {needed / 2**30:.1f} GiB of a model's training are more than half the free "
            f"memory ({free / 2**30:.1f} GiB): each model generates them again",
            flush=True,
        )
    return CanvasChunks(args.train_size, task_seed=0, keep=keep, **task_options(args))


def training_batches(args, seed, chunks):
    """The batches of `chunks` (a `canvas_chunks`) in the order of `seed`, endless; None (the fixed split) without."""
    if chunks is None:
        return None
    from keras_transformer.vision.datasets import fresh_canvas_dataset

    return fresh_canvas_dataset(args.batch_size, seed, chunks=chunks)


def compiled_ram(args, glimpses, seed, num_classes):
    """A new session seeded with `seed`, and a `RecurrentAttentionModel` of `glimpses` glimpses in it, compiled."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = RecurrentAttentionModel(
        num_classes=num_classes,
        glimpses=glimpses,
        patch_size=args.patch_size,
        scales=args.scales,
        core=args.core,
        location_std=args.location_std,
        reward=args.reward,
        policy_trains_core=not args.policy_stop_gradient,
        reinforce=args.reinforce,
        seed=seed,
    )
    # `--jit-compile`: XLA compiles the unrolled glimpse loop, and the whole step, into one program.
    schedule = vision_training.schedule_of(args)
    model.compile(keras.optimizers.Adam(schedule), metrics=["accuracy"], jit_compile=args.jit_compile)
    return model


def where_it_looks(locations, test, patch_size):
    """Distances (pixels) of each glimpse's centre to the glyph's centre, and the share whose sharp patch holds it.

    Args:
        locations: `[N, T, 2]`, normalized `(row, column)` of each glimpse.
        test: the test `ClutteredGlyphs`.
        patch_size: int g, the side of the sharp patch in pixels.

    Returns:
        dict of per-glimpse lists and the canvas centre's distance (the first glimpse's).
    """
    half = (test.images.shape[1] - 1) / 2.0
    pixels = (np.asarray(locations, np.float64) + 1.0) * half  # (N, T, 2)
    offsets = pixels - test.centres[:, None, :]
    inside = np.all(np.abs(offsets) <= patch_size / 2.0, axis=-1)  # the glyph centre in the sharp patch
    return {
        "distance_px": np.linalg.norm(offsets, axis=-1).mean(0).tolist(),
        "sharp_patch_holds_centre": inside.mean(0).tolist(),
        "canvas_centre_distance_px": float(np.linalg.norm(half - test.centres, axis=-1).mean()),
    }


def fit_and_record(args, model, seed, data, chunks):
    """Train `model` (on `chunks` when given, see `training_batches`; else the fixed training split) and record it.

    Returns:
        dict: its trainable parameters, the median ms per step (the first step, which traces, left
        out), the training's wall seconds, the last training loss, and with `--curve-every` the curve.
    """
    history, callbacks, seconds = vision_training.fit(
        args, model, seed, data, train=training_batches(args, seed, chunks)
    )
    record = {
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "ms_per_step_median": float(np.median(callbacks[0].milliseconds[1:] or callbacks[0].milliseconds)),
        "train_seconds": seconds,
        "final_train_loss": float(history.history["loss"][-1]),
    }
    if args.curve_every:
        record["curve"] = callbacks[-1].points
    return record


def train_ram(args, glimpses, seed, data, num_classes, chunks=None):
    """Train and measure one RAM (on `chunks` when given); its results and the first test canvases' glimpses."""
    model = compiled_ram(args, glimpses, seed, num_classes)
    record = fit_and_record(args, model, seed, data, chunks)
    outputs = model.predict(data["test"].images, batch_size=250, verbose=0)
    result = {
        "model": "ram",
        "glimpses": glimpses,
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(outputs["logits"].argmax(-1) == data["test"].labels)),
        "values_read": model.values_read,
        **record,
        "where": where_it_looks(outputs["locations"], data["test"], args.patch_size),
    }
    return result, outputs["locations"][:8]


def train_cnn(args, seed, data, num_classes, chunks=None, kind="cnn"):
    """Train and measure a CNN baseline on the same canvases and budget (on `chunks` when given).

    `kind`: `"cnn"`, the plain CNN of the attention study (3 residual blocks, `--filters`), or
    `"paper_cnn"`, the paper's own baseline (`build_strided_cnn`: one 10x10 convolution of stride 5,
    256 hidden units).
    """
    if kind == "paper_cnn":
        keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        model = build_strided_cnn((args.size, args.size), num_classes=num_classes)
        vision_training.compile_adam(model, vision_training.schedule_of(args))
    else:
        # what compiled_classifier reads: the attention study's default CNN (no STN, no batch normalization here)
        args.block, args.glimpse, args.batch_norm = "residual", 24, False
        model = vision_training.compiled_classifier(args, "none", seed, num_classes).model
    record = fit_and_record(args, model, seed, data, chunks)
    logits = model.predict(data["test"].images, batch_size=250, verbose=0)
    return {
        "model": kind,
        "seed": seed,
        "test_accuracy_percent": 100.0 * float(np.mean(logits.argmax(-1) == data["test"].labels)),
        "values_read": args.size**2,
        **record,
    }
