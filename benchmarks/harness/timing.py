"""How the studies that train one model per run time its steps and order their runs.

- `StepTimer`: the milliseconds of every training step of a `model.fit`.
- `run_orders`: the order of the runs, seed by seed, the models rotated from one seed to the next
  (no model always runs first, on a machine still warming up, or last).

The vision studies (`vision_training.fit`) and the attention-score study use both.
"""

import time

import keras


def run_orders(models, seeds):
    """The order of the runs: seed by seed, the models rotated by one place from each seed to the next.

    Args:
        models: the models' names, in the order of the first seed.
        seeds: the seeds.

    Returns:
        `[(seed, model), ...]`, e.g. `[(0, "a"), (0, "b"), (1, "b"), (1, "a")]`.
    """
    return [(seed, models[(i + k) % len(models)]) for i, seed in enumerate(seeds) for k in range(len(models))]


class StepTimer(keras.callbacks.Callback):
    """The milliseconds of every training step of a `model.fit` (batch begin to batch end).

    A step is timed from `on_train_batch_begin` to `on_train_batch_end`: fetching the batch,
    forward and backward pass and optimizer update (TensorFlow runs the step synchronously, so it
    has finished when `on_train_batch_end` is called). Validation and the epoch-end callbacks fall
    between steps and are not counted.
    """

    def __init__(self):
        super().__init__()
        self.milliseconds = []
        self._start = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.milliseconds.append(1000 * (time.perf_counter() - self._start))
