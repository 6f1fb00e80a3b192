"""Salient-object detection on cluttered glyphs: an encoder-decoder, with CBAM, with residual attention.

    python -m benchmarks.vision.saliency                   # 3 models x 2 seeds, 40x40 canvases
    python -m benchmarks.vision.saliency --size 60         # the papers' setting: smaller glyphs, more clutter
    python -m benchmarks.vision.saliency --steps 4 --eval-every 2 --train-size 64 --validation-size 16 \
        --test-size 16 --classifier-steps 2 --seeds 0 --models none    # a quick check
    python -m benchmarks.vision.saliency --help            # every flag

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
`--adam-learning-rate`, batches of `--batch-size` (shuffled with the seed), `--steps` steps; every
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

Output: one line per run; a table per model (each seed, the mean and the spread); in the `--out`
folder (the study's `results/` by default) the JSON (`vision_saliency.json`: settings, the
command, versions, CPU model and flags, every run and its validation curve), the figure of maps
(`vision_saliency_maps.png`: canvases, ground truth, each model's map and the gradient saliency)
and the figure of scores (`vision_saliency.png`). The files are named `--name`
(`vision_saliency`), followed by `_<size>` for a `--size` other than 40, `_residual_blocks` with
`--block residual` and `_filters_<f1>_<f2>_<f3>` for widths other than 16, 32, 64.

The modules: `__main__` holds the command line and the whole run; `train` trains and scores each
model and the references; `report` summarises the runs and prints the table; `figures` draws the
PNGs.
"""
