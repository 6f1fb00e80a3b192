"""One run of the DCN study: build one model (coarse-only, fine-everywhere or DCN), train it, measure it.

The models are `keras_transformer.vision.dynamic_capacity.DynamicCapacityNetwork` of one size
(the study's flags) in its three modes, with the same top network g:

    coarse   g(f_c(x)): the cheap network alone (the lower bound of cost)
    fine     g(f_f(every patch)): the expensive network everywhere (the upper bound)
    dcn      f_c everywhere, f_f on the k patches where the coarse prediction's entropy gradient
             is largest, g on the mixed map; trained with the paper's three terms

Each run: `model.fit` for `--steps` steps of `--batch-size` training canvases (shuffled with the
seed, reshuffled every pass; `benchmarks.harness.vision_training.fit`), Adam at `--adam-learning-rate`,
float32; the seed also sets the initial weights. The DCN trains with `--k` patches per canvas and
the hint weight it is given (`__main__` trains one per `--hint-weight` and `choose_hint_weight`
keeps the one of the best validation accuracy).

Measured per run:
- validation and test accuracy (%); for the DCN, at the number of patches chosen on the
  validation split: the smallest of `--k-choices` whose validation accuracy is within `--k-tolerance` points of the best
  (the test accuracy at every k is in the JSON too), and, at that k, the accuracy of its own
  coarse prediction and of the same model reading k random patches instead of the salient ones;
- FLOPs of one forward pass of one canvas, counted from the layers' shapes
  (`dynamic_capacity_flops.flop_counts`: a multiply-add is 2 FLOPs, a bias addition 1, a pooling
  window 1 per input) and by TensorFlow's profiler on the frozen graph
  (`vision_training.forward_flops`);
- for the DCN, whether the chosen patches fall on the glyph: the share of chosen patches whose
  block overlaps the glyph's box, against chance (the share of the grid's blocks that overlap
  it, what k patches drawn at random would give), and the share of canvases where at least one
  chosen patch does;
- trainable parameters, the median milliseconds per training step, the training seconds.
"""

import functools

import keras
import numpy as np

from benchmarks.harness import vision_training
from keras_transformer.vision.dynamic_capacity import DynamicCapacityNetwork
from keras_transformer.vision.dynamic_capacity_flops import flop_counts

EVAL_BATCH = 250


def build_model(args, mode, seed, num_classes, hint_weight=0.0):
    """A new session seeded with `seed`, and the model of `mode` in it (the DCN's hint weighted `hint_weight`)."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = DynamicCapacityNetwork(
        num_classes=num_classes,
        patch_size=args.patch_size,
        coarse_factor=args.coarse_factor,
        coarse_filters=tuple(args.coarse_filters),
        fine_filters=tuple(args.fine_filters),
        features=args.features,
        top_units=args.top_units,
        top_pooling=args.top_pooling,
        coarse_downsample=args.coarse_downsample,
        batch_norm=args.batch_norm,
        k=args.k,
        mode=mode,
        hint_weight=hint_weight or 0.0,
        coarse_weight=args.coarse_weight,
        name=f"dcn_{mode}",
    )
    model.build((None, args.size, args.size, 1))
    vision_training.compile_adam(model, vision_training.schedule_of(args))
    return model


def details(model, images, batch_size=EVAL_BATCH, positions=None, **call_args):
    """The model's details dict on `images`, in batches, as NumPy arrays (the scalar hint left out).

    `positions` (int `[N, k]`, optional) are sliced with the images; `call_args` go to every call.
    """
    parts = []
    for start in range(0, len(images), batch_size):
        part = slice(start, start + batch_size)
        if positions is not None:
            call_args["positions"] = positions[part]
        out = model(images[part], return_details=True, **call_args)
        parts.append({key: keras.ops.convert_to_numpy(value) for key, value in out.items() if key != "hint"})
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def accuracy(logits, labels):
    """Accuracy in % of `logits [N, K]` against `labels [N]`."""
    return 100.0 * float(np.mean(np.argmax(logits, -1) == labels))


def block_overlaps(boxes, grid, patch_size):
    """Which grid blocks overlap each glyph's box: bool `[N, h * w]`, row by row.

    Block (i, j) covers rows `[i p, (i + 1) p)` and columns `[j p, (j + 1) p)`; a box is
    `(top, left, bottom, right)` with bottom and right exclusive.
    """
    h, w = grid
    top, left, bottom, right = (boxes[:, i, None, None] for i in range(4))
    rows = np.arange(h)[None, :, None] * patch_size
    columns = np.arange(w)[None, None, :] * patch_size
    overlap = (rows < bottom) & (rows + patch_size > top) & (columns < right) & (columns + patch_size > left)
    return overlap.reshape(len(boxes), h * w)


def on_glyph(positions, boxes, grid, patch_size):
    """Whether the chosen patches fall on the glyph, against chance (see the module docstring).

    Args:
        positions: int `[N, k]`, flat grid indices.
        boxes: float `[N, 4]`, the glyphs' boxes.
        grid: `(h, w)`.
        patch_size: int, p.

    Returns:
        dict: `"share"`, `"chance"`, `"lift"` (share over chance), `"any"` (share of canvases
        with at least one chosen patch on the glyph) and `"any_chance"` (the same for k blocks
        drawn at random without replacement, exactly).
    """
    overlaps = block_overlaps(boxes, grid, patch_size)  # (N, h w)
    hits = np.take_along_axis(overlaps, positions, axis=1)  # (N, k)
    cells, k = overlaps.shape[1], positions.shape[1]
    on = overlaps.sum(1)
    # P(no hit among k drawn without replacement) = C(cells - on, k) / C(cells, k)
    miss = np.ones(len(on))
    for i in range(k):
        miss *= np.clip(cells - on - i, 0, None) / (cells - i)
    share, chance = float(hits.mean()), float(overlaps.mean())
    return {
        "share": share,
        "chance": chance,
        "lift": share / chance if chance else None,
        "any": float(hits.any(1).mean()),
        "any_chance": float(1.0 - miss.mean()),
    }


def random_positions(rng, n, cells, k):
    """The k distinct random grid positions of each of n canvases: int32 `[n, k]`."""
    return np.argsort(rng.random((n, cells)), axis=1)[:, :k].astype(np.int32)


def choose_k(validation_accuracy, tolerance):
    """The smallest k whose validation accuracy is within `tolerance` points of the best one's."""
    best = max(validation_accuracy.values())
    return min(k for k, value in validation_accuracy.items() if value >= best - tolerance)


def choose_hint_weight(trained):
    """The DCN of the best validation accuracy among `[(result, details), ...]` of one seed (the first of equals).

    Marks every result's `"chosen"` (True for that one) and returns its pair.
    """
    best = max(trained, key=lambda pair: pair[0]["validation_accuracy_percent"])
    for result, _ in trained:
        result["chosen"] = result is best[0]
    return best


def evaluate_dcn(args, model, data, seed):
    """The DCN's measurements (see the module docstring) and the test details at the chosen k."""
    validation, test = data["validation"], data["test"]
    grid = model.grid(args.size, args.size)
    by_k_validation, by_k_test, test_details = {}, {}, {}
    for k in args.k_choices:
        by_k_validation[k] = accuracy(details(model, validation.images, k=k)["logits"], validation.labels)
        test_details[k] = details(model, test.images, k=k)
        by_k_test[k] = accuracy(test_details[k]["logits"], test.labels)
    chosen = choose_k(by_k_validation, args.k_tolerance)
    out = test_details[chosen]
    rng = np.random.default_rng(seed)
    random_out = details(
        model, test.images, positions=random_positions(rng, len(test.images), grid[0] * grid[1], chosen)
    )
    measured = {
        "k_train": args.k,
        "k_chosen": chosen,
        "validation_accuracy_by_k": {str(k): v for k, v in by_k_validation.items()},
        "test_accuracy_by_k": {str(k): v for k, v in by_k_test.items()},
        "coarse_head_test_accuracy_percent": accuracy(out["coarse_logits"], test.labels),
        "random_patches_test_accuracy_percent": accuracy(random_out["logits"], test.labels),
        "on_glyph": on_glyph(out["positions"], test.boxes, grid, args.patch_size),
        "on_glyph_by_k": {
            str(k): on_glyph(test_details[k]["positions"], test.boxes, grid, args.patch_size)["share"]
            for k in args.k_choices
        },
    }
    return measured, out


def train_one(args, mode, seed, data, num_classes, hint_weight=None):
    """Build, train and measure one model; returns its results and, for the DCN, test details for the figure.

    `hint_weight`: the DCN's (None for the bounds).
    """
    model = build_model(args, mode, seed, num_classes, hint_weight)
    test, validation = data["test"], data["validation"]
    history, (timer,), train_seconds = vision_training.fit(args, model, seed, data)
    result = {
        "mode": mode,
        "seed": seed,
        "hint_weight": hint_weight,
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
    }
    shown = None
    if mode == "dcn":
        measured, out = evaluate_dcn(args, model, data, seed)
        result.update(measured)
        result["test_accuracy_percent"] = measured["test_accuracy_by_k"][str(measured["k_chosen"])]
        result["validation_accuracy_percent"] = measured["validation_accuracy_by_k"][str(measured["k_chosen"])]
        k = measured["k_chosen"]
        shown = {key: out[key][: args.figure_canvases] for key in ("positions", "saliency", "logits", "coarse_logits")}
    else:
        k = None
        result["test_accuracy_percent"] = accuracy(details(model, test.images)["logits"], test.labels)
        result["validation_accuracy_percent"] = accuracy(details(model, validation.images)["logits"], validation.labels)
    counts = flop_counts(model, args.size, args.size, k=k)
    result["flops"] = counts[mode]
    result["multiply_adds"] = counts["multiply_adds"][mode]
    result["flop_parts"] = counts["parts"]
    result["profiler_flops"] = vision_training.forward_flops(
        functools.partial(model, k=k) if mode == "dcn" else model, args.size
    )
    return result, shown
