"""The recurrent attention model against a CNN on cluttered glyphs: accuracy by number of glimpses, pixels read.

Mnih et al. 2014 ("Recurrent Models of Visual Attention", https://arxiv.org/abs/1406.6247)
classify 60x60 cluttered translated MNIST with a model that reads a few small glimpses and
chooses where each goes, and report it ahead of a convolutional network that reads every pixel.
This benchmark trains `keras_transformer.vision.recurrent.RecurrentAttentionModel` with T
glimpses for each T of `--glimpses`, and two CNNs that read every pixel: the plain CNN of the
`attention` study (3 residual blocks, `keras_transformer.vision.models.build_classifier("none")`)
and the paper's own baseline (`--paper-cnn`, `build_strided_cnn`: one 10x10 convolution of
stride 5 with 8 filters, 256 hidden units), on the same canvases, for the same steps and batch,
with each seed of `--seeds`.

The task (`keras_transformer.vision.cluttered.generate`): a `--size` canvas (60, as the paper's),
one glyph of height `--object-scale` x the side at a random place and rotation, and `--clutter`
fragments of `--fragment-size` pixels cut from other glyphs (the paper: 8x8 pieces of other
digits). Training reads new canvases, `--train-size` at a time, none seen twice
(`keras_transformer.vision.datasets.fresh_canvas_dataset`; the same stream for every model, each
chunk generated once and kept in memory for all of them when they fit: `CanvasChunks`), or with
`--fresh-canvases false` the fixed `--train-size` training split, reshuffled every pass.

Measured per model and seed:
- test accuracy (%) on `--test-size` test canvases;
- values read per canvas: each CNN reads all `size^2` pixels; RAM reads `T k g^2` (k patches of
  g x g per glimpse, the coarse ones averaged from larger areas);
- where RAM looks: for each glimpse, the mean distance (pixels) from its centre to the glyph's
  centre, against the canvas centre's distance (where the first glimpse always is), and the share
  of glimpses whose sharp patch (g x g pixels) holds the glyph's centre;
- with `--curve-every N`, the accuracy on `--validation-size` validation canvases every N steps
  (to choose the budget without the test split).

Writes, in the `--out` folder (the study's `results/` by default), `--name`.json (`vision_ram.json`:
flags, machine, results) and `--name`.png, a figure: accuracy against glimpses beside the CNN, and
the glimpse paths of the model with the most glimpses over test canvases.

    python -m benchmarks.vision.ram        # T = 1, 2, 4, 6, 8 and both CNNs, seeds 0 and 1, 6,000 steps
    python -m benchmarks.vision.ram --glimpses 4 --seeds 0 --steps 500 --curve-every 100

The defaults are the convergence run's: fresh canvases, the paper's 4 fragments, Adam 1e-3
falling to 0 by a cosine, location standard deviation 0.1. The first runs (a fixed 20k set, 8
fragments, a constant rate, 2,000 steps, no XLA) are

    python -m benchmarks.vision.ram --glimpses 1,2,4,8 --fresh-canvases false --clutter 8 --decay none \
        --location-std 0.2 --steps 2000 --curve-every 500 --jit-compile false --paper-cnn false

The modules: `__main__` holds the command line and the run (`main`); `train` trains and measures
RAM and the CNN; `report` summarises the runs and prints the table; `figures` draws the PNG.
"""
