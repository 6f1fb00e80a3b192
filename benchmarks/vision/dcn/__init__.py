"""Dynamic Capacity Networks on cluttered glyphs: the DCN against coarse-only and fine-everywhere.

    python -m benchmarks.vision.dcn                    # the paper's build: 2 seeds, 40x40 canvases, 1500 steps each,
                                                       # a DCN per hint weight (0, 0.1, 1) chosen on validation
    python -m benchmarks.vision.dcn --coarse-downsample pool --coarse-filters 16 --top-pooling average \
        --batch-norm none --k 4 --k-choices 2,3,4,5,6 --hint-weight 1
                                                       # the first runs' build (average pooling, no normalization)
    python -m benchmarks.vision.dcn --size 60          # the papers' style: 60x60, smaller glyphs, more clutter
    python -m benchmarks.vision.dcn --steps 5 --train-size 128 --validation-size 64 --test-size 64 --seeds 0
                                                       # a quick check
    python -m benchmarks.vision.dcn --help             # every flag

Almahairi et al. 2016, "Dynamic Capacity Networks" (https://arxiv.org/abs/1511.07838): a cheap
coarse network reads the whole canvas, an expensive fine network only the k patches where the
gradient of the coarse prediction's entropy is largest, and the same top network classifies
(`keras_transformer.vision.dynamic_capacity`). The question: does the DCN get the accuracy of
the fine network run everywhere at a fraction of its FLOPs, and do its patches fall on the glyph?

The task (`keras_transformer.vision.cluttered`): a digit at a random position, height and
rotation (+-30 degrees) on a `--size` canvas with `--clutter` fragments of other glyphs off its
box; 10 classes. At `--size 40` the glyphs are 30-45% of the canvas and 6 fragments; at 60 or
more (the papers' cluttered MNIST style) 25-35% and 10 fragments, with 12-pixel patches instead
of 8 (`--object-scale`, `--clutter` and `--patch-size` override these). One task for every run
(`--task-seed`): the same training, validation and test canvases for every model and seed.

The three models share the top network and the budget (`train` says what each run trains and
measures). The runs go seed by seed in one process, models in `--models` order, one DCN per
`--hint-weight`.

The defaults build the DCN as its paper does: the coarse network's strided 3x3 convolutions read
the full-resolution canvas (`--coarse-downsample stride`), the top network max-pools over
positions (`--top-pooling max`), so that a few fine vectors are not diluted among the coarse
ones, the DCN reads the same k patches in training and test (`--k 8`, `--k-choices` unset), and
the hint weight is chosen on the validation canvases. Batch normalization (`--batch-norm`) is on
in the coarse network only: with it in the fine network too (the paper's choice), the fine
network run everywhere fell from 96.6% to 79.9% in seed 0 (its accuracy with the batch's
statistics 8 points above that with the moving averages) and a DCN at hint weight 1 stayed at
chance in seed 1 (docs/benchmarks/vision-dcn.md has both runs).

Output: a line per run as it finishes, a table per seed and model (test accuracy, FLOPs per canvas
and their ratio to each bound, the DCN's k and its patches on the glyph against chance); in the
`--out` folder (the study's `results/` by default) the JSON (`vision_dcn.json`, `vision_dcn_60.json`
for `--size 60`: settings, command, versions, CPU model and flags, every run) and a PNG
(`vision_dcn_patches.png`, `vision_dcn_60_patches.png`): test canvases with the DCN's chosen
patches and its saliency maps, first seed. The files are named `--name` (`vision_dcn`), followed
by `_<size>` for a `--size` other than 40.

Modules: `__main__` holds the command line and the run (`main`); `train` builds, trains and
measures one model; `report` prints the lines and the table and summarises the runs per model;
`figures` draws the PNG.
"""
