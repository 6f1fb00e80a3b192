"""The results of a study: when it started, the command that ran it, its JSON file, and the ratios its reports print.

`start()` at the beginning of a study's `main` reads the CPU, the load average and the clock once;
`record_header` puts them (with the load average and the wall seconds at its end) at the head of
the study's JSON.
"""

import dataclasses
import json
import os
import time
from pathlib import Path

from benchmarks.harness import machine


@dataclasses.dataclass(frozen=True)
class Start:
    """What a study reads of the machine when it starts.

    Attributes:
        cpu: `machine.cpu_info()`: the CPU's model and flags.
        load: `os.getloadavg()`: the load averages over 1, 5 and 15 minutes.
        time: `time.perf_counter()`: the clock, in seconds.
    """

    cpu: dict
    load: tuple
    time: float

    def seconds(self):
        """The wall seconds since the start."""
        return time.perf_counter() - self.time


def start():
    """The `Start` of a study, now: the CPU, the load average, then the clock."""
    cpu = machine.cpu_info()
    load = os.getloadavg()
    return Start(cpu=cpu, load=load, time=time.perf_counter())


def load_average(start):
    """`{"start": [...], "end": [...]}`: the load averages at `start` (a `Start`) and now."""
    return {"start": list(start.load), "end": list(os.getloadavg())}


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


def record_header(package, args, start, packages=None, **settings):
    """The head of a study's results JSON: its settings, the command, versions, machine, load and memory.

    Args:
        package: the study's `__package__`.
        args: the parsed flags (with `argv`, the flags as given, recorded as the command).
        start: the study's `start()`: the JSON records its CPU, its load average and the load
            average now, and the wall seconds since.
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
        **machine.machine(start.cpu),
        "load_average": load_average(start),
        "wall_seconds": start.seconds(),
        "peak_rss_mib": machine.peak_rss_mib(),
    }
