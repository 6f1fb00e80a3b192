"""Attention to scale on cluttered glyphs of threefold-varying size: one scale against three fusions of three.

    python benchmarks/vision_scale.py                  # 4 models x 2 seeds, 40x40 canvases, glyphs 6-18 px, 800 steps
    python benchmarks/vision_scale.py --steps 5 --train-size 128 --test-size 64 --seeds 0 --models one,attention
                                                       # a quick check
    python benchmarks/vision_scale.py --curve-every 200   # learning curves on the validation split
    python benchmarks/vision_scale.py --help           # every flag

Chen, Yang, Wang, Xu and Yuille 2016, "Attention to Scale: Scale-aware Semantic Image
Segmentation" (https://arxiv.org/abs/1511.03339): one trunk reads the image at several scales and
a softmax over the scales at every position weighs its feature maps
(`keras_transformer.vision.scale.ScaleAttention`); the paper finds the weights favour the coarse
scale on large objects and the fine scale on small ones, and attention beating average- and
max-pooling over the scales. Deviation: the paper segments (a label per pixel) and fuses score
maps; here the trunk's features are fused and pooled into one label per canvas, so only the class
of the whole canvas supervises the weights. `--extra-supervision w` adds the paper's extra
supervision: w times the cross-entropy of each scale's own prediction (the shared pooling and
dense layer on that scale's features), summed over the scales.

The models (`keras_transformer.vision.models.build_scale_classifier`), the same residual trunk of
`--filters` channels and the same budget for all: "one", the trunk at one scale (factors `(1,)`,
the control); "average", "max" and "attention", the trunk over the canvas average-pooled by each
of `--factors`, fused by the mean, the maximum, or the paper's attention weights.

The task (`keras_transformer.vision.cluttered`): a digit at a random position and rotation
(+-30 degrees) on a `--size` canvas with `--clutter` fragments of other glyphs, its height drawn
uniformly in `--object-scale` of the canvas (by default 15-45% of 40 pixels: 6 to 18 pixels, a
threefold range); 10 classes. One task for every run (`--task-seed`). The test canvases are cut
into terciles of glyph height (small, medium, large; the edges are the test heights' 1/3 and 2/3
quantiles).

Each run: `model.fit` for `--steps` steps of `--batch-size` (shuffled with the seed), Adam with
`--learning-rate`, float32, no augmentation (vision_attention_train.fit); the seed also sets the
initial weights. The runs go seed by seed in one process, the models rotated by one place from
one seed to the next (vision_attention.run_orders).

Measured per run: test accuracy, overall and by tercile; parameters; FLOPs of one forward pass of
one canvas (vision_attention_train.forward_flops); ms per training step. For the fusions, the
scale weights `[B, h, w, S]` (the attention softmax; for "max" the share of channels each scale
wins; for "average" 1/S), each position's weight spread over the canvas pixels it covers: their
mean over the glyph's box and over the rest of the canvas, by tercile, and the mean log2 factor
they give inside the box (0 = all on the canvas as it is, log2 of the largest factor = all on the
coarsest scale), with its correlation to the glyph's height across test canvases.

Output: a line per run; tables of accuracy and of the scale weights on stdout; the JSON
(`vision_scale.json`, or `--name`: settings, command, versions, CPU model and flags, every run) in
`--out`; a PNG in `--figures` (`vision_scale.png`): test canvases of small, medium and large glyphs,
beside each the scale that wins at each position in the attention model of the first seed, and
the weights' mean by tercile inside and outside the box, as bars.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np
from vision_attention import (
    add_name_flag,
    add_output_flags,
    add_task_flags,
    check_name,
    check_task_flags,
    generate_task,
    parse_list,
    parsed,
    record_header,
    run_orders,
)
from vision_attention_train import fit, forward_flops

from keras_transformer.vision.models import build_scale_classifier
from keras_transformer.vision.pointing import box_masks

MODELS = ("one", "average", "max", "attention")
LABELS = {
    "one": "one scale (control)",
    "average": "average over scales",
    "max": "max over scales",
    "attention": "attention to scale",
}
TERCILES = ("small", "medium", "large")
EVAL_BATCH = 250


# ---------------------------------------------------------------- flags


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--models",
        type=parse_list(str, MODELS),
        default=",".join(MODELS),
        help="Comma-separated models: one (the trunk at one scale, the control), average, max, attention "
        "(fusions over --factors).",
    )
    parser.add_argument(
        "--factors",
        type=parse_list(int),
        default="1,2,4",
        help="Comma-separated downsampling factors of the scales of the fusion models, 1 first, at least two.",
    )
    add_task_flags(
        parser,
        object_scale="0.15,0.45",
        validation_help="Validation canvases of the curves (--curve-every only).",
    )
    parser.add_argument(
        "--filters",
        type=parse_list(int, unique=False),
        default="16,32,32",
        help="Comma-separated channels of the trunk's residual blocks (a 2x2 max pool after each but the last).",
    )
    parser.add_argument(
        "--extra-supervision",
        type=float,
        default=0.0,
        help="Weight of the paper's extra supervision for the fusion models: the cross-entropy of each scale's own "
        "prediction (the shared pooling and dense layer on that scale's features), summed over the scales, added to "
        "the fused prediction's; 0: the fused prediction's cross-entropy alone.",
    )
    parser.add_argument(
        "--curve-every",
        type=int,
        default=0,
        help="Every this many steps, each run's accuracy on the validation canvases and its mean training loss "
        "since the last point (a learning curve); 0: no curves and no validation canvases.",
    )
    parser.add_argument(
        "--head-warmup",
        type=int,
        default=0,
        help="Steps at the start of the attention model's training with its fusion layer frozen at its initial, "
        "near-uniform weights (then trained with the rest, for --steps in all); 0: trained from the start.",
    )
    add_name_flag(parser, "vision_scale")
    add_output_flags(parser)
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parsed(parser, argv)
    check_task_flags(parser, args)
    common.check_at_least(parser, args, ("curve_every",), 0)
    if not 0 <= args.head_warmup < args.steps:
        parser.error(f"--head-warmup must be >= 0 and < --steps ({args.steps}). Received: {args.head_warmup}")
    if not args.extra_supervision >= 0:
        parser.error(f"--extra-supervision must be >= 0. Received: {args.extra_supervision}")
    if len(args.factors) < 2 or args.factors[0] != 1 or min(args.factors) < 1:
        parser.error(f"--factors must be two or more positive ints, 1 first. Received: {args.factors}")
    if max(args.factors) > args.size // 4:
        parser.error(f"--factors must be at most --size / 4 ({args.size // 4}). Received: {args.factors}")
    if min(args.filters) < 1:
        parser.error(f"--filters must be positive. Received: {args.filters}")
    check_name(parser, args)
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


# ---------------------------------------------------------------- one run


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


def recompile(trained, args):
    """Compile `trained` with a new Adam of `--learning-rate` (again after a change of what is trainable)."""
    trained.compile(
        keras.optimizers.Adam(args.learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    trained.optimizer.build(trained.trainable_variables)  # eagerly: a lazy build slows the first step's trace


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
        Pearson's r of that mean and the glyph's height over the canvases (None if either is constant).
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
    return by


def train_one(args, model_name, seed, data, num_classes, edges):
    """Build, train and measure one model; returns its results and, for the figure, its test weights."""
    classifier, trained = compiled_scale_classifier(args, model_name, seed, num_classes)
    model = classifier.model
    test = data["test"]
    warmup = args.head_warmup if model_name == "attention" else 0
    if warmup:  # the fusion frozen at its initial, near-uniform weights, then trained with the rest
        fusion = model.get_layer("scale_attention")
        fusion.trainable = False
        recompile(trained, args)
        fit(argparse.Namespace(**{**vars(args), "steps": warmup, "curve_every": 0}), trained, seed, data)
        fusion.trainable = True
        recompile(trained, args)
    steps_args = argparse.Namespace(**{**vars(args), "steps": args.steps - warmup})
    history, callbacks, train_seconds = fit(steps_args, trained, seed, data)
    timer = callbacks[0]
    outputs = classifier.attention_model.predict(test.images, batch_size=EVAL_BATCH, verbose=0)
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
        "forward_flops": forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
    }
    if model_name != "one":
        result["scale_weights"] = scale_weight_summary(outputs["scale_weights"], test, groups, factors)
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    return result, outputs["scale_weights"]


# ---------------------------------------------------------------- report


def run_line(result):
    """The line printed as a run finishes."""
    by = result["tercile_accuracy_percent"]
    line = (
        f"seed {result['seed']} {result['model']:<9} accuracy {result['test_accuracy_percent']:5.1f}%  "
        f"(small/medium/large {'/'.join(f'{by.get(t, np.nan):.1f}' for t in TERCILES)})  "
        f"{result['forward_flops'] / 1e6:6.2f} MFLOPs  {result['ms_per_step_median']:6.1f} ms/step  "
        f"{result['train_seconds']:.0f} s"
    )
    if "scale_weights" in result:
        log2 = result["scale_weights"]["log2_factor_inside"]
        line += f"  log2 factor in box {'/'.join(f'{log2.get(t, np.nan):.2f}' for t in TERCILES)}"
    return line


def summarise(runs, models):
    """Per model: the seeds' accuracies (overall, by tercile), their mean and spread, FLOPs, parameters."""
    summary = {}
    for name in models:
        mine = [run for run in runs if run["model"] == name]
        accuracy = [run["test_accuracy_percent"] for run in mine]
        summary[name] = {
            "label": LABELS[name],
            "seeds": [run["seed"] for run in mine],
            "test_accuracy_percent": accuracy,
            "mean_accuracy_percent": float(np.mean(accuracy)),
            "accuracy_spread_percent": float(np.max(accuracy) - np.min(accuracy)),
            "tercile_accuracy_percent": {
                t: float(np.mean([run["tercile_accuracy_percent"][t] for run in mine]))
                for t in TERCILES
                if all(t in run["tercile_accuracy_percent"] for run in mine)
            },
            "forward_flops": mine[0]["forward_flops"],
            "parameters": mine[0]["parameters"],
            "ms_per_step_median": float(np.mean([run["ms_per_step_median"] for run in mine])),
        }
    return summary


def print_report(args, models, runs, edges, cpu):
    """The tables on stdout."""
    print()
    print(common.cpu_line(cpu))
    low, high = (args.object_scale[0] * args.size, args.object_scale[1] * args.size)
    print(
        f"{args.size}x{args.size} canvases, glyphs {low:.0f}-{high:.0f} px, clutter {args.clutter}; factors "
        f"{','.join(map(str, args.factors))}; {args.steps} steps of {args.batch_size}, Adam {args.learning_rate:g}; "
        f"terciles of glyph height: < {edges[0]:.1f} px, {edges[0]:.1f}-{edges[1]:.1f}, >= {edges[1]:.1f}"
    )
    seeds = ", ".join(map(str, args.seeds))
    print(f"\nTest accuracy % (seeds {seeds}; mean; by tercile the mean of seeds):")
    print(f"{'model':<22}{'seeds':>16}{'mean':>7}{'spread':>8}{'small':>7}{'medium':>8}{'large':>7}{'MFLOPs':>8}")
    for name, model in models.items():
        per_seed = "/".join(f"{a:.1f}" for a in model["test_accuracy_percent"])
        by = model["tercile_accuracy_percent"]
        print(
            f"{model['label']:<22}{per_seed:>16}{model['mean_accuracy_percent']:>7.1f}"
            f"{model['accuracy_spread_percent']:>8.1f}{by.get('small', np.nan):>7.1f}{by.get('medium', np.nan):>8.1f}"
            f"{by.get('large', np.nan):>7.1f}{model['forward_flops'] / 1e6:>8.2f}"
        )
    fused = [run for run in runs if "scale_weights" in run and run["model"] != "average"]
    if not fused:
        return
    names = " ".join(f"x{f}" for f in args.factors)
    print(f"\nScale weights ({names}) inside the glyph's box | outside it, and the mean log2 factor inside:")
    for run in fused:
        weights = run["scale_weights"]
        r = weights["height_correlation"]
        r = "n/a" if r is None else f"{r:.2f}"
        print(f"{run['model']} seed {run['seed']} (r of the log2 factor in the box with the glyph's height: {r})")
        for t in TERCILES:
            if t in weights["inside"]:
                inside = " ".join(f"{w:.3f}" for w in weights["inside"][t])
                outside = " ".join(f"{w:.3f}" for w in weights["outside"][t])
                print(f"  {t:<7} {inside} | {outside}   log2 factor {weights['log2_factor_inside'][t]:.2f}")


# ---------------------------------------------------------------- figure


def plot_scales(path, test, weights, edges, run, factors, title):
    """Test canvases of small, medium and large glyphs, the winning scale per position, and bars by tercile.

    Per tercile the canvas shown is the first whose glyph height is closest to the tercile's median.

    Args:
        path: `Path` of the PNG.
        test: the test `ClutteredGlyphs`.
        weights: float `[N, h, w, S]`, the attention model's scale weights on the test canvases.
        edges: the two tercile edges (pixels).
        run: that model's result (its `"scale_weights"` summary).
        factors: the S factors.
        title: str, the figure's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Rectangle

    size = test.images.shape[1]
    groups = terciles(test.heights, edges)
    shown = []  # per tercile, the first canvas whose glyph height is closest to the tercile's median
    for t in range(len(TERCILES)):
        members = np.flatnonzero(groups == t)
        if len(members):
            heights = test.heights[members]
            shown.append(int(members[np.argmin(np.abs(heights - np.median(heights)))]))
    scales = len(factors)
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 1.0, scales))
    cmap, norm = ListedColormap(colours), BoundaryNorm(np.arange(scales + 1) - 0.5, scales)
    figure = plt.figure(figsize=(10.5, 2.8 * len(shown) + 0.6), layout="constrained")
    left, right = figure.subfigures(1, 2, width_ratios=[1.25, 1.0])
    axes = left.subplots(len(shown), 2, squeeze=False)
    for row, i in enumerate(shown):
        canvas, winners = axes[row]
        canvas.imshow(test.images[i, ..., 0], cmap="gray", vmin=0, vmax=1, extent=(0, size, size, 0))
        top, box_left, bottom, box_right = test.boxes[i]
        canvas.set_title(f"{TERCILES[groups[i]]} glyph, {test.heights[i]:.1f} px", fontsize=8)
        image = winners.imshow(
            weights[i].argmax(-1), cmap=cmap, norm=norm, extent=(0, size, size, 0), interpolation="nearest"
        )
        winners.set_title("winning scale per position", fontsize=8)
        for axis in (canvas, winners):
            axis.add_patch(
                Rectangle((box_left, top), box_right - box_left, bottom - top, fill=False, ec="red", ls="--", lw=1.2)
            )
            axis.set_xlabel("column (pixels)", fontsize=7)
            axis.set_ylabel("row (pixels)", fontsize=7)
            axis.tick_params(labelsize=6)
        bar = left.colorbar(image, ax=winners, ticks=range(scales))
        bar.ax.set_yticklabels([f"x{f}" for f in factors], fontsize=7)
        bar.set_label("downsampling factor", fontsize=7)
    bars = right.subplots(2, 1, sharey=True)
    summary = run["scale_weights"]
    present = [t for t in TERCILES if t in summary["inside"]]
    width = 0.8 / scales
    for axis, key in zip(bars, ("inside", "outside")):
        for s in range(scales):
            values = [summary[key][t][s] for t in present]
            positions = np.arange(len(present)) + (s - (scales - 1) / 2) * width
            axis.bar(positions, values, width, color=colours[s], label=f"x{factors[s]}")
        axis.set_xticks(range(len(present)), [f"{t}\n(glyph height tercile)" for t in present], fontsize=7)
        axis.set_ylabel("mean scale weight", fontsize=8)
        axis.set_title(f"{key} the glyph's box (mean over test canvases)", fontsize=8)
        axis.tick_params(labelsize=7)
        axis.legend(title="factor", fontsize=7, title_fontsize=7)
    figure.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# ---------------------------------------------------------------- the run


def results_json(args, models, runs, edges, cpu, load_start, started):
    """The results JSON (the load average at the end and the wall seconds since `started` are read now)."""
    order = [list(o) for o in run_orders(args.models, args.seeds)]
    return {
        **record_header(args, cpu, load_start, started, order=order),
        "tercile_edges_px": [float(e) for e in edges],
        "terciles": list(TERCILES),
        "models": models,
        "runs": runs,
    }


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    sizes = {"train": args.train_size, "test": args.test_size}
    if args.curve_every:
        sizes["validation"] = args.validation_size  # its own random stream: train and test stay the same
    data = generate_task(args, sizes)
    num_classes = data["train"].num_classes
    edges = np.quantile(data["test"].heights, [1 / 3, 2 / 3])
    print(f"generated {sum(sizes.values())} canvases in {time.perf_counter() - started:.1f} s", flush=True)
    runs, shown = [], None
    for seed, name in run_orders(args.models, args.seeds):
        result, weights = train_one(args, name, seed, data, num_classes, edges)
        runs.append(result)
        if name == "attention" and seed == args.seeds[0]:
            shown = (result, weights)
        print(run_line(result), flush=True)
    models = summarise(runs, args.models)
    print_report(args, models, runs, edges, cpu)
    path = common.write_json(
        Path(args.out) / f"{args.name}.json", results_json(args, models, runs, edges, cpu, load_start, started)
    )
    print(f"wrote {path}")
    if shown is not None:
        figure = Path(args.figures) / f"{args.name}.png"
        title = (
            f"Attention to scale, seed {args.seeds[0]}: {args.size}x{args.size} canvases, factors "
            f"{','.join(map(str, args.factors))}, {args.steps} steps; "
            f"test accuracy {shown[0]['test_accuracy_percent']:.1f}%"
        )
        plot_scales(figure, data["test"], shown[1], edges, shown[0], args.factors, title)
        print(f"wrote {figure}")
    else:
        print("no figure: --models has no attention")
    return 0


if __name__ == "__main__":
    sys.exit(main())
