"""One run of the scale study: build one scale model, train it, and measure it on the test canvases.

With `--target pixel` the models are `keras_transformer.vision.scale_segmentation.ScaleSegmenter`s,
trained on the class of every grid cell (`pixel_labels` of the glyph's mask) and read per canvas
by `canvas_scores`; with `--target canvas`, `keras_transformer.vision.models.build_scale_classifier`,
trained on the canvas's label (with `--extra-supervision`, through `ExtraSupervised`, which adds
each scale's own cross-entropy). Either way: "one", the trunk at one scale; "average", "max" and
"attention", the trunk over the canvas at each of `--factors`, fused by the mean, the maximum or
the paper's attention weights. The study's docstring says what is measured;
`scale_weight_summary` measures where the scale weights go.
"""

import argparse

import keras
import numpy as np

from benchmarks.harness import vision_training
from keras_transformer.vision.models import build_scale_classifier
from keras_transformer.vision.pointing import box_masks
from keras_transformer.vision.scale_segmentation import ScaleSegmenter, canvas_scores, cell_targets, pixel_labels

MODELS = ("one", "average", "max", "attention")
TARGETS = ("pixel", "canvas")
LABELS = {
    "one": "one scale (control)",
    "average": "average over scales",
    "max": "max over scales",
    "attention": "attention to scale",
}
TERCILES = ("small", "medium", "large")
EVAL_BATCH = 250


class ExtraSupervised(keras.Model):
    """A scale classifier trained with the paper's extra supervision (Chen et al. 2016, section 3.3).

    Its outputs: `{"logits": [B, K], "scale_logits": [B, S, K]}`, the fused prediction and each
    scale's own (the classifier's global average pooling and dense layer applied to that scale's
    trunk features, before the fusion). The loss: the fused prediction's cross-entropy plus
    `weight` x the sum over the scales of theirs. (The paper fuses score maps, so each scale's
    output is already a prediction; here the fusion is of features, and the shared head makes
    each scale's prediction.) Shares every weight with the classifier it is built from.

    Args:
        inputs: the classifier's inputs.
        outputs: the dict above.
        weight: float >= 0, the weight of the scales' cross-entropies.
    """

    def __init__(self, inputs, outputs, weight, **kwargs):
        super().__init__(inputs, outputs, **kwargs)
        self.extra_weight = weight

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        labels = keras.ops.cast(keras.ops.convert_to_tensor(y), "int32")
        cross_entropy = keras.losses.sparse_categorical_crossentropy
        loss = keras.ops.mean(cross_entropy(labels, y_pred["logits"], from_logits=True))
        scale_logits = y_pred["scale_logits"]  # (B, S, K)
        scale_labels = keras.ops.broadcast_to(labels[:, None], keras.ops.shape(scale_logits)[:2])  # (B, S)
        per_scale = cross_entropy(scale_labels, scale_logits, from_logits=True)  # (B, S)
        return loss + self.extra_weight * keras.ops.sum(keras.ops.mean(per_scale, axis=0))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)


def extra_supervised(model, weight):
    """The `ExtraSupervised` training model around a fusion classifier's `model` (same layers, same weights)."""
    features = model.get_layer("scale_attention").input  # S maps [B, h_s, w_s, C], the finest first
    pool, dense = model.get_layer("pool"), model.get_layer("logits")
    scale_logits = keras.ops.stack([dense(pool(f)) for f in features], axis=1)  # (B, S, K)
    outputs = {"logits": model.outputs[0], "scale_logits": scale_logits}
    return ExtraSupervised(model.inputs, outputs, weight, name=f"{model.name}_extra_supervised")


def compiled_scale_classifier(args, model_name, seed, num_classes):
    """A new session seeded with `seed`, and the classifier of `model_name` in it, and the model to train, compiled.

    Returns:
        `(classifier, trained)`: `trained` is `classifier.model`, or with `--extra-supervision` > 0
        and a fusion model its `ExtraSupervised` wrapper; compiled with Adam, its optimizer built.
    """
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    factors = (1,) if model_name == "one" else tuple(args.factors)
    fusion = "attention" if model_name == "one" else model_name  # one scale: no fusion at all
    classifier = build_scale_classifier(fusion, factors, num_classes=num_classes, filters=tuple(args.filters))
    trained = classifier.model
    if args.extra_supervision and model_name != "one":  # one scale: its own prediction is the fused one
        trained = extra_supervised(trained, args.extra_supervision)
    recompile(trained, args)
    return classifier, trained


def compiled_scale_segmenter(args, model_name, seed, num_classes):
    """A new session seeded with `seed`, and the `ScaleSegmenter` of `model_name` in it, compiled, built."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    model = ScaleSegmenter(
        num_classes=num_classes,
        factors=(1,) if model_name == "one" else tuple(args.factors),
        filters=tuple(args.filters),
        fusion="attention" if model_name == "one" else model_name,
        head_norm=args.head_norm,
        temperature=args.temperature,
        extra_weight=args.extra_supervision,
        name=f"scale_segmenter_{model_name}",
    )
    model.build((None, args.size, args.size, 1))
    recompile(model, args)
    return model


def segmenter_outputs(model, split):
    """The segmenter on a split, in batches: canvas scores `[N, K]`, scale weights `[N, h, w, S]`, and cell scores.

    Returns:
        dict: `"logits"` (`canvas_scores`, the canvas's class from the fused map), `"scale_weights"`,
        and `"cells_correct"` / `"glyph_cells_correct"`: the share of all cells, and of the cells
        holding glyph pixels, whose class the fused map gets right.
    """
    parts, correct, glyph_correct, glyph_cells = [], 0, 0, 0
    targets_all = pixel_labels(split.masks, split.labels)
    for start in range(0, len(split.images), EVAL_BATCH):
        out = model(split.images[start : start + EVAL_BATCH], return_details=True)
        targets = keras.ops.convert_to_numpy(cell_targets(targets_all[start : start + EVAL_BATCH], model.cell))
        predicted = keras.ops.convert_to_numpy(out["scores"]).argmax(-1)
        correct += int((predicted == targets).sum())
        glyph_correct += int(((predicted == targets) & (targets > 0)).sum())
        glyph_cells += int((targets > 0).sum())
        parts.append(
            {
                "logits": keras.ops.convert_to_numpy(canvas_scores(out["scores"])),
                "scale_weights": keras.ops.convert_to_numpy(out["scale_weights"]),
            }
        )
    cells = len(split.images) * np.prod(parts[0]["scale_weights"].shape[1:3])
    outputs = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    outputs["cells_correct"] = correct / cells
    outputs["glyph_cells_correct"] = glyph_correct / max(glyph_cells, 1)
    return outputs


def fit_segmenter(args, model_name, seed, data, num_classes):
    """Build and train the segmenter of `model_name` on the training canvases' pixel labels.

    Returns:
        `(model, history, callbacks, train_seconds, test outputs of segmenter_outputs)`.
    """
    model = compiled_scale_segmenter(args, model_name, seed, num_classes)
    train = data["train"]
    history, callbacks, train_seconds = vision_training.fit(
        args, model, seed, {"train": (train.images, pixel_labels(train.masks, train.labels))}
    )
    return model, history, callbacks, train_seconds, segmenter_outputs(model, data["test"])


def recompile(trained, args):
    """Compile `trained` with a new Adam of `--adam-learning-rate` (again after a change of what is trainable)."""
    vision_training.compile_adam(trained, vision_training.schedule_of(args))


def terciles(heights, edges):
    """Each glyph's tercile of height, int `[N]` in {0, 1, 2}: below `edges[0]`, between, from `edges[1]`."""
    return np.digitize(heights, edges)


def weights_on_canvas(weights, size):
    """Nearest-neighbour spread of grid weights `[N, h, w, S]` over the canvas: `[N, size, size, S]`.

    Pixel p reads cell `floor((p + 0.5) h / size)`, as `keras_transformer.vision.scale.upsample_to_grid`
    reads a coarser grid.
    """
    h, w = weights.shape[1:3]
    rows = np.floor((np.arange(size) + 0.5) * h / size).astype(int)
    columns = np.floor((np.arange(size) + 0.5) * w / size).astype(int)
    return weights[:, rows][:, :, columns]


def scale_weight_summary(weights, test, groups, factors):
    """The scale weights inside the glyph's box and outside it, by tercile (see the module docstring).

    Args:
        weights: float `[N, h, w, S]`, the model's scale weights on the test canvases.
        test: the test `ClutteredGlyphs`.
        groups: int `[N]`, each canvas's tercile.
        factors: the S factors.

    Returns:
        A dict: `"inside"` and `"outside"`, `{tercile: [S] mean weights}`; `"log2_factor_inside"`,
        `{tercile: mean}` of the weights' mean log2 factor inside the box; `"height_correlation"`,
        Pearson's r of that mean and the glyph's height over the canvases (None if either is constant);
        `"mean"`, `[S]` the mean weight of each scale over every position of every canvas, and
        `"share_above_0_99"`, `[S]` the share of those positions where a scale's weight is above
        0.99 (a collapse onto it).
    """
    size = test.images.shape[1]
    pixels = weights_on_canvas(np.asarray(weights, np.float64), size)  # (N, size, size, S)
    boxes = box_masks(test.boxes, size, size)[..., None]  # (N, size, size, 1)
    inside = (pixels * boxes).sum((1, 2)) / np.maximum(boxes.sum((1, 2)), 1)  # (N, S)
    outside = (pixels * ~boxes).sum((1, 2)) / np.maximum((~boxes).sum((1, 2)), 1)
    log2_inside = inside @ np.log2(np.asarray(factors, np.float64))  # (N,)
    correlation = None
    if np.std(log2_inside) > 0 and np.std(test.heights) > 0:
        correlation = float(np.corrcoef(log2_inside, test.heights)[0, 1])
    by = {}
    for key, values in (("inside", inside), ("outside", outside)):
        by[key] = {name: values[groups == t].mean(0).tolist() for t, name in enumerate(TERCILES) if np.any(groups == t)}
    by["log2_factor_inside"] = {
        name: float(log2_inside[groups == t].mean()) for t, name in enumerate(TERCILES) if np.any(groups == t)
    }
    by["height_correlation"] = correlation
    by["mean"] = np.mean(weights, axis=(0, 1, 2)).tolist()
    by["share_above_0_99"] = np.mean(np.asarray(weights) > 0.99, axis=(0, 1, 2)).tolist()
    return by


def fit_classifier(args, model_name, seed, data, num_classes):
    """Build and train the classifier of `model_name` (`--target canvas`), its fusion frozen for `--head-warmup` steps.

    Returns:
        `(model, history, callbacks, train_seconds, test outputs {"logits", "scale_weights"})`.
    """
    classifier, trained = compiled_scale_classifier(args, model_name, seed, num_classes)
    model = classifier.model
    warmup = args.head_warmup if model_name == "attention" else 0
    if warmup:  # the fusion frozen at its initial, near-uniform weights, then trained with the rest
        fusion = model.get_layer("scale_attention")
        fusion.trainable = False
        recompile(trained, args)
        vision_training.fit(
            argparse.Namespace(**{**vars(args), "steps": warmup, "curve_every": 0}), trained, seed, data
        )
        fusion.trainable = True
        recompile(trained, args)
    steps_args = argparse.Namespace(**{**vars(args), "steps": args.steps - warmup})
    history, callbacks, train_seconds = vision_training.fit(steps_args, trained, seed, data)
    outputs = classifier.attention_model.predict(data["test"].images, batch_size=EVAL_BATCH, verbose=0)
    return model, history, callbacks, train_seconds, outputs


def train_one(args, model_name, seed, data, num_classes, edges):
    """Build, train and measure one model; returns its results and, for the figure, its test weights."""
    fit_model = fit_segmenter if args.target == "pixel" else fit_classifier
    model, history, callbacks, train_seconds, outputs = fit_model(args, model_name, seed, data, num_classes)
    test, timer = data["test"], callbacks[0]
    correct = outputs["logits"].argmax(-1) == test.labels
    groups = terciles(test.heights, edges)
    factors = (1,) if model_name == "one" else tuple(args.factors)
    result = {
        "model": model_name,
        "seed": seed,
        "label": LABELS[model_name],
        "factors": list(factors),
        "test_accuracy_percent": 100.0 * float(correct.mean()),
        "tercile_accuracy_percent": {
            name: 100.0 * float(correct[groups == t].mean()) for t, name in enumerate(TERCILES) if np.any(groups == t)
        },
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": vision_training.forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
    }
    if args.target == "pixel":
        result["cells_correct"] = outputs["cells_correct"]
        result["glyph_cells_correct"] = outputs["glyph_cells_correct"]
    if model_name != "one":
        result["scale_weights"] = scale_weight_summary(outputs["scale_weights"], test, groups, factors)
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    return result, outputs["scale_weights"]
