"""Attention in vision: a small CNN against the same CNN with each kind of attention, on cluttered glyphs.

    python benchmarks/vision_attention.py                  # 6 models x 2 seeds, 40x40 canvases, 800 steps each
    python benchmarks/vision_attention.py --steps 5 --train-size 256 --test-size 64 --seeds 0 \
        --attentions none,stn    # a quick check
    python benchmarks/vision_attention.py --attentions none,se,cbam --steps 1600 --curve-every 200
                                                           # learning curves on the validation split
    python benchmarks/vision_attention.py --help           # every flag

The task (`keras_transformer.vision.cluttered`): a digit of a 5x7 font drawn at a random position,
height (30-45% of the canvas by default) and rotation (+-30 degrees) on a `--size` canvas with
`--clutter` fragments of other glyphs kept off its box; 10 classes. One task for every run
(`--task-seed`): the same training, and the same test canvases (`--test-size`), for every model
and seed.

The models (`keras_transformer.vision.models.build_classifier`): one small CNN of 3 blocks of
`--filters` channels, each followed by 2x2 max pooling, then global average pooling and a dense
layer. With `--block residual` (the default) each block is `relu(shortcut(x) + branch(x))`, the
branch a 3x3 convolution and the shortcut the identity, or a 1x1 convolution where the width
changes; with `--block plain` each block is the branch alone, a 3x3 convolution and a relu. The
same CNN is run without attention ("none"), with a SqueezeExcitation on each branch ("se"), a
SelectiveKernel (3x3 and 5x5 branches) instead of each branch's convolution ("sk"), a CBAM on
each branch ("cbam"), a ResidualAttention instead of each branch's convolution ("residual"), or
a SpatialTransformer in front that cuts a `--glimpse` x `--glimpse` glimpse out of the canvas
for the CNN ("stn").

Each run: `model.fit` on the training canvases, `--steps` steps of `--batch-size` (shuffled with
the seed, reshuffled every pass), Adam with `--learning-rate`, float32, no augmentation; the
seed also sets the initial weights. Same data, budget and optimizer for every model. The runs go
seed by seed, one at a time in one process (`keras.backend.clear_session()` before each), the
order of the models rotated by one place from one seed to the next.

Measured per run:
- test accuracy (%) on the `--test-size` test canvases;
- trainable parameters; FLOPs of one forward pass of one canvas, as TensorFlow's profiler counts
  them on the frozen graph (a multiply-add is 2; the STN's gathers are not counted);
- milliseconds per training step: the median over every step but the first (which traces), timed
  by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`;
- whether attention finds the object: each model's spatial map over every test canvas
  (`attention_map`: CBAM's last spatial map; the residual model's last mask, averaged over
  channels; the STN's glimpse footprint; for none, se and sk, which have no spatial attention,
  the mean of their last block's activations, as a reference), scored by its share of mass inside
  the glyph's box (`keras_transformer.vision.pointing`) against a uniform map's share (the box's
  area over the canvas's), their ratio ("lift"), and the pointing game (the map's maximum inside
  the box);
- for the STN, how well its transform undoes the placement: the glimpse's centre against the
  glyph's centre (pixels; the identity's centre, the canvas's, as the reference), the glimpse's
  side over the glyph's height, and its rotation against the glyph's (the correlation, and the
  mean error against the identity's, which is the mean |angle|);
- for SE and SK, the last block's channel attention on the test canvases (SE's weight per
  channel, SK's weight per branch and channel): its mean per class (in the JSON), its range, and
  how much a weight varies across the class means against across single canvases;
- with `--curve-every N`, a learning curve: every N steps, the accuracy on `--validation-size`
  validation canvases (the task's validation split, never the test split) and the mean training
  loss over those N steps; for choosing a budget or a learning rate without looking at the test
  canvases.

Output: one line per run as it finishes; a table per model (both seeds and their mean, the ratio
to the baseline for accuracy and ms/step) and the STN's figures on stdout; the JSON
(`vision_attention.json`: settings, the command, versions, CPU model and flags, load average at
the start and the end, every run) in `--out`; two PNGs in `--figures`: `vision_attention.png`
(accuracy and pointing scores per model) and `vision_attention_maps.png` (test canvases with
each model's map, and the STN's glimpses); with `--curve-every`, a table of the curves on stdout
and a third PNG, `*_validation.png`. With `--glyphs fine` the files are named
`vision_attention_fine*`, with `--block plain` `vision_attention*_plain*`, with `--curve-every`
`vision_attention*_curves*`, so that such runs keep the default run's record.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
import keras
import numpy as np

from keras_transformer.vision import models as vision_models
from keras_transformer.vision.cluttered import angle_error, generate_splits, theta_placement
from keras_transformer.vision.pointing import pointing_summary

DEFAULT_SEEDS = "0,1"
DEFAULT_ATTENTIONS = ",".join(vision_models.ATTENTIONS)


# ---------------------------------------------------------------- flags


def parse_list(kind, choices=None, unique=True):
    """An argparse type: comma-separated values of `kind`, in the order given, duplicates dropped if `unique`."""

    def parse(text):
        try:
            values = [kind(part.strip()) for part in text.split(",") if part.strip()]
            values = list(dict.fromkeys(values)) if unique else values
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s; got {text!r}")
        if not values or (choices and any(v not in choices for v in values)):
            raise argparse.ArgumentTypeError(f"expected comma-separated names of {', '.join(choices)}; got {text!r}")
        return values

    return parse


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--attentions",
        type=parse_list(str, vision_models.ATTENTIONS),
        default=DEFAULT_ATTENTIONS,
        help="Comma-separated models: none (the baseline), se, sk, cbam, residual, stn.",
    )
    parser.add_argument(
        "--seeds", type=parse_list(int), default=DEFAULT_SEEDS, help="Comma-separated seeds (weights and batches)."
    )
    parser.add_argument("--task-seed", type=int, default=0, help="Seed of the generated task (the same for all runs).")
    parser.add_argument("--size", type=int, default=40, help="Canvas side in pixels.")
    parser.add_argument("--glyphs", default="digits", choices=["digits", "fine"], help="Glyph set of the task.")
    parser.add_argument("--clutter", type=int, default=6, help="Fragments of other glyphs per canvas.")
    parser.add_argument("--train-size", type=int, default=6000, help="Training canvases.")
    parser.add_argument("--test-size", type=int, default=1000, help="Test canvases.")
    parser.add_argument("--steps", type=int, default=800, help="Training steps of every run.")
    parser.add_argument("--batch-size", type=int, default=64, help="Canvases per step.")
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's learning rate.")
    parser.add_argument(
        "--filters",
        type=parse_list(int, unique=False),
        default="16,32,32",
        help="Comma-separated channels of the CNN's blocks.",
    )
    parser.add_argument(
        "--block",
        default="residual",
        choices=vision_models.BLOCKS,
        help="The CNN's blocks: residual, relu(shortcut(x) + attention(branch(x))), or plain, attention(branch(x)).",
    )
    parser.add_argument("--glimpse", type=int, default=20, help="Side of the STN's glimpse in pixels.")
    parser.add_argument(
        "--curve-every",
        type=int,
        default=0,
        help="Every this many steps, each run's accuracy on the validation canvases and its mean training loss "
        "since the last point (a learning curve); 0: no curves and no validation canvases.",
    )
    parser.add_argument(
        "--validation-size", type=int, default=1000, help="Validation canvases of the curves (--curve-every only)."
    )
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results.")
    parser.add_argument("--figures", default="benchmarks/figures", help="Folder of the PNG figures.")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    common.check_at_least(parser, args, ("steps", "batch_size", "train_size", "test_size", "glimpse"), 1)
    common.check_at_least(parser, args, ("size",), 16)
    common.check_at_least(parser, args, ("clutter", "curve_every"), 0)
    common.check_at_least(parser, args, ("validation_size",), 1)
    if not args.learning_rate > 0:
        parser.error(f"--learning-rate must be > 0. Received: {args.learning_rate}")
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


def result_stem(args):
    """The name of the run's files: `vision_attention`, then `_fine`, `_plain`, `_curves` for the flags that ask."""
    stem = "vision_attention" + ("_fine" if args.glyphs == "fine" else "")
    return stem + ("_plain" if args.block == "plain" else "") + ("_curves" if args.curve_every else "")


def run_orders(attentions, seeds):
    """The order of the runs: seed by seed, the models rotated by one place from each seed to the next."""
    return [
        (seed, attentions[(i + k) % len(attentions)]) for i, seed in enumerate(seeds) for k in range(len(attentions))
    ]


# ---------------------------------------------------------------- one run


class StepTimer(keras.callbacks.Callback):
    """The milliseconds of every training step of a `model.fit` (batch begin to batch end)."""

    def __init__(self):
        super().__init__()
        self.milliseconds = []
        self._start = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.milliseconds.append(1000 * (time.perf_counter() - self._start))


class ValidationCurve(keras.callbacks.Callback):
    """A learning curve: every `every` steps, accuracy on the validation split and the mean training loss.

    For a one-epoch `model.fit`. Each point: the step, the accuracy (%) on `validation`, and the
    mean training loss over the `every` steps since the last point.
    """

    def __init__(self, every, validation):
        super().__init__()
        self.every, self.validation = every, validation
        self.points, self._loss_total = [], 0.0

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.every:
            return
        loss_total = float(logs["loss"]) * (batch + 1)  # Keras reports the mean loss of the epoch so far
        logits = self.model.predict(self.validation.images, batch_size=250, verbose=0)
        self.points.append(
            {
                "step": batch + 1,
                "validation_accuracy_percent": 100.0 * float(np.mean(logits.argmax(-1) == self.validation.labels)),
                "train_loss": (loss_total - self._loss_total) / self.every,
            }
        )
        self._loss_total = loss_total


def forward_flops(model, size, channels=1):
    """FLOPs of one forward pass of one `[size, size, channels]` canvas, by TensorFlow's profiler."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    spec = tf.TensorSpec([1, size, size, channels], tf.float32)
    frozen = convert_variables_to_constants_v2(
        tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    )
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    return int(tf.compat.v1.profiler.profile(graph=frozen.graph, options=options).total_float_ops)


def stn_placement(theta, test):
    """How well the STN's transforms undo the glyphs' placement (see the module docstring)."""
    size = test.images.shape[1]
    centres, sides, angles = theta_placement(theta, size)
    centre_error = np.linalg.norm(centres - test.centres, axis=1)
    identity_error = np.linalg.norm(test.centres - (size - 1) / 2.0, axis=1)
    correlation = float(np.corrcoef(angles, test.angles)[0, 1]) if np.std(angles) > 0 else 0.0
    return {
        "centre_error_px": float(centre_error.mean()),
        "identity_centre_error_px": float(identity_error.mean()),
        "side_over_glyph_height": float(np.median(sides / test.heights)),
        "identity_side_over_glyph_height": float(np.median(size / test.heights)),
        "angle_correlation": correlation,
        "angle_error_degrees": float(np.degrees(angle_error(angles, test.angles)).mean()),
        "identity_angle_error_degrees": float(np.degrees(np.abs(test.angles)).mean()),
    }


def channel_weight_summary(model, test, num_classes):
    """The last SE or SK layer's weights on the test canvases: per class, their range, their spread.

    `class_spread`: the standard deviation of a channel's (and branch's) weight across the class
    means, averaged over channels; `image_spread`: the same across single canvases. A channel
    that classes switch on and off has a class spread close to its image spread.
    """
    per_image, per_class = vision_models.channel_weights_by_class(model, test.images, test.labels, num_classes)
    return {
        "per_class": np.round(per_class, 5).tolist(),
        "min": float(per_image.min()),
        "max": float(per_image.max()),
        "class_spread": float(np.nanstd(per_class, axis=0).mean()),
        "image_spread": float(per_image.std(axis=0).mean()),
    }


def train_one(args, attention, seed, data, num_classes):
    """Build, train and measure one model; returns its results and a few test maps for the figure."""
    from keras_transformer.vision.datasets import image_dataset

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    classifier = vision_models.build_classifier(
        attention,
        block=args.block,
        num_classes=num_classes,
        filters=tuple(args.filters),
        glimpse_size=(args.glimpse, args.glimpse),
    )
    model = classifier.model
    model.compile(
        keras.optimizers.Adam(args.learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.optimizer.build(model.trainable_variables)  # eagerly: a lazy build slows the first step's trace
    train, test = data["train"], data["test"]
    timer = StepTimer()
    callbacks = [timer]  # the timer first: its step ends before a curve point's evaluation
    if args.curve_every:
        callbacks.append(ValidationCurve(args.curve_every, data["validation"]))
    started = time.perf_counter()
    history = model.fit(
        image_dataset(train, args.batch_size, shuffle=True, seed=seed, repeat=True),
        steps_per_epoch=args.steps,
        epochs=1,
        callbacks=callbacks,
        verbose=0,
        shuffle=False,
    )
    train_seconds = time.perf_counter() - started
    outputs = classifier.attention_model.predict(test.images, batch_size=250, verbose=0)
    predictions = outputs["logits"].argmax(-1)
    maps = np.maximum(outputs["attention_map"], 0.0)
    result = {
        "attention": attention,
        "seed": seed,
        "label": vision_models.LABELS[attention],
        "map_kind": vision_models.MAP_KINDS[attention],
        "num_classes": num_classes,
        "test_accuracy_percent": 100.0 * float(np.mean(predictions == test.labels)),
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "first_step_ms": float(timer.milliseconds[0]),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "pointing": pointing_summary(maps, test.boxes),
    }
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    if attention in ("se", "sk"):
        result["channel_weights"] = channel_weight_summary(model, test, num_classes)
    shown = {"maps": maps[:6]}
    if attention == "stn":
        transformer = model.get_layer("spatial_transformer")
        glimpse_model = keras.Model(model.inputs, transformer.output)
        glimpses, theta = glimpse_model.predict(test.images, batch_size=250, verbose=0)
        result["stn"] = stn_placement(theta, test)
        shown.update(glimpses=glimpses[:6, ..., 0], theta=theta[:6])
    return result, shown


# ---------------------------------------------------------------- summary, report, figures


def summarise(runs, attentions):
    """Per model: each seed's figures, their means, and the ratios to the baseline ("none") if it ran."""
    models = {}
    for attention in attentions:
        mine = [run for run in runs if run["attention"] == attention]
        models[attention] = {
            "label": mine[0]["label"],
            "num_classes": mine[0]["num_classes"],
            "map_kind": mine[0]["map_kind"],
            "seeds": [run["seed"] for run in mine],
            "parameters": mine[0]["parameters"],
            "forward_flops": mine[0]["forward_flops"],
            "test_accuracy_percent": [run["test_accuracy_percent"] for run in mine],
            "test_accuracy_percent_mean": float(np.mean([run["test_accuracy_percent"] for run in mine])),
            "ms_per_step_median": float(np.median([run["ms_per_step_median"] for run in mine])),
            "pointing": {key: float(np.mean([run["pointing"][key] for run in mine])) for key in mine[0]["pointing"]},
        }
        if "curve" in mine[0]:
            models[attention]["curve"] = [
                {
                    "step": point["step"],
                    "validation_accuracy_percent": [run["curve"][i]["validation_accuracy_percent"] for run in mine],
                    "validation_accuracy_percent_mean": float(
                        np.mean([run["curve"][i]["validation_accuracy_percent"] for run in mine])
                    ),
                    "train_loss_mean": float(np.mean([run["curve"][i]["train_loss"] for run in mine])),
                }
                for i, point in enumerate(mine[0]["curve"])
            ]
        if "channel_weights" in mine[0]:
            models[attention]["channel_weights"] = {
                key: float(np.mean([run["channel_weights"][key] for run in mine]))
                for key in ("min", "max", "class_spread", "image_spread")
            }
        if attention == "stn":
            models[attention]["stn"] = {
                key: float(np.mean([run["stn"][key] for run in mine])) for key in mine[0]["stn"]
            }
    if "none" in models:
        base = models["none"]
        for summary in models.values():
            for key, value in (
                ("accuracy_over_baseline", "test_accuracy_percent_mean"),
                ("ms_per_step_over_baseline", "ms_per_step_median"),
                ("flops_over_baseline", "forward_flops"),
            ):
                summary[key] = summary[value] / base[value] if base[value] else None  # None: the baseline's is 0
    return models


def show_ratio(value, width=7):
    """A ratio to the baseline as the table prints it, or "n/a" when there is none."""
    return "n/a".rjust(width) if value is None else common.format_ratio(value, width)


def print_report(args, models, cpu):
    """The table per model, and the STN's placement figures."""
    print()
    print(
        f"{args.size}x{args.size} canvases, {args.glyphs}, clutter {args.clutter}; {args.block} blocks; "
        f"{args.steps} steps of "
        f"{args.batch_size}, Adam {args.learning_rate}, float32; {args.test_size} test canvases; "
        f"seeds {','.join(map(str, args.seeds))}; {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    header = (
        f"{'model':<22}{'params':>8}{'MFLOPs':>8}{'acc % per seed':>18}{'mean':>7}{'/base':>7}"
        f"{'ms/step':>9}{'/base':>7}  {'map':<18}{'in box':>7}{'uniform':>8}{'lift':>7}{'hits':>6}"
    )
    print(header)
    print("-" * len(header))
    for summary in models.values():
        pointing = summary["pointing"]
        seeds = " / ".join(f"{a:.1f}" for a in summary["test_accuracy_percent"])
        print(
            f"{summary['label']:<22}{summary['parameters']:>8,}{summary['forward_flops'] / 1e6:>8.2f}{seeds:>18}"
            f"{summary['test_accuracy_percent_mean']:>7.1f}"
            f"{show_ratio(summary.get('accuracy_over_baseline'))}{summary['ms_per_step_median']:>9.1f}"
            f"{show_ratio(summary.get('ms_per_step_over_baseline'))}  "
            f"{summary['map_kind']:<18}{pointing['mass_in_box']:>7.3f}{pointing['uniform_share']:>8.3f}"
            f"{pointing['lift']:>6.2f}x{pointing['pointing_hit_rate']:>6.2f}"
        )
    if "stn" in models:
        stn = models["stn"]["stn"]
        print(
            f"STN placement (mean of seeds): glimpse centre {stn['centre_error_px']:.1f} px from the glyph's centre "
            f"(the identity's: {stn['identity_centre_error_px']:.1f} px); glimpse side "
            f"{stn['side_over_glyph_height']:.2f}x the glyph's height (the identity's: "
            f"{stn['identity_side_over_glyph_height']:.2f}x); rotation: correlation with the glyph's "
            f"{stn['angle_correlation']:.2f}, mean error {stn['angle_error_degrees']:.1f} degrees (the identity's: "
            f"{stn['identity_angle_error_degrees']:.1f})"
        )
    for summary in models.values():
        if "channel_weights" in summary:
            weights = summary["channel_weights"]
            print(
                f"{summary['label']} channel weights of the last block (mean of seeds): from {weights['min']:.3f} to "
                f"{weights['max']:.3f}; spread across the class means {weights['class_spread']:.4f}, across single "
                f"canvases {weights['image_spread']:.4f}"
            )
    if args.curve_every:
        steps = [point["step"] for point in next(iter(models.values()))["curve"]]
        print(f"\nValidation accuracy % ({args.validation_size} canvases; mean of seeds) after each number of steps:")
        print(f"{'model':<22}" + "".join(f"{step:>7}" for step in steps))
        for summary in models.values():
            row = "".join(f"{point['validation_accuracy_percent_mean']:>7.1f}" for point in summary["curve"])
            print(f"{summary['label']:<22}{row}")


def plot_curves(path, args, models):
    """Validation accuracy after each number of steps, per model (the mean of the seeds, each seed a thin line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for i, summary in enumerate(models.values()):
        steps = [point["step"] for point in summary["curve"]]
        per_seed = np.array([point["validation_accuracy_percent"] for point in summary["curve"]])  # (points, seeds)
        axis.plot(steps, per_seed, color=f"C{i}", lw=0.7, alpha=0.5)
        axis.plot(steps, per_seed.mean(1), color=f"C{i}", lw=2, marker="o", ms=3, label=summary["label"])
    axis.axhline(100.0 / next(iter(models.values()))["num_classes"], color="grey", ls=":", lw=1, label="chance")
    axis.set_xlabel("training steps")
    axis.set_ylabel("validation accuracy (%)")
    axis.set_title(
        f"{args.glyphs}, {args.block} blocks, batch {args.batch_size}, Adam {args.learning_rate}; "
        f"seeds {', '.join(map(str, args.seeds))} (thin)",
        fontsize=10,
    )
    axis.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_summary(path, args, models, cpu):
    """Accuracy per model (each seed a dot), and each map's mass in the box against a uniform map's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(models)
    labels = [models[n]["label"] for n in names]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    positions = np.arange(len(names))
    left.bar(positions, [models[n]["test_accuracy_percent_mean"] for n in names], color="#8fb3d9")
    for i, n in enumerate(names):
        left.plot([i] * len(models[n]["test_accuracy_percent"]), models[n]["test_accuracy_percent"], "ko", ms=4)
    left.set_xticks(positions, labels, rotation=25, ha="right")
    left.set_ylabel("test accuracy (%)")
    left.set_title(
        f"{args.block} blocks; {args.steps} steps of {args.batch_size}; seeds {', '.join(map(str, args.seeds))}"
    )
    left.axhline(100.0 / models[names[0]]["num_classes"], color="grey", ls=":", lw=1, label="chance")
    left.legend(fontsize=8)
    mass = [models[n]["pointing"]["mass_in_box"] for n in names]
    uniform = [models[n]["pointing"]["uniform_share"] for n in names]
    colours = ["#e4a35c" if models[n]["map_kind"] == "activation" else "#6aa84f" for n in names]
    right.bar(positions, mass, color=colours)
    right.plot(positions, uniform, "k_", ms=25, mew=2, label="uniform map")
    right.set_xticks(
        positions,
        [f"{lab}\n({models[n]['map_kind']})" for lab, n in zip(labels, names)],
        fontsize=8,
        rotation=25,
        ha="right",
    )
    right.set_ylabel("share of the map's mass inside the glyph's box")
    right.set_title("Does the spatial map fall on the glyph?\n(orange: activations, not attention)", fontsize=10)
    right.legend(fontsize=8)
    figure.suptitle(
        f"Cluttered glyphs ({args.glyphs}), {args.size}x{args.size}; {cpu['model'] or 'unknown CPU'}", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_maps(path, test, shown):
    """Six test canvases with the glyph's box, each model's map over them, and the STN's glimpses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ["canvas", *shown] + (["stn glimpse"] if "stn" in shown else [])
    figure, axes = plt.subplots(len(rows), 6, figsize=(9, 1.55 * len(rows)))
    for column in range(6):
        top, left, bottom, right = test.boxes[column]
        for row, name in enumerate(rows):
            axis = axes[row, column]
            axis.set_xticks([])
            axis.set_yticks([])
            if name == "canvas":
                axis.imshow(test.images[column, ..., 0], cmap="gray")
            elif name == "stn glimpse":
                axis.imshow(shown["stn"]["glimpses"][column], cmap="gray")
            else:
                axis.imshow(test.images[column, ..., 0], cmap="gray")
                axis.imshow(shown[name]["maps"][column], cmap="magma", alpha=0.6)
            if name != "stn glimpse":
                axis.add_patch(
                    plt.Rectangle((left - 0.5, top - 0.5), right - left, bottom - top, fill=False, ec="cyan", lw=1)
                )
            if column == 0:
                axis.set_ylabel(name, fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    sizes = {"train": args.train_size, "test": args.test_size}
    if args.curve_every:
        sizes["validation"] = args.validation_size  # its own random stream: train and test stay the same
    data = generate_splits(
        sizes,
        seed=args.task_seed,
        size=args.size,
        glyphs=args.glyphs,
        clutter=args.clutter,
    )
    num_classes = data["train"].num_classes
    print(
        f"generated {args.train_size} + {args.test_size} canvases in {time.perf_counter() - started:.1f} s", flush=True
    )
    runs, shown = [], {}
    for seed, attention in run_orders(args.attentions, args.seeds):
        result, examples = train_one(args, attention, seed, data, num_classes)
        runs.append(result)
        if seed == args.seeds[0]:
            shown[attention] = examples
        print(
            f"seed {seed} {attention:<9} accuracy {result['test_accuracy_percent']:5.1f}%  "
            f"{result['ms_per_step_median']:6.1f} ms/step  mass in box {result['pointing']['mass_in_box']:.3f} "
            f"(uniform {result['pointing']['uniform_share']:.3f})  {result['train_seconds']:.0f} s",
            flush=True,
        )
    models = summarise(runs, args.attentions)
    print_report(args, models, cpu)
    settings = {key: value for key, value in vars(args).items() if key not in ("argv",)}
    data_json = {
        "settings": {
            **settings,
            "dtype": "float32",
            "order": [list(o) for o in run_orders(args.attentions, args.seeds)],
        },
        "command": common.command_line(args.argv),
        "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        **common.machine(cpu),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": time.perf_counter() - started,
        "peak_rss_mib": common.peak_rss_mib(),
        "models": models,
        "runs": runs,
    }
    stem = result_stem(args)
    print(f"wrote {common.write_json(Path(args.out) / f'{stem}.json', data_json)}")
    figures = Path(args.figures)
    plot_summary(figures / f"{stem}.png", args, models, cpu)
    plot_maps(figures / f"{stem}_maps.png", data["test"], shown)
    print(f"wrote {figures / f'{stem}.png'} and {figures / f'{stem}_maps.png'}")
    if args.curve_every:
        plot_curves(figures / f"{stem}_validation.png", args, models)
        print(f"wrote {figures / f'{stem}_validation.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
