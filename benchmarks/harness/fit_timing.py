"""Timed rounds of `model.fit`: the data of each round and the clock of its steps.

`benchmarks.speed.train_throughput`'s workers and `benchmarks.speed.step_breakdown` train their
models in rounds of `fit` on the same batches, cycled: `training_data` feeds them (`tf.data`,
cached and prefetched, under TensorFlow; a Python generator under the other backends) and
`RoundClock` times a round's steps from its first batch's start to its last batch's end (the
workers of `benchmarks.language_models.against_keras_hub` time their rounds with it too).
"""

import itertools
import time

import keras
import numpy as np


def training_data(batches):
    """A function giving each round's data: an endless stream of `batches`, from the first, in order.

    Under TensorFlow it gives one cached, prefetching `tf.data` pipeline (each `fit` starts a
    new iterator over it); under other backends a new generator.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        stacked = keras.tree.map_structure(lambda *arrays: np.stack(arrays), *batches)
        dataset = tf.data.Dataset.from_tensor_slices(stacked).cache().repeat().prefetch(tf.data.AUTOTUNE)
        return lambda: dataset
    return lambda: (batch for batch in itertools.cycle(batches))  # Keras takes generators, not iterators


class RoundClock(keras.callbacks.Callback):
    """Wall-clock and CPU seconds of the training steps of one `fit` call.

    The clock runs from its first batch's start to its last batch's end: `ended - started` are the
    wall-clock seconds, `cpu_ended - cpu_started` the process's CPU seconds (`time.process_time`:
    user and system time of all its threads).
    """

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self.started, self.cpu_started = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, batch, logs=None):
        self.ended, self.cpu_ended = time.perf_counter(), time.process_time()
