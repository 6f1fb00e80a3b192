"""Run `keras-transformer train` in this process and kill it with SIGKILL at a chosen point.

    python tests/kill_points.py POINT N TRAIN_FLAGS...

POINT says where the process dies, N which occurrence in this process (from 1):
    step        as the Nth optimizer step begins
    checkpoint  while writing the Nth checkpoint (its state archive written, its manifest not)
    validation  as the Nth validation pass begins
    export      with the SavedModel written into its staging folder, before it is renamed
    never       not at all: the run finishes

A test of `--resume` uses it to stop runs the way a preempted machine does, with no chance to
clean up. The patches below only add the kill; the code under test runs unchanged.
"""

import os
import signal
import sys

import keras
import numpy as np
import tensorflow as tf

from keras_transformer.cli import main

POINTS = ("step", "checkpoint", "validation", "export", "never")


def _kill_on(owner, name, occurrence, after):
    """Wrap `owner.name` so that its `occurrence`th call kills the process (before or `after` it runs)."""
    original = getattr(owner, name)
    calls = [0]

    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] == occurrence and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if calls[0] == occurrence and after:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapper)


def arm(point, occurrence):
    """Install the kill at `point` (one of `POINTS`), on its `occurrence`th time."""
    if point == "step":
        _kill_on(keras.callbacks.CallbackList, "on_train_batch_begin", occurrence, after=False)
    elif point == "checkpoint":
        _kill_on(np, "savez", occurrence, after=True)  # what `checkpoints.save_checkpoint` writes with
    elif point == "validation":
        _kill_on(keras.callbacks.CallbackList, "on_test_begin", occurrence, after=False)
    elif point == "export":
        _kill_on(tf.saved_model, "save", occurrence, after=True)
    elif point != "never":
        raise SystemExit(f"unknown kill point {point!r}; expected one of {POINTS}")


if __name__ == "__main__":
    arm(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(["train", *sys.argv[3:]]))
