"""What a result records of the machine it ran on: the CPU, the package versions, memory.

- `machine()` (CPU count, CPU model and flags from /proc/cpuinfo, read by
  `keras_transformer.precision.cpu_info`) for the JSON, `cpu_line()` for the report header;
- `package_versions` of the libraries a study depends on, read from the installed distributions
  (nothing is imported for it);
- `peak_rss_mib`, the process's maximum resident set size; `peak_device_mib`, an accelerator's.
"""

import importlib.metadata
import os
import platform
import resource
import sys

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


def available_memory_bytes():
    """The physical memory free now, in bytes, or None where the system does not say (no `os.sysconf` pages)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


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
