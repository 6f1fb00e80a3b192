"""Run `keras-transformer train` in a new process and kill it with SIGKILL at a chosen point.

    python tests/kill_points.py POINT N TRAIN_FLAGS...
    python tests/kill_points.py --fork-server

POINT says where the process dies, N which occurrence in this process (from 1):
    step        as the Nth optimizer step begins
    checkpoint  while writing the Nth checkpoint (its state archive written, its manifest not)
    validation  as the Nth validation pass begins
    export      with the SavedModel written into its staging folder, before it is renamed
    never       not at all: the run finishes

A test of `--resume` uses it to stop runs the way a preempted machine does, with no chance to
clean up. The patches below only add the kill; the code under test runs unchanged.

With `--fork-server`, the process imports TensorFlow and the project once, then serves runs: for
each JSON line `{"point", "occurrence", "flags", "stdout", "stderr"}` on stdin it forks a child,
which arms its kill, runs `train` with its output in the files `stdout` and `stderr`, and exits;
the server answers with the JSON line `{"returncode": ...}` (negative: killed by that signal, as
`subprocess` reports it).
Each run is still its own process, which starts with no TensorFlow state (the server runs no
TensorFlow op), so a chain of killed runs pays for TensorFlow's import once instead of per run.
"""

import json
import os
import signal
import sys

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import export, runs  # noqa: F401  (imported once, before the server forks)
from keras_transformer.cli import main
from keras_transformer.data import parallel_text  # noqa: F401

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


def _run_child(order):
    """In the forked child: output to the order's files, arm the kill, train, exit with `train`'s status."""
    status = 1
    try:
        for stream, path in ((sys.stdout, order["stdout"]), (sys.stderr, order["stderr"])):
            stream.flush()
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), stream.fileno())
        arm(order["point"], int(order["occurrence"]))
        status = main(["train", *order["flags"]]) or 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def serve(orders=sys.stdin, answers=sys.stdout):
    """Fork one child per JSON order line and answer each with the child's exit status."""
    for line in orders:
        order = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(order)
        _, wait_status = os.waitpid(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--fork-server"]:
        serve()
        sys.exit(0)
    arm(sys.argv[1], int(sys.argv[2]))
    sys.exit(main(["train", *sys.argv[3:]]))
