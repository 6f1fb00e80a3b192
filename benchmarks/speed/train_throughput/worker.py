"""A worker process of the study: one model, trained one round per order.

The parent runs the study again with `--worker NAME --worker-precision POLICY --worker-length L`
(`python -m benchmarks.speed.train_throughput ...`), one process per model of `--models`, per
precision and per length. The worker builds and compiles its model under that dtype policy
(`compile_transformer`: the same loss, metrics, Adam and Noam schedule for every model), makes the
batches, answers one ready line with its parameter count and the towers of its step (ours trains as
`train.py` sets TensorFlow's threads: `threads_as_run`), then trains one round, `model.fit` for
`--steps` steps, per `round` line on stdin and answers each with one JSON line: the round's
wall-clock seconds, target tokens, loss and peak memory (resident set, and on a GPU the device's).
Any other line, or the end of stdin, ends it.

Under TensorFlow the batches go through `tf.data` (cached, prefetched); under other backends
through a Python generator (`benchmarks.harness.fit_timing.training_data`).
"""

import json
import sys

import keras

from benchmarks.harness import machine
from benchmarks.harness.fit_timing import RoundClock, training_data
from benchmarks.harness.training_workload import (
    at_length,
    build_model,
    model_config,
    round_target_tokens,
    synthetic_batches,
)
from keras_transformer.config import TrainConfig
from keras_transformer.training import compile_transformer, dtype_policy


def threads_as_run(name):
    """TensorFlow's threads as worker `name`'s model is trained; returns the towers of its step.

    Ours as `train.py` trains it: one tower per core where that applies
    (`training.threads.configure_cpu_threads`, before the worker's first TensorFlow op). The others
    with TensorFlow's default threads, as their own users train them: 1.
    """
    if name != "ours" or keras.backend.backend() != "tensorflow":
        return 1
    from keras_transformer.training.threads import configure_cpu_threads

    return configure_cpu_threads()


def run_worker(args):
    """Build, compile, then train one round per `round` line on stdin, answering with a JSON line."""
    name, precision = args.worker, args.worker_precision
    towers = threads_as_run(name)
    args = at_length(args, args.worker_length)
    keras.utils.set_random_seed(args.seed)
    config = model_config(args)
    train_config = TrainConfig(warmup_steps=400, jit_compile=args.jit_compile)
    with dtype_policy(precision):
        model = compile_transformer(build_model(name, config), config, train_config)
    batches = synthetic_batches(args)
    round_data = training_data(batches)
    tokens = round_target_tokens(args, batches)
    clock = RoundClock()
    print(json.dumps({"ready": True, "parameters": int(model.count_params()), "towers": towers}), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        history = model.fit(
            round_data(), epochs=1, steps_per_epoch=args.steps, callbacks=[clock], shuffle=False, verbose=0
        )
        assert int(history.history["target_tokens"][-1]) == tokens, "the round did not train on its batches"
        report = {
            "seconds": clock.ended - clock.started,
            "target_tokens": tokens,
            "loss": float(history.history["loss"][-1]),
            "peak_rss_mib": machine.peak_rss_mib(),
            "peak_device_mib": machine.peak_device_mib(),
        }
        print(json.dumps(report), flush=True)
    return 0
