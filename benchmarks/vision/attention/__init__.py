"""Attention in vision: a small CNN against the same CNN with each kind of attention, on cluttered glyphs.

    python -m benchmarks.vision.attention                  # 6 models x 2 seeds, 40x40 canvases, 800 steps each
    python -m benchmarks.vision.attention --steps 5 --train-size 256 --test-size 64 --seeds 0 \
        --attentions none,stn    # a quick check
    python -m benchmarks.vision.attention --attentions none,se,cbam --steps 1600 --curve-every 200
                                                           # learning curves on the validation split
    python -m benchmarks.vision.attention --attentions none,vit --name vision_vit
                                                           # a small Vision Transformer beside the CNN
    python -m benchmarks.vision.attention --glyphs fine --clutter 16 --max-rotation 90 --train-size 20000 \
        --filters 8,16,16 --batch-norm true --steps 3000 --warmup-steps 200 --decay cosine \
        --adam-learning-rate 3e-2 --attentions none,se,sk,cbam,residual --seeds 0,1,2 --curve-every 500 \
        --name vision_attention_bn                       # with batch normalization, where the papers put it
    python -m benchmarks.vision.attention --help           # every flag

The task (`keras_transformer.vision.cluttered`, flags from `benchmarks.harness.cluttered`): a
digit of a 5x7 font drawn at a random position, height (30-45% of the canvas by default) and
rotation (+-30 degrees) on a `--size` canvas with `--clutter` fragments of other glyphs kept off
its box; 10 classes. One task for every run (`--task-seed`): the same training, and the same test
canvases (`--test-size`), for every model and seed.

Each run: `model.fit` on the training canvases, `--steps` steps of `--batch-size` (shuffled with
the seed, reshuffled every pass), Adam with `--adam-learning-rate`, float32, no augmentation; the
seed also sets the initial weights. Same data, budget and optimizer for every model. The runs go
seed by seed, one at a time in one process (`keras.backend.clear_session()` before each), the
order of the models rotated by one place from one seed to the next.

Output: one line per run as it finishes; a table per model (both seeds and their mean, the ratio
to the baseline for accuracy and ms/step) and the STN's figures on stdout; in the `--out` folder
(the study's `results/` by default) the JSON (`vision_attention.json`: settings, the command,
versions, CPU model and flags, load average at the start and the end, every run) and two PNGs:
`vision_attention.png` (accuracy and pointing scores per model) and `vision_attention_maps.png`
(test canvases with each model's map, and the STN's glimpses); with `--curve-every`, a table of
the curves on stdout and a third PNG, `*_validation.png`. The files are named `--name`
(`vision_attention`), followed by `_fine` with `--glyphs fine`, `_plain` with `--block plain`,
`_curves` with `--curve-every`, so that such runs keep the default run's record.

The modules: `__main__` holds the command line and the whole run (`main`); `train` builds,
trains and measures one model; `report` summarises the runs per model and prints the tables;
`figures` draws the PNGs.
"""
