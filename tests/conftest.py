"""Shared fixtures: one tiny training run, made once per test session and reused read-only."""

import json
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from filelock import FileLock

from keras_transformer import runs
from keras_transformer.config import ModelConfig, TrainConfig
from keras_transformer.data.tokenizers import START_ID
from keras_transformer.models import build_transformer

ROOT = Path(__file__).resolve().parents[1]

# The tests' tiny sizes: batch, source length, target length, d_model, heads, d_ff, blocks.
B, S, T, D, H, F, N = 2, 5, 4, 8, 2, 16, 2
V_S, V_T = 13, 11  # source / target vocabulary sizes

TINY_MODEL = {"max_source_len": 24, "max_target_len": 14}


def pytest_addoption(parser):
    parser.addoption(
        "--learning-seed",
        type=int,
        default=None,
        help="run the tests marked `learning` with this seed instead of their own (tests/learning_margins.py "
        "sweeps it to measure the margins their docstrings state)",
    )


class LearningCheck:
    """What a test marked `learning` measures against its bars, recorded for tests/learning_margins.py.

    Attributes:
        seed: int, the seed to train with: the marker's `seed`, or `--learning-seed` when given.
    """

    def __init__(self, seed, record_property):
        self.seed = seed
        self._record_property = record_property

    def check(self, name, value, below=None, above=None):
        """Record `value` and fail unless it is `< below` and `> above` (those given)."""
        value = float(value)
        self._record_property(f"learning:{name}", repr({"value": value, "below": below, "above": above}))
        cleared = (below is None or value < below) and (above is None or value > above)
        bar = " and ".join(f"{sign} {bar}" for sign, bar in (("<", below), (">", above)) if bar is not None)
        assert cleared, f"{name} = {value:.4g}, the bar is {bar} (seed {self.seed})"
        return value


@pytest.fixture
def learning(request, record_property):
    """A `LearningCheck` for a test marked `@pytest.mark.learning(seed=...)`."""
    marker = request.node.get_closest_marker("learning")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `learning` without @pytest.mark.learning(seed=...)")
    override = request.config.getoption("--learning-seed")
    return LearningCheck(marker.kwargs["seed"] if override is None else override, record_property)


def tiny_config(**overrides):
    """A `ModelConfig` of the tiny test sizes above, without dropout."""
    values = dict(
        source_vocab_size=V_S,
        target_vocab_size=V_T,
        d_model=D,
        num_heads=H,
        d_ff=F,
        num_blocks=N,
        dropout_rate=0.0,
        max_source_len=12,
        max_target_len=12,
    )
    return ModelConfig(**{**values, **overrides}).validate()


def tiny_model(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return build_transformer(tiny_config(**overrides))


def trained_like_betas(model, shift=0.1):
    """Shift every LayerNorm's beta of `model` away from zero, as training does; returns `model`.

    The repository variant's masks call a vector summing to zero padding, and while beta is zero
    LayerNorm's rows sum to zero up to rounding (in float32, exactly zero in 7% to 18% of rows):
    which positions are padding would be rounding's choice, made differently by two computations
    of the same thing (cached and uncached decoding). A trained beta is not zero.
    """
    for weight in model.weights:
        if weight.path.endswith("beta"):
            weight.assign(weight + shift)
    return model


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


def ids(lengths, max_length, vocab_size, rng, start=False):
    """Int32 `[len(lengths), max_length]` of random real ids (>= 4) then padding (0).

    With `start`, each row begins with `<s>` (the decoder input `target_in_ids`).
    """
    out = np.zeros((len(lengths), max_length), "int32")
    for b, length in enumerate(lengths):
        out[b, :length] = rng.integers(4, vocab_size, size=length)
        if start and length:
            out[b, 0] = START_ID
    return out


def pad(x, extra):
    """Append `extra` columns of padding (id 0)."""
    return np.pad(x, ((0, 0), (0, extra)))


def tiny_train_config(root, **overrides):
    """A `TrainConfig` that trains the tiny preset for a few steps on a small built-in corpus."""
    values = dict(
        preset="tiny",
        train_size=300,
        # float32 on any CPU: the shared tiny runs' numbers then compare across machines.
        precision="float32",
        validation_size=100,
        test_size=100,
        source_vocab_size=300,
        target_vocab_size=40,
        epochs=2,
        steps_per_epoch=3,
        batch_size=16,
        warmup_steps=10,
        run_dir=str(root / "run"),
        export_dir=str(root / "saved_models"),
        model_name="dates",
    )
    values.update(overrides)
    return TrainConfig(**values).validate()


def once_per_session(session_temp, name, make):
    """`session_temp/name`, a folder `make(folder)` filled once per test session.

    Under pytest-xdist every worker may ask; a file lock makes the first one run `make` and the
    others wait for it, then read what it wrote. A folder `make` did not finish is emptied and
    made again.

    Args:
        session_temp: the session's temporary folder (`session_temp_folder`).
        name: the folder's name in it.
        make: `make(folder)` writes the shared files into `folder` (which exists, empty).

    Returns:
        `Path` of the folder.
    """
    folder = Path(session_temp) / name
    with FileLock(f"{folder}.lock"):
        done = Path(f"{folder}.done")
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            done.touch()
    return folder


def session_temp_folder(tmp_path_factory, worker_id):
    """The temporary folder of the whole test session: each xdist worker's folder is inside it."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


TRAINED_RUN = "trained_run"  # its folder in the session's temporary folder


def _train_shared_run(root):
    runs.train(tiny_train_config(root), dict(TINY_MODEL), log=lambda line: None, verbose=0)


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, worker_id):
    """`(train_config, summary)` of a finished tiny run (trained, evaluated, exported), read-only.

    One per test session, shared by the xdist workers (`once_per_session`).
    """
    root = once_per_session(session_temp_folder(tmp_path_factory, worker_id), TRAINED_RUN, _train_shared_run)
    train_config = tiny_train_config(root)
    return train_config, json.loads((Path(train_config.run_dir) / runs.SUMMARY_FILE).read_text())


@pytest.fixture(scope="session")
def loaded_run(trained_run):
    """`runs.load_run` of the shared tiny run, once per worker: `(train_config, model_config, model, translator)`.

    Read-only. Tests that share it also share the translator's traced decoding.
    """
    train_config, _ = trained_run
    return runs.load_run(train_config.run_dir)


@pytest.fixture(scope="session")
def loaded_export(trained_run):
    """The shared tiny run's text export, `tf.saved_model.load`ed once per worker; read-only."""
    _, summary = trained_run
    return tf.saved_model.load(summary["export_path"])


def run_main(main, argv, capsys):
    """A script's `main(argv)`, run in this process: `(exit status, what it printed)`.

    The benchmarks' smoke tests call their `main` here rather than in a new Python, which would
    spend seconds importing TensorFlow again; the workers a benchmark starts are still processes.
    """
    capsys.readouterr()
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    return status or 0, capsys.readouterr().out


def jax_cpu_env(folder, env=None):
    """The environment of a child Python that runs Keras on JAX's CPU as a GPU machine without TensorFlow would.

    In it `import tensorflow` fails, as if TensorFlow were not installed (a `sitecustomize.py`
    written into `folder` and put first on `PYTHONPATH`), and XLA compiles without LLVM's
    optimizations: a tiny model's time on JAX goes mostly to compiling it, and those optimizations
    cost more than they save (the `benchmarks/gpu.sh` lm job: 44 s instead of 29 s with both).

    Args:
        folder: a folder for the `sitecustomize.py` alone (made if missing).
        env: the environment to start from (default `os.environ`), without pytest-xdist's variables.

    Returns:
        A new `dict`.
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "sitecustomize.py").write_text("import sys\n\nsys.modules['tensorflow'] = None\n")
    env = {
        key: value for key, value in (os.environ if env is None else env).items() if not key.startswith("PYTEST_XDIST")
    }
    xla_flags = f"{env.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    python_path = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return {**env, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags, "PYTHONPATH": python_path}


SERVING_OPS = Path(__file__).resolve().parent / "serving_ops"


def serving_op_lists():
    """`(core ops of TF 2.12.1, ops of TF Text 2.12.1)`: what TF Serving 2.12 to 2.19 can run.

    The lists, and the script that makes them, are in `tests/serving_ops/`.
    """
    paths = [SERVING_OPS / "tf_2_12_1_core_ops.txt", SERVING_OPS / "tftext_2_12_1_ops.txt"]
    return tuple({line.strip() for line in path.read_text().splitlines() if line.strip()} for path in paths)


# The longest tests, by measured duration: a notebook that trains, the SIGKILL resume chain.
LONGEST_FIRST = ("test_notebooks.py", "test_resume.py")


def pytest_collection_modifyitems(items):
    """Run the slow tests first, the longest of them at the head; quick tests fill the end.

    With two workers stealing work from each other, a long test started last would run alone
    while the other worker idles; started first, the quick tests fill the gaps instead. Tests
    keep their order within each group.
    """

    def group(item):
        if item.path.name in LONGEST_FIRST and item.get_closest_marker("slow"):
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=group)
