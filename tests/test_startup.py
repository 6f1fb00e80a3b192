"""TensorFlow's start-up notices stay off the terminal, unless KERAS_TRANSFORMER_VERBOSE=1; its errors do not."""

import os
import subprocess
import sys
from pathlib import Path

from keras_transformer.cli import startup

REPO = Path(__file__).resolve().parents[1]
# What TensorFlow 2.21 printed while it started on a CPU machine without CUDA drivers.
START_UP = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796524329.957738    4311 port.cc:153] oneDNN custom operations are on. You may see slightly different \
numerical results due to floating-point round-off errors from different computation orders.
I0000 00:00:1796524329.958085    4311 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be \
used.
W0000 00:00:1796524330.000000    4311 some_file.cc:12] a warning
E0000 00:00:1796524334.049469    4311 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to \
cuInit: UNKNOWN ERROR (303)
E0000 00:00:1796524334.100000    4311 other.cc:7] a real error
2024-01-11 05:40:05.061907: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized
/some/module.py:3: UserWarning: a Python warning
"""
NOTICES = ("absl::InitializeLog", "oneDNN custom operations", "cuda drivers", "cuInit")


def _lines(text, level):
    return "".join(startup.kept_lines(text, level))


def test_the_quiet_level_drops_infos_warnings_and_the_expected_cuinit_error():
    assert _lines(START_UP, 2) == (
        "E0000 00:00:1796524334.100000    4311 other.cc:7] a real error\n"
        "/some/module.py:3: UserWarning: a Python warning\n"
    )
    # Errors only at 2; 1 keeps the warnings too (but absl's about where its messages go), 0 (a
    # user's own TF_CPP_MIN_LOG_LEVEL=0) everything.
    assert "a warning" in _lines(START_UP, 1)
    assert not any(notice in _lines(START_UP, 1) for notice in NOTICES)
    assert _lines(START_UP, 0) == START_UP
    assert "a real error" not in _lines(START_UP, 3) and "UserWarning" in _lines(START_UP, 3)


def test_a_cuinit_error_without_the_no_drivers_notice_is_kept():
    """Drivers found and CUDA failing is a real error: the GPU the user expects is not used."""
    text = "".join(line + "\n" for line in START_UP.splitlines() if "cuda drivers" not in line)
    assert "failed call to cuInit" in _lines(text, 2)


def test_the_verbose_variable_and_the_log_level():
    assert not startup.verbose({}) and not startup.verbose({"KERAS_TRANSFORMER_VERBOSE": "0"})
    assert startup.verbose({"KERAS_TRANSFORMER_VERBOSE": "1"})
    assert startup.log_level({}) == 0 and startup.log_level({"TF_CPP_MIN_LOG_LEVEL": "2"}) == 2
    assert startup.log_level({"TF_CPP_MIN_LOG_LEVEL": "loud"}) == 0


def _stderr_of_a_command(**environ):
    """`(stdout, stderr)` of `train --resume` on a folder holding no run: TensorFlow starts, one error line."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_TRANSFORMER_VERBOSE", "TF_ENABLE_ONEDNN_OPTS")
    }
    command = [
        sys.executable,
        "-c",
        "import os, sys; from keras_transformer.cli import main; code = main(sys.argv[1:]); "
        "print('level', os.environ.get('TF_CPP_MIN_LOG_LEVEL')); sys.exit(code)",
        "train",
        "--resume",
        "--run-dir",
        "no-run-here",
    ]
    result = subprocess.run(command, cwd=REPO, env={**env, **environ}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "error: Nothing to resume: no train_config.json in no-run-here" in result.stderr
    return result.stdout, result.stderr


def test_a_command_starts_without_tensorflow_notices():
    stdout, stderr = _stderr_of_a_command()
    assert [line for line in stderr.splitlines() if any(notice in line for notice in NOTICES)] == []
    assert "level 2" in stdout  # TensorFlow's errors shown (a user's own TF_CPP_MIN_LOG_LEVEL is kept: setdefault)


def test_verbose_shows_what_tensorflow_prints():
    stdout, stderr = _stderr_of_a_command(KERAS_TRANSFORMER_VERBOSE="1")
    assert "level 2" not in stdout  # not set by us (jax, when imported later, sets 1 where unset)
    if sys.platform == "linux" and os.uname().machine == "x86_64":  # oneDNN's notice: TensorFlow's x86 Linux wheels
        assert "oneDNN custom operations are on" in stderr
