"""The results of a study: the command that ran it, its JSON file, and the ratios its reports print."""

import json
import os
import time
from pathlib import Path

from benchmarks.harness import machine


def command_line(package, argv):
    """The command that ran a study, as its JSON records it.

    Args:
        package: the study's `__package__`, e.g. `"benchmarks.speed.decode"`.
        argv: the flags it was given.

    Returns:
        E.g. `"python -m benchmarks.speed.decode --preset tiny"`.
    """
    return " ".join(["python", "-m", package, *argv])


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


def record_header(package, args, started, load_start, packages=None, **settings):
    """The head of a study's results JSON: its settings, the command, versions, machine, load and memory.

    Args:
        package: the study's `__package__`.
        args: the parsed flags (with `argv`, the flags as given, recorded as the command).
        started: `time.perf_counter()` at the start: the JSON records the wall seconds since.
        load_start: `os.getloadavg()` at the start: the JSON records it and the load average now.
        packages: `{JSON key: distribution name}` of the versions to record; TensorFlow, Keras and
            NumPy when None.
        **settings: settings of the study's own beside its flags (e.g. `dtype="float32"`).

    Returns:
        `{"settings", "command", "versions", "cpu_count", "cpu", "load_average", "wall_seconds",
        "peak_rss_mib"}`; the study's own entries follow it.
    """
    packages = packages or {"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}
    flags = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    flags.pop("argv", None)
    return {
        "settings": {**flags, **settings},
        "command": command_line(package, args.argv),
        "versions": machine.package_versions(packages),
        **machine.machine(),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": time.perf_counter() - started,
        "peak_rss_mib": machine.peak_rss_mib(),
    }
