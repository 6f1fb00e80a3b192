"""The layers, the model, `model.fit` and decoding on JAX and PyTorch, checked against TensorFlow.

Each backend runs `tests/backends` in its own process (`KERAS_BACKEND=jax`, `=torch`), where
`import tensorflow` fails, so nothing there may depend on TensorFlow. That run is given a bundle
written here, on TensorFlow (`tests/backends/backend_bundle.py`): `.keras` files and layer configs
it must load with `safe_mode=True`, and TensorFlow's outputs, decoded ids and `model.fit` losses it
must reproduce from the same weights. It saves the model it trained, which must load back here,
again with `safe_mode=True`, and give TensorFlow's trained logits.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from backends.backend_bundle import REFERENCE_ENV, SAVE_TO_ENV, check_trained_model, write_bundle
from conftest import jax_cpu_env

ROOT = Path(__file__).resolve().parents[1]
# One process, no cache files, and no conftest.py above tests/backends (the suite's own imports TensorFlow).
PYTEST_ARGS = ["tests/backends", "-n", "0", "-p", "no:cacheprovider", "--confcutdir", "tests/backends", "-q"]


@pytest.fixture(scope="module")
def tensorflow_bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tensorflow_bundle")
    write_bundle(folder)
    return folder


def run_backend_tests(backend, reference, save_to):
    """Run `tests/backends` on `backend` in a new process without TensorFlow; returns the `CompletedProcess`."""
    # TensorFlow hidden and XLA's cheap compiles, as for JAX; one thread: the tensors are tiny, the
    # suite's other worker has the other core, and PyTorch's waiting threads would spin on it (10 s
    # of CPU for the PyTorch run instead of 17).
    env = jax_cpu_env(save_to / "site")
    env.update({"KERAS_BACKEND": backend, "OMP_NUM_THREADS": "1"})
    env.update({REFERENCE_ENV: str(reference), SAVE_TO_ENV: str(save_to)})
    return subprocess.run(
        [sys.executable, "-m", "pytest", *PYTEST_ARGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backend_reproduces_tensorflow_and_its_trained_model_loads_back(backend, tensorflow_bundle, tmp_path):
    result = run_backend_tests(backend, tensorflow_bundle, tmp_path)
    assert result.returncode == 0, f"tests/backends on {backend}:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    assert " skipped" not in result.stdout, result.stdout[-3000:]
    check_trained_model(tmp_path, tensorflow_bundle)
