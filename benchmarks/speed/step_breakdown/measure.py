"""Our model's step at one length: built, timed over rounds of `fit`, traced, and broken down."""

import time
from pathlib import Path

import keras

from benchmarks.harness.fit_timing import RoundClock, training_data
from benchmarks.harness.training_workload import (
    at_length,
    build_model,
    model_config,
    round_target_tokens,
    step_flops,
    synthetic_batches,
    target_tokens_per_step,
)
from benchmarks.speed.step_breakdown.breakdown import breakdown
from benchmarks.speed.step_breakdown.hlo import compiled_modules
from benchmarks.speed.step_breakdown.traces import profiler_trace, traced_op_times, traced_tf_op_times
from keras_transformer.config import TrainConfig
from keras_transformer.training import compile_transformer, dtype_policy


def run_length(args, length, peak, folder):
    """Build, time and trace our model at one length: its results (`breakdown` and the timings)."""
    args = at_length(args, length)
    keras.utils.set_random_seed(args.seed)
    config = model_config(args)
    with dtype_policy(args.precision):
        train_config = TrainConfig(warmup_steps=400, jit_compile=keras.backend.backend() == "jax")
        model = compile_transformer(build_model("ours", config), config, train_config)
    batches = synthetic_batches(args)
    data, clock = training_data(batches), RoundClock()

    def train(steps):
        model.fit(data(), epochs=1, steps_per_epoch=steps, callbacks=[clock], shuffle=False, verbose=0)
        return clock.ended - clock.started

    start = time.perf_counter()
    train(args.steps)  # the XLA compile
    compile_seconds = time.perf_counter() - start
    step_seconds = float(sorted(train(args.steps) / args.steps for _ in range(args.rounds))[args.rounds // 2])
    trace_dir = Path(folder) / f"trace_length_{length}"
    with profiler_trace(trace_dir):
        train(args.trace_steps)
    flops = step_flops(args, config, target_tokens_per_step(args))
    own_peak = peak["bfloat16" if "bfloat16" in args.precision else "float32"]
    result = {
        "length": length,
        "batch_size": args.batch_size,
        "first_round_seconds": compile_seconds,
        "step_ms": 1000 * step_seconds,
        "target_tokens_per_second": round_target_tokens(args, batches) / args.steps / step_seconds,
        "model_flops_per_step": flops,
        "mfu_own_peak": flops / step_seconds / own_peak,
        "trace": str(trace_dir) if args.trace else None,  # a temporary folder's is gone after the run
    }
    if keras.backend.backend() == "jax":
        op_times, modules = traced_op_times(trace_dir), compiled_modules(Path(folder) / "hlo")
    else:
        op_times, modules = traced_tf_op_times(trace_dir)
    result.update(breakdown(op_times, modules, args.trace_steps, args.top))
    return result


def device_kind():
    """The device the step runs on: JAX's first device's kind, or "cpu" under TensorFlow here (no GPU path)."""
    if keras.backend.backend() == "jax":
        import jax

        return str(jax.devices()[0].device_kind)
    return "cpu"
