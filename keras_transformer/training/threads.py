"""Training on a CPU with one tower per core (TensorFlow only).

On a CPU TensorFlow splits each op of a step across its intra-op threads, one per core, which
meet again at the op's end. At a small model's size most ops are short, and that hand-off costs
as much as the work: on 2 cores of a Zen 5 EPYC an elementwise op over `[1536, 128]` floats took
24 microseconds split over both cores against 9 on one.

`configure_cpu_threads` gives TensorFlow one intra-op thread (each op runs whole, on one core)
and one inter-op thread per core, before its first op. `towers` then tells the packed training
step (`training.packed`) to split each batch, by sentences, into one tower per inter-op thread:
chains of ops that do not depend on each other until the gradients are summed, which the
threads run side by side. The step's loss, gradients and metrics are those of the whole batch
(to float rounding); dropout draws its masks tower by tower.

In four runs of `python -m benchmarks.speed.train_throughput` (small preset, batch 64 x 24, float32)
on 2 cores of a Zen 5 EPYC, our step took 66.0 to 70.1 ms this way, where it had taken 73 to 85 ms
with TensorFlow's default threads (docs/benchmarks/throughput.md). More cores than 2 are not
measured; `configure_cpu_threads` leaves machines of more than `MAX_TOWERS` cores to
TensorFlow's defaults.
"""

import os

import tensorflow as tf

# The most towers `configure_cpu_threads` sets up: each adds a copy of the model's ops to the
# traced step (the first step's tracing grows with them), and beyond 2 cores none is measured.
MAX_TOWERS = 8
THREAD_VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def available_cores():
    """The CPU cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _threads(getter, variable):
    """A TensorFlow thread count: as configured, else its environment variable's, else 0 (the default)."""
    configured = getter()
    if configured:
        return configured
    try:
        return int(os.environ.get(variable, "0"))
    except ValueError:
        return 0


def towers():
    """How many towers the packed training step splits a batch into.

    One per inter-op thread (at most one per core) where TensorFlow runs each op on a single
    intra-op thread on a CPU, as `configure_cpu_threads` sets it (or `TF_NUM_INTRAOP_THREADS=1`);
    1 elsewhere: with TensorFlow's default threads, or with a GPU.

    Returns:
        int >= 1.
    """
    if tf.config.list_logical_devices("GPU"):
        return 1
    if _threads(tf.config.threading.get_intra_op_parallelism_threads, "TF_NUM_INTRAOP_THREADS") != 1:
        return 1
    cores = available_cores()
    inter_op = _threads(tf.config.threading.get_inter_op_parallelism_threads, "TF_NUM_INTEROP_THREADS")
    return max(1, min(inter_op or cores, cores))


def trains_in_towers(train_config):
    """Whether a run of `train_config` trains with the packed step, the one that splits into towers.

    That is `--task translate` without XLA (the packed step needs TensorFlow without XLA).
    """
    return train_config.task == "translate" and not train_config.jit_compile


def settings(train_config=None):
    """TensorFlow's CPU threads as set (0: its default) and the towers they give, for a record.

    Args:
        train_config: the run's `TrainConfig`, or None; a run whose step has no towers
            (`trains_in_towers`) is given 1.

    Returns:
        `{"intra_op": int, "inter_op": int, "towers": int}`.
    """
    return {
        "intra_op": _threads(tf.config.threading.get_intra_op_parallelism_threads, "TF_NUM_INTRAOP_THREADS"),
        "inter_op": _threads(tf.config.threading.get_inter_op_parallelism_threads, "TF_NUM_INTEROP_THREADS"),
        "towers": towers() if train_config is None or trains_in_towers(train_config) else 1,
    }


def configure_cpu_threads():
    """Run each TensorFlow op on one core and one op per core, for one training tower per core.

    It sets TensorFlow's intra-op threads to 1 and its inter-op threads to the number of cores,
    and so makes `towers` one per core. It changes nothing where that is not measured to help
    or not possible:
    - a GPU is visible, or the process has 1 core or more than `MAX_TOWERS`;
    - `TF_NUM_INTRAOP_THREADS` or `TF_NUM_INTEROP_THREADS` is set (the user's choice stands);
    - TensorFlow has already run an op (its threads are fixed from then on).

    Call it first thing in a training process (`python train.py` does): the settings hold for
    everything the process runs, evaluation and export included.

    Returns:
        The towers a training step will use (`towers()`): 1 where nothing changed.
    """
    cores = available_cores()
    if any(variable in os.environ for variable in THREAD_VARIABLES) or not 2 <= cores <= MAX_TOWERS:
        return towers()
    if tf.config.list_physical_devices("GPU"):
        return 1
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow has started: its threads are fixed
        return towers()
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    return towers()
