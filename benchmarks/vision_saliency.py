"""Salient-object detection on cluttered glyphs: an encoder-decoder, with CBAM, with residual attention.

    python benchmarks/vision_saliency.py                   # 3 models x 2 seeds, 40x40 canvases
    python benchmarks/vision_saliency.py --size 60         # the papers' setting: smaller glyphs, more clutter
    python benchmarks/vision_saliency.py --steps 4 --eval-every 2 --train-size 64 --validation-size 16 \
        --test-size 16 --classifier-steps 2 --seeds 0 --models none    # a quick check
    python benchmarks/vision_saliency.py --help            # every flag

The task (`keras_transformer.vision.cluttered`): a digit of a 5x7 font at a random position,
height and rotation (+-30 degrees) on a `--size` canvas with `--clutter` fragments of other
glyphs kept off its box. The ground truth is the glyph's mask (`ClutteredGlyphs.masks`: its own
ink above 0.1, drawn alone; clutter never sets a mask pixel), so a model must tell the whole
glyph from pieces of glyphs that look like it. At `--size 40` (the vision benchmark's canvas)
the glyph's height is 30-45% of the side and there are 6 fragments of 10 pixels; at
`--size 60` or more, by default, 25-35% and 10 fragments (of 15 pixels), the smaller objects
in more clutter of the cluttered-MNIST papers. One task for every run (`--task-seed`).

The models (`keras_transformer.vision.saliency.build_saliency_model`): the same encoder-decoder
(3 downsampling stages of `--filters` channels, a decoder back up with skip connections, a
sigmoid per pixel) without attention, with a CBAM in each decoder block, or with residual
attention there; the decoder's blocks plain (the default) or residual (`--block residual`, the
attention on the residual branch, as the CBAM and residual-attention papers place it). Each
run: `model.fit` on the training canvases' masks, binary cross-entropy, Adam at
`--learning-rate`, batches of `--batch-size` (shuffled with the seed), `--steps` steps; every
`--eval-every` steps the validation canvases are scored and the weights of the best validation
max F are kept (the steps are chosen on the validation split). The seed sets the initial weights
and the batches. Runs go seed by seed in one process.

References on the same test canvases: the gradient saliency of the plain CNN classifier
(`build_classifier("none")`, trained on the labels for `--classifier-steps` steps with each
seed), |d logit_true / d image| normalized to [0, 1] per image; a uniform map; a centre-prior
Gaussian (its width chosen on the validation split).

Scores (`keras_transformer.vision.saliency_metrics`): MAE; max F-measure with beta^2 = 0.3 (F of
the mean precision and mean recall over the images at each of 256 thresholds, the maximum); the
pointing game, a hit when the map's maximum lies within 15/224 x side pixels of a mask pixel.

Output: one line per run; a table per model (each seed, the mean and the spread); the JSON
(`vision_saliency.json`; `vision_saliency_<size>.json` for other sizes, `*_residual_blocks.json`
with `--block residual`, `*_filters_<f1>_<f2>_<f3>.json` for other widths: settings, the command,
versions, CPU model and flags, every run and its validation curve) in `--out`; the figure of
maps (`vision_saliency_maps.png`: canvases, ground truth, each model's map and the gradient
saliency) and the figure of scores (`vision_saliency.png`) in `--figures`.

The modules: this one holds the command line and the whole run; vision_saliency_train.py trains
and scores each model and the references; vision_saliency_figures.py draws the PNGs.
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
    add_output_flags,
    add_task_flags,
    check_task_flags,
    generate_task,
    parse_list,
    parsed,
    record_header,
)
from vision_saliency_figures import plot_maps, plot_scores
from vision_saliency_train import reference_maps, train_gradient_reference, train_saliency

from keras_transformer.vision.saliency import SALIENCY_ATTENTIONS, SALIENCY_BLOCKS

SCORES = ("mae", "max_f", "pointing_hit_rate")
PAPERS_SIZE = 60  # from this canvas side on, the defaults are the papers' smaller glyphs and more clutter


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--models",
        type=parse_list(str, SALIENCY_ATTENTIONS),
        default=",".join(SALIENCY_ATTENTIONS),
        help="Comma-separated saliency models: none (no attention), cbam, residual.",
    )
    add_task_flags(
        parser,
        size_help=f"Canvas side in pixels ({PAPERS_SIZE}: the papers').",
        clutter=None,
        clutter_help=f"Fragments of other glyphs per canvas; default 6, or 10 from --size {PAPERS_SIZE} on.",
        object_scale=None,
        object_scale_help=f"low,high: the glyph's height as a fraction of the side; default 0.3,0.45, or 0.25,0.35 "
        f"from --size {PAPERS_SIZE} on.",
        train_size=4000,
        validation_size=500,
        validation_help="Validation canvases (choose the steps).",
        steps=1000,
        batch_size=32,
        learning_rate=1e-3,
    )
    parser.add_argument(
        "--eval-every", type=int, default=100, help="Score the validation canvases every this many steps."
    )
    parser.add_argument(
        "--filters",
        type=parse_list(int, unique=False),
        default="16,32,64",
        help="Three comma-separated channel counts, the encoder's stages from the finest.",
    )
    parser.add_argument(
        "--block",
        default="plain",
        choices=SALIENCY_BLOCKS,
        help="The decoder's blocks: plain, attention(conv(f)), or residual, relu(f + attention(conv(f))).",
    )
    parser.add_argument(
        "--classifier-steps",
        type=int,
        default=800,
        help="Training steps (of 64) of the CNN classifier whose gradient saliency is the reference; 0: none.",
    )
    add_output_flags(parser)
    return parser


def parse_args(argv=None):
    """The flags, checked, and the defaults that depend on `--size` resolved (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = parsed(parser, argv)
    common.check_at_least(parser, args, ("size",), 16)  # before the defaults that depend on it
    papers = args.size >= PAPERS_SIZE
    if args.clutter is None:
        args.clutter = 10 if papers else 6
    if args.object_scale is None:
        args.object_scale = [0.25, 0.35] if papers else [0.3, 0.45]
    check_task_flags(parser, args)
    common.check_at_least(parser, args, ("eval_every",), 1)
    common.check_at_least(parser, args, ("classifier_steps",), 0)
    if args.eval_every > args.steps:
        parser.error(f"--eval-every must be <= --steps ({args.steps}). Received: {args.eval_every}")
    if len(args.filters) != 3 or min(args.filters) < 1:
        parser.error(f"--filters must be three positive ints. Received: {args.filters}")
    if keras.backend.backend() != "tensorflow":
        parser.error(f"needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: {keras.backend.backend()}")
    return args


def result_stem(args):
    """The name of the run's files: `vision_saliency`, then `_<size>`, `_residual_blocks`, `_filters_<f1>_<f2>_<f3>`.

    `_<size>` for a side other than 40, `_residual_blocks` with `--block residual`, the filters for
    widths other than the default 16, 32, 64.
    """
    stem = "vision_saliency" if args.size == 40 else f"vision_saliency_{args.size}"
    stem += "_residual_blocks" if args.block == "residual" else ""
    return stem + ("" if args.filters == [16, 32, 64] else "_filters_" + "_".join(map(str, args.filters)))


def summarise(runs):
    """Per model (and reference): each seed's test scores, their mean and their spread (max - min)."""
    models = {}
    for run in runs:
        models.setdefault(run["model"], []).append(run)
    summary = {}
    for name, mine in models.items():
        entry = {"label": mine[0]["label"], "seeds": [run.get("seed") for run in mine]}
        for score in SCORES:
            values = [run["test"][score] for run in mine]
            entry[score] = values
            entry[f"{score}_mean"] = float(np.mean(values))
            entry[f"{score}_spread"] = float(np.max(values) - np.min(values))
        if "chosen_step" in mine[0]:
            entry["chosen_steps"] = [run["chosen_step"] for run in mine]
            entry["parameters"] = mine[0]["parameters"]
            entry["ms_per_step_median"] = float(np.median([run["ms_per_step_median"] for run in mine]))
        if "classifier_test_accuracy_percent" in mine[0]:
            entry["classifier_test_accuracy_percent"] = [run["classifier_test_accuracy_percent"] for run in mine]
        summary[name] = entry
    return summary


def print_report(args, summary, cpu, test, tolerance, chance):
    """The table per model: each seed's scores, their mean and spread; the pointing game's tolerance and chance."""
    print()
    print(common.cpu_line(cpu))
    print(
        f"Salient-object detection, {args.size}x{args.size} canvases, {args.clutter} fragments, glyph height "
        f"{args.object_scale[0]}-{args.object_scale[1]} of the side; {len(test)} test canvases, mask share "
        f"{test.masks.mean():.3f}; pointing tolerance {tolerance:.2f} px (15/224 x {args.size})"
    )
    print(f"{'model':<38} {'MAE':>17} {'max F (b2=0.3)':>17} {'pointing hits':>17}  seeds; steps chosen")
    for entry in summary.values():
        cells = [
            f"{entry[f'{s}_mean']:.4f} +-{entry[f'{s}_spread'] / 2:.4f}" if len(entry[s]) > 1 else f"{entry[s][0]:.4f}"
            for s in SCORES
        ]
        extra = f"  {entry['seeds']}" if entry["seeds"][0] is not None else "  (no seed)"
        if "chosen_steps" in entry:
            extra += f"; {entry['chosen_steps']}"
        if "classifier_test_accuracy_percent" in entry:
            accuracy = ", ".join(f"{a:.1f}" for a in entry["classifier_test_accuracy_percent"])
            extra += f"; classifier accuracy {accuracy}%"
        print(f"{entry['label']:<38} {cells[0]:>17} {cells[1]:>17} {cells[2]:>17}{extra}")
        if len(entry["mae"]) > 1:
            per_seed = "  ".join(f"{s}: " + ", ".join(f"{v:.4f}" for v in entry[s]) for s in SCORES)
            print(f"{'':<38} each seed  {per_seed}")
    print("(+- half the spread between the seeds' values: mean +- (max - min) / 2)")
    print(f"a random pixel's chance of a pointing hit: {chance:.3f}")


def main(argv=None):
    """Run the experiment; returns the exit status."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    data = generate_task(args)
    test = data["test"]
    print(f"generated the canvases in {time.perf_counter() - started:.1f} s", flush=True)
    runs, shown = [], {}
    for seed in args.seeds:
        for name in args.models:
            result, maps = train_saliency(args, name, seed, data)
            runs.append(result)
            shown.setdefault(name, maps[:6])
            print(
                f"seed {seed} {name:<9} MAE {result['test']['mae']:.4f}  max F {result['test']['max_f']:.4f}  "
                f"pointing {result['test']['pointing_hit_rate']:.3f}  step {result['chosen_step']}  "
                f"{result['ms_per_step_median']:.0f} ms/step  {result['train_seconds']:.0f} s",
                flush=True,
            )
        if args.classifier_steps:
            result, maps = train_gradient_reference(args, seed, data)
            runs.append(result)
            shown.setdefault("gradient", maps[:6])
            print(
                f"seed {seed} gradient  MAE {result['test']['mae']:.4f}  max F {result['test']['max_f']:.4f}  "
                f"pointing {result['test']['pointing_hit_rate']:.3f}  classifier accuracy "
                f"{result['classifier_test_accuracy_percent']:.1f}%  {result['train_seconds']:.0f} s",
                flush=True,
            )
    references, reference_images = reference_maps(data)
    runs.extend(references.values())
    summary = summarise(runs)
    tolerance, chance = runs[0]["test"]["pointing_tolerance_px"], runs[0]["test"]["chance_hit_rate"]
    print_report(args, summary, cpu, test, tolerance, chance)
    stem = result_stem(args)
    record = {
        **record_header(args, cpu, load_start, started, loss="binary cross-entropy", optimizer="Adam"),
        "test_mask_share": float(test.masks.mean()),
        "pointing_tolerance_px": tolerance,
        "pointing_chance_hit_rate": chance,
        "summary": summary,
        "runs": runs,
    }
    print(f"wrote {common.write_json(Path(args.out) / f'{stem}.json', record)}")
    figures = Path(args.figures)
    plot_maps(figures / f"{stem}_maps.png", args, test, shown, reference_images)
    plot_scores(figures / f"{stem}.png", args, summary, cpu, chance)
    print(f"wrote {figures / f'{stem}_maps.png'} and {figures / f'{stem}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
