"""A model in a subprocess: the study run again as a worker that answers JSON lines."""

import json
import os
import subprocess
import sys


def worker_command(package, argv, *worker_flags):
    """The command line that runs a study again as a worker: the same Python, flags, and `worker_flags`.

    The worker starts in the parent's working directory, from which the parent's
    `python -m benchmarks...` found the study, so `-m` finds it too.

    Args:
        package: the study's `__package__`, e.g. `"benchmarks.speed.train_throughput"`.
        argv: the flags the parent was given.
        *worker_flags: what makes it a worker, e.g. `"--worker", "ours"`.

    Returns:
        A list for `subprocess`.
    """
    return [sys.executable, "-m", package, *argv, *worker_flags]


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
