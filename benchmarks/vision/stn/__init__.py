"""The Spatial Transformer paper's ST-CNN on 60x60 cluttered glyphs: does its transform learn where to look?

    python -m benchmarks.vision.stn          # 3 models x 2 seeds, 60x60 canvases, 10,000 steps each
    python -m benchmarks.vision.stn --steps 4 --curve-every 2 --train-size 128 --validation-size 32 \
        --test-size 32 --seeds 0            # a quick check
    python -m benchmarks.vision.stn --help   # every flag

Jaderberg, Simonyan, Zisserman and Kavukcuoglu 2015, "Spatial Transformer Networks"
(https://arxiv.org/abs/1506.02025), section 4.1: on 60x60 cluttered MNIST a spatial transformer
in front of a CNN learns, from the class label alone, to zoom in on the digit and centre it, and
the ST-CNN is more accurate than the CNN. The models (`keras_transformer.vision.st_cnn`), the same
CNN (`--filters` 3x3 convolutions, each with a relu and 2x2 max pooling, then a dense layer of
`--units` and the logits) behind three front ends:

    learned    ST-CNN: a SpatialTransformer with the paper's convolutional localisation net
               (`--localization-rate`), cutting a `--glimpse` x `--glimpse` glimpse
    identity   the same transformer frozen at the identity: the whole canvas resampled to the
               glimpse's size, what the STN starts from
    none       the CNN alone on the full canvas (the paper's CNN baseline)

The task (`keras_transformer.vision.cluttered`, the canvases of the `ram` study): a digit 25-35% of a
60x60 canvas tall (15 to 21 px), at a random position and rotation (+-30 degrees), among 8
fragments of other glyphs, 8x8 px each; 10 classes. One task for every run (`--task-seed`).
At a 12x12 glimpse the identity reads the canvas at a fifth of its resolution, where the glyph is 3
to 4 px tall: to read it, the transform has to zoom in, and to zoom in on it, to move to it.

Each run: `model.fit` for `--steps` steps of `--batch-size` (shuffled with the seed), Adam with
`--adam-learning-rate`, float32, no augmentation (`benchmarks.harness.vision_training.fit`); the seed
also sets the initial weights. Runs go seed by seed in one process, the models rotated by one
place from one seed to the next (`timing.run_orders`). The budget was chosen on the validation split's
curves (every `--curve-every` steps), never on the test split.

Measured per run: test accuracy; trainable parameters; FLOPs of one forward pass
(`vision_training.forward_flops`; the sampler's gathers are not counted); ms per training step;
for the transformers, where the glimpse lands on the test canvases
(`vision_training.stn_placement`): its centre's distance to the glyph's centre against the
identity's (the canvas centre), its side over the glyph's height, and its rotation's correlation
with the glyph's; at every curve point, the validation accuracy, the glimpse's centre error, and
the glimpses of six validation canvases (for the figure).

Output: a line per run; tables on stdout; in the `--out` folder (the study's `results/` by
default) the JSON (`vision_stn.json`, or `--name`: settings, command, versions, CPU model and
flags, every run) and two PNGs: `vision_stn.png` (six validation canvases with the ST-CNN's final
glimpse outlined, and its glimpses of them as training goes, first seed) and
`vision_stn_curves.png` (validation accuracy and the glimpse's centre error against the step,
every run).

The modules: `__main__` holds the command line and the run (`main`); `train` builds, trains and
measures one model; `report` prints the lines and tables and summarises the runs per model;
`figures` draws the PNGs.
"""
