"""Attention to scale on cluttered glyphs of threefold-varying size: one scale against three fusions of three.

    python -m benchmarks.vision.scale                  # 4 models x 2 seeds, 40x40 canvases, glyphs 6-18 px, 800 steps,
                                                       # a class per position (the paper's training), scales 1, 1.5, 2
    python -m benchmarks.vision.scale --target canvas  # the first runs: one label per canvas, scales 1, 2, 4
    python -m benchmarks.vision.scale --steps 5 --train-size 128 --test-size 64 --seeds 0 --models one,attention
                                                       # a quick check
    python -m benchmarks.vision.scale --target canvas --curve-every 200   # learning curves on the validation split
    python -m benchmarks.vision.scale --help           # every flag

Chen, Yang, Wang, Xu and Yuille 2016, "Attention to Scale: Scale-aware Semantic Image
Segmentation" (https://arxiv.org/abs/1511.03339): one trunk reads the image at several scales and
a softmax over the scales at every position weighs its feature maps
(`keras_transformer.vision.scale.ScaleAttention`); the paper finds the weights favour the coarse
scale on large objects and the fine scale on small ones, and attention beating average- and
max-pooling over the scales.

`--target pixel` (the default) trains as the paper does: the paper segments, so every position of
the trunk's grid gets a class (the glyph's class where a cell holds its ink, from the canvas's
mask, the background elsewhere), each scale's score map is fused by the weights
(`keras_transformer.vision.scale_segmentation.ScaleSegmenter`), the extra supervision adds each
scale's own per-position cross-entropy (`--extra-supervision`, default 1 here), the scales are
closer together (`--factors 1,1.5,2`, the canvas resized bilinearly), and the canvas's class is
read from the fused map (`canvas_scores`: the mean class probability over positions). Also
measured: the share of cells, and of the cells on the glyph, the map gets right.

`--target canvas` (the first runs): the trunk's features are fused and pooled into one label per
canvas, so only the class of the whole canvas supervises the weights; scales 1, 2, 4 by average
pooling. `--extra-supervision w` adds w times the cross-entropy of each scale's own prediction
(the shared pooling and dense layer on that scale's features), summed over the scales.

The models (`ScaleSegmenter` or `keras_transformer.vision.models.build_scale_classifier`), the same
residual trunk of `--filters` channels and the same budget for all: "one", the trunk at one scale
(factors `(1,)`, the control); "average", "max" and "attention", the trunk over the canvas
downsampled by each of `--factors`, fused by the mean, the maximum, or the paper's attention
weights.

The task (`keras_transformer.vision.cluttered`): a digit at a random position and rotation
(+-30 degrees) on a `--size` canvas with `--clutter` fragments of other glyphs, its height drawn
uniformly in `--object-scale` of the canvas (by default 15-45% of 40 pixels: 6 to 18 pixels, a
threefold range); 10 classes. One task for every run (`--task-seed`). The test canvases are cut
into terciles of glyph height (small, medium, large; the edges are the test heights' 1/3 and 2/3
quantiles).

Each run: `model.fit` for `--steps` steps of `--batch-size` (shuffled with the seed), Adam with
`--adam-learning-rate`, float32, no augmentation (`benchmarks.harness.vision_training.fit`); the seed
also sets the initial weights. The runs go seed by seed in one process, the models rotated by
one place from one seed to the next (`timing.run_orders`).

Measured per run: test accuracy, overall and by tercile; parameters; FLOPs of one forward pass of
one canvas (`vision_training.forward_flops`); ms per training step. For the fusions, the
scale weights `[B, h, w, S]` (the attention softmax; for "max" the share of channels each scale
wins; for "average" 1/S), each position's weight spread over the canvas pixels it covers: their
mean over the glyph's box and over the rest of the canvas, by tercile, and the mean log2 factor
they give inside the box (0 = all on the canvas as it is, log2 of the largest factor = all on the
coarsest scale), with its correlation to the glyph's height across test canvases.

Output: a line per run; tables of accuracy and of the scale weights on stdout; in the `--out`
folder (the study's `results/` by default) the JSON (`vision_scale.json`, or `--name`: settings,
command, versions, CPU model and flags, every run) and a PNG (`vision_scale.png`): test canvases
of small, medium and large glyphs, beside each the scale that wins at each position in the
attention model of the first seed, and the weights' mean by tercile inside and outside the box,
as bars.

The modules: `__main__` holds the command line and the run (`main`); `train` builds, trains and
measures one model; `report` prints the lines and tables and summarises the runs per model;
`figures` draws the PNG.
"""
