"""Plumbing shared by the benchmark scripts: the machine, package versions, results, workers.

The benchmarks run as scripts, so their folder is on `sys.path`: import this module with
`import common`. It holds what every benchmark records and does the same way:

- the machine: `machine()` (CPU count, CPU model and flags from /proc/cpuinfo, read by
  `keras_transformer.precision.cpu_info`) for the JSON, `cpu_line()` for the report header;
- `package_versions` of the libraries a benchmark depends on, read from the installed
  distributions (nothing is imported for it);
- `peak_rss_mib`, the process's maximum resident set size;
- `command_line` and `write_json` for the results file;
- `worker_command` and `JsonLinesWorker`, to run a model in a subprocess of the same script;
- `check_at_least`, the flag checks;
- `ours_over_keras_hub`, the comparison of multi30k.py and train_throughput.py, and
  `format_ratio`, the "1.23x" of the reports.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

# The package reads /proc/cpuinfo for `--precision auto`; the benchmarks record the same reading.
from keras_transformer.precision import CPUINFO, cpu_info, parse_cpuinfo  # noqa: F401

# The flags that decide how fast a CPU runs float32 and bfloat16 matmuls, in the order the
# report header lists them (x86 names, as /proc/cpuinfo spells them).
MATMUL_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def machine(cpu=None):
    """What the results JSON records of the machine.

    Args:
        cpu: a `cpu_info()` result; read from the machine when `None`.

    Returns:
        `{"cpu_count": os.cpu_count(), "cpu": {"model": ..., "id": ..., "flags": [...]}}`.
    """
    return {"cpu_count": os.cpu_count(), "cpu": cpu_info() if cpu is None else cpu}


def cpu_line(cpu):
    """One line of a report header: the CPU model and which of `MATMUL_FLAGS` it has.

    Args:
        cpu: a `cpu_info()` result.

    Returns:
        E.g. `"CPU AMD EPYC (family 25 model 1 stepping 1); matmul flags: avx avx2 fma (all 94
        flags in the JSON)"`.
    """
    present = [flag for flag in MATMUL_FLAGS if flag in cpu["flags"]]
    name = cpu["model"] or "unknown"
    if cpu.get("id"):
        name += f" ({cpu['id']})"
    return (
        f"CPU {name}; matmul flags: {' '.join(present) or 'none of ' + ' '.join(MATMUL_FLAGS)} "
        f"(all {len(cpu['flags'])} flags in the JSON)"
    )


def package_versions(packages):
    """Python's version and each installed package's, from its distribution metadata.

    Nothing is imported (a version costs no start-up, and a backend that is installed but
    unused is not initialised). A package without metadata under that name (e.g. a nightly
    build) gets the `__version__` of its module if the benchmark has imported it, and is left
    out otherwise.

    Args:
        packages: `{JSON key: distribution name}`, in the order of the JSON.

    Returns:
        `{"python": "3.x.y", key: version, ...}`.
    """
    versions = {"python": platform.python_version()}
    for key, distribution in packages.items():
        try:
            versions[key] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            module = sys.modules.get(distribution.replace("-", "_"))
            if getattr(module, "__version__", None):
                versions[key] = module.__version__
    return versions


def peak_rss_mib():
    """This process's maximum resident set size so far, in MiB (Linux reports `ru_maxrss` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_device_mib():
    """The accelerator memory this process has used at most so far, in MiB, or None on a CPU.

    JAX: the largest `peak_bytes_in_use` of its GPU devices; PyTorch: `torch.cuda.max_memory_allocated`;
    TensorFlow: the `peak` of `tf.config.experimental.get_memory_info` over its GPUs.
    """
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in jax.local_devices() if d.platform != "cpu"]
    elif backend == "torch":
        import torch

        peaks = [torch.cuda.max_memory_allocated()] if torch.cuda.is_available() else []
    else:
        import tensorflow as tf

        gpus = tf.config.list_logical_devices("GPU")
        peaks = [tf.config.experimental.get_memory_info(gpu.name)["peak"] for gpu in gpus]
    peaks = [peak for peak in peaks if peak is not None]
    return max(peaks) / 2**20 if peaks else None


def command_line(argv):
    """The command that ran the benchmark, as the JSON records it: the script's path, then `argv`."""
    return " ".join([Path(sys.argv[0]).as_posix(), *argv])


def write_json(path, data):
    """Write `data` as indented JSON (and a final newline), creating the folders; returns the `Path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def value_at(result, path):
    """`result[path[0]][path[1]]...`: a value deep in a nested results dict (or list)."""
    for key in path:
        result = result[key]
    return result


def ours_over_keras_hub(results, *path):
    """The ratio ours / keras-hub of the value at `path` in `results["ours"]` and `results["keras-hub"]`."""
    return value_at(results["ours"], path) / value_at(results["keras-hub"], path)


def format_ratio(value, width=0):
    """A ratio as the reports print it: two decimals and an "x", right-aligned in `width` characters."""
    return f"{value:.2f}x".rjust(width)


def check_at_least(parser, args, names, minimum):
    """`parser.error` unless every flag of `names` (attribute names of `args`) is >= `minimum`.

    Args:
        parser: the `argparse.ArgumentParser` that parsed `args`.
        args: the parsed flags.
        names: attribute names, e.g. `("batch_size",)` for `--batch-size`.
        minimum: the smallest value allowed.
    """
    for name in names:
        value = getattr(args, name)
        if value < minimum:
            parser.error(f"--{name.replace('_', '-')} must be >= {minimum}. Received: {value}")


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except `None` (those flags say in words what happens without them)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def worker_command(script, argv, *worker_flags):
    """The command line that runs `script` again as a worker: the same Python, flags, and `worker_flags`.

    Args:
        script: the benchmark's file (its `__file__`).
        argv: the flags the parent was given.
        *worker_flags: what makes it a worker, e.g. `"--worker", "ours"`.

    Returns:
        A list for `subprocess`.
    """
    return [sys.executable, str(Path(script).resolve()), *argv, *worker_flags]


class JsonLinesWorker:
    """A worker subprocess that answers each request line on stdin with one JSON line on stdout.

    Lines of its stdout that do not start with `{` (library chatter) are skipped; its stderr
    goes to the parent's. TensorFlow's C++ logging is quieted (`TF_CPP_MIN_LOG_LEVEL=2`).

    Args:
        command: the worker's command line (`worker_command`).
        name: the worker's name in error messages.
    """

    def __init__(self, command, name):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        self.name = name
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def answer(self):
        """The next JSON line of the worker, as a dict; `RuntimeError` if it exits first."""
        for line in self.process.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"worker {self.name} exited with status {self.process.wait()} before answering")

    def request(self, line):
        """Send `line` and return the worker's answer."""
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.answer()

    def close(self, timeout=60):
        """Close its stdin (the worker's sign to exit) and wait for it."""
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=timeout)
