"""TensorFlow's start-up, quiet: its C++ notices kept off the terminal unless asked for.

TensorFlow 2.21 prints notices as it loads and finds its devices, before a command prints its
first line: the oneDNN notice, "Could not find cuda drivers", the "All log messages before
absl::InitializeLog() ..." warning (twice each, once per library loaded), and on a machine without
CUDA drivers a `failed call to cuInit` error. The first ones come from absl's C++ logging before
TensorFlow reads TF_CPP_MIN_LOG_LEVEL, so no value of that variable hides them (3 not either).

`start_tensorflow` imports TensorFlow and lists its devices with the standard error (file
descriptor 2) written to a temporary file, then writes back every line but those notices: a
line of absl's log format whose severity is below TF_CPP_MIN_LOG_LEVEL (I = 0, W = 1, E = 2,
F = 3; set to 2 unless the user set it). absl's warning about where its messages go counts as an
I line, and so does the cuInit error where TensorFlow said just before that it found no CUDA
drivers (expected then; without that notice it is an E line, a real error). Errors, Python
warnings and tracebacks of the import are written back in order. A process that dies in the
import (a crash, not an exception) loses what it wrote there: KERAS_TRANSFORMER_VERBOSE=1 shows it.

KERAS_TRANSFORMER_VERBOSE=1 (`VERBOSE_VARIABLE`) leaves TensorFlow as it is: nothing captured,
TF_CPP_MIN_LOG_LEVEL not set.
"""

import contextlib
import os
import re
import sys
import tempfile

VERBOSE_VARIABLE = "KERAS_TRANSFORMER_VERBOSE"
LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LOG_LEVEL = "2"  # TensorFlow's warnings and infos hidden, its errors shown
# absl's log line: "I0000 00:00:1796524329.957738    4311 port.cc:153] message" (severity, date,
# time, thread, file:line; before absl is set up, the seconds count from 1970), and TensorFlow's
# older "2024-01-11 05:40:05.061907: I path.cc:182] message".
_LOG_LINE = re.compile(
    r"^(?:(?P<absl>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<tensorflow>[IWEF]) \S+:\d+\])"
)
_SEVERITIES = {"I": 0, "W": 1, "E": 2, "F": 3}
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_NO_CUDA_DRIVERS = "Could not find cuda drivers on your machine"
_CUINIT_FAILED = "failed call to cuInit"


def verbose(environ=None):
    """Whether the user asked for TensorFlow's own logs: `VERBOSE_VARIABLE` set, and not to 0 or empty."""
    environ = os.environ if environ is None else environ
    return environ.get(VERBOSE_VARIABLE, "").strip() not in ("", "0")


def log_level(environ=None):
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it: an int, 0 when unset or not a number."""
    environ = os.environ if environ is None else environ
    try:
        return int(environ.get(LOG_LEVEL_VARIABLE, "0"))
    except ValueError:
        return 0


def kept_lines(text, level):
    """The lines of `text` (what TensorFlow's start-up wrote to stderr) that `start_tensorflow` writes back.

    Args:
        text: the captured standard error.
        level: TF_CPP_MIN_LOG_LEVEL: log lines of a lower severity are dropped.

    Returns:
        The kept lines, each with its line ending.
    """
    kept, no_cuda_drivers = [], False
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line)
        if match:
            severity = _SEVERITIES[match["absl"] or match["tensorflow"]]
            no_cuda_drivers = no_cuda_drivers or _NO_CUDA_DRIVERS in line
            if _CUINIT_FAILED in line and no_cuda_drivers:
                severity = _SEVERITIES["I"]  # expected without drivers: the notice's consequence, not an error
            if severity < level:
                continue
        elif line.rstrip("\r\n") == _ABSL_NOTICE and level > _SEVERITIES["I"]:
            continue
        kept.append(line)
    return kept


def start_tensorflow():
    """Import TensorFlow and find its devices, its start-up notices dropped unless `verbose()`.

    Call it before anything imports TensorFlow; once TensorFlow is imported it does nothing. Sets
    TF_CPP_MIN_LOG_LEVEL to 2 (TensorFlow's infos and warnings hidden, errors shown) unless the
    user set it or `verbose()`. Lists the physical devices, which does not initialize
    TensorFlow's runtime: threads and the multi-worker strategy can still be configured after.
    """
    if "tensorflow" in sys.modules:
        return
    if verbose():
        import tensorflow as tf

        tf.config.list_physical_devices()
        return
    os.environ.setdefault(LOG_LEVEL_VARIABLE, QUIET_LOG_LEVEL)
    with _stderr_filtered(log_level()):
        import tensorflow as tf

        tf.config.list_physical_devices()


@contextlib.contextmanager
def _stderr_filtered(level):
    """File descriptor 2 goes to a temporary file; at the end its `kept_lines` go to the real stderr."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (AttributeError, OSError, ValueError):  # no stderr to capture (e.g. a closed or replaced stream)
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", errors="replace")
            kept = "".join(kept_lines(text, level))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
