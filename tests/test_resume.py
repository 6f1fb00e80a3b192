"""`train --resume` after SIGKILL: a run killed anywhere ends with the weights of one never killed.

Each run is a separate process, killed by `tests/kill_points.py` the way a preempted machine kills
it (no handler runs); the processes are forked by one server that imported TensorFlow once. One
run directory is killed again and again, mid-step, mid-checkpoint, during validation and during
export, with a damaged checkpoint on the way, then finished; its final weights are compared with
those of an uninterrupted run of the same flags.
"""

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from keras_transformer.cli import main
from keras_transformer.data import dates
from keras_transformer.runs.checkpoints import STATE_FILE, checkpoint_path, checkpoint_steps

KILL_POINTS = Path(__file__).with_name("kill_points.py")
EPOCHS, STEPS_PER_EPOCH = 3, 4
RUN_TIMEOUT_S = 300


def _write_corpus(root):
    """Small line files of the built-in task: `(train, validation, test)` flag values."""
    sizes = {"train": 300, "validation": 24, "test": 12}
    paths = {}
    for split, size in sizes.items():
        sources, targets = dates.builtin_corpus(split, size=size)
        paths[split] = [root / f"{split}.src", root / f"{split}.tgt"]
        for path, lines in zip(paths[split], (sources, targets)):
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def _flags(corpus, root):
    """Flags of a tiny run that exercises every part of the training state.

    Dropout (seed generators), moving averages of the weights, the schedule, checkpoints every 2
    steps and at epoch ends.
    """
    flags = ["--corpus", "files"]
    for split in ("train", "validation", "test"):
        flags += [f"--{split}-files", *map(str, corpus[split])]
    return flags + [
        "--preset", "tiny", "--max-source-len", "32", "--max-target-len", "14", "--dropout-rate", "0.1",
        "--source-vocab-size", "300", "--target-vocab-size", "40", "--batch-size", "16", "--warmup-steps", "6",
        "--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS_PER_EPOCH), "--ema-momentum", "0.9",
        "--checkpoint-every-steps", "2", "--checkpoint-every-seconds", "0", "--beam-size", "1",
        "--precision", "float32",
        "--run-dir", str(root / "run"), "--export-dir", str(root / "export"), "--model-name", "dates",
    ]  # fmt: skip


class _ForkedRuns:
    """Runs `train` in new processes, each forked by one `kill_points.py --fork-server` (see there)."""

    def __init__(self, folder):
        self.folder, self.count = folder, 0
        python_path = os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))
        self.server_log = folder / "server.log"
        self._log = self.server_log.open("w")
        self.server = subprocess.Popen(
            [sys.executable, str(KILL_POINTS), "--fork-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONPATH": python_path},
            text=True,
            start_new_session=True,  # its own process group: a hung run dies with it
        )

    def train(self, flags, kill_at=("never", 0), resume=False):
        """Run `train` in a new process, killed at `kill_at` = (point, occurrence); its `CompletedProcess`."""
        self.count += 1
        out, err = self.folder / f"run{self.count}.out", self.folder / f"run{self.count}.err"
        flags = [*flags, *(["--resume"] if resume else [])]
        order = {"point": kill_at[0], "occurrence": kill_at[1], "flags": flags, "stdout": str(out), "stderr": str(err)}
        self.server.stdin.write(json.dumps(order) + "\n")
        self.server.stdin.flush()
        ready, _, _ = select.select([self.server.stdout], [], [], RUN_TIMEOUT_S)
        answer = self.server.stdout.readline() if ready else ""
        assert answer, f"no answer from the fork server in {RUN_TIMEOUT_S} s:\n{self.server_log.read_text()[-3000:]}"
        returncode = json.loads(answer)["returncode"]
        return subprocess.CompletedProcess(order["flags"], returncode, out.read_text(), err.read_text())

    def close(self):
        """End the server (killed with its runs if one hangs) and close its pipes and log."""
        self.server.stdin.close()
        try:
            self.server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait()
        self.server.stdout.close()
        self._log.close()


@pytest.fixture
def processes(tmp_path):
    folder = tmp_path / "fork_server"
    folder.mkdir()
    forked = _ForkedRuns(folder)
    yield forked
    forked.close()


def _killed(result):
    assert result.returncode == -signal.SIGKILL, result.stdout + result.stderr


def _weights(run_dir):
    return keras.models.load_model(Path(run_dir) / "model.keras").get_weights()


@pytest.mark.slow
def test_a_run_killed_again_and_again_ends_with_the_weights_of_one_never_killed(tmp_path, capsys, processes):
    corpus = _write_corpus(tmp_path)
    reference = _flags(corpus, tmp_path / "reference")
    flags = _flags(corpus, tmp_path / "killed")
    run_dir, checkpoints = tmp_path / "killed" / "run", tmp_path / "killed" / "run" / "checkpoints"
    versions = tmp_path / "killed" / "export" / "dates"

    finished = processes.train(reference)
    assert finished.returncode == 0, finished.stdout + finished.stderr

    # Killed as step 7 begins: steps 1-6 are done, checkpointed at 2, 4 and 6 (the newest two kept).
    _killed(processes.train(flags, kill_at=("step", 7)))
    assert checkpoint_steps(checkpoints) == [6, 4]
    assert not (run_dir / "summary.json").exists()

    # Resumed from 6 and killed while writing the checkpoint of step 8: only complete ones count.
    _killed(processes.train(flags, kill_at=("checkpoint", 1), resume=True))
    assert checkpoint_steps(checkpoints) == [6, 4]

    # Resumed from 6 again, killed as the second epoch's validation begins (step 8 checkpointed).
    _killed(processes.train(flags, kill_at=("validation", 1), resume=True))
    assert checkpoint_steps(checkpoints) == [8, 6]

    # The newest checkpoint is damaged on disk: the next resume passes over it, says so, and
    # trains on from step 6. Killed during export: no version folder appears.
    state = checkpoint_path(checkpoints, 8) / STATE_FILE
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    result = processes.train(flags, kill_at=("export", 1), resume=True)
    _killed(result)
    assert f"Skipping the damaged checkpoint {checkpoint_path(checkpoints, 8)}" in result.stdout
    assert f"Restored the training state after 6 steps from {checkpoint_path(checkpoints, 6)}" in result.stdout
    assert checkpoint_steps(checkpoints) == [12, 10]
    assert not versions.exists() or not [path for path in versions.iterdir() if path.name.isdigit()]

    # The run is kept: starting it again without --resume refuses to overwrite it, and changing
    # the experiment while resuming is refused (the same model flags again are accepted).
    assert main(["train", *flags]) == 2
    assert "already holds an interrupted run; pass --resume" in capsys.readouterr().err
    assert main(["train", *flags, "--resume", "--d-model", "64"]) == 2
    assert "Cannot change d_model when resuming" in capsys.readouterr().err

    # Resumed after the last step: nothing left to train; evaluated and exported as version 1.
    result = processes.train(flags, resume=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Restored the training state after {EPOCHS * STEPS_PER_EPOCH} steps" in result.stdout
    assert [path.name for path in versions.iterdir() if path.name.isdigit()] == ["1"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["checkpoints"]["resumed_from_step"] == EPOCHS * STEPS_PER_EPOCH
    assert summary["epochs_this_session"] == 0 and summary["train_config"]["epochs"] == EPOCHS
    test = summary["test"]
    assert result.stdout.splitlines()[-1] == (
        f"Done in {summary['total_seconds']:.0f} s: test exact match {test['exact_match']:.2%}, "
        f"BLEU {test['bleu']}; exported to {summary['export_path']}"
    )

    # The same weights as the run that was never killed (the moving averages, swapped in at the end).
    expected = _weights(tmp_path / "reference" / "run")
    for actual, wanted in zip(_weights(run_dir), expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-6)
    reference_summary = json.loads((tmp_path / "reference" / "run" / "summary.json").read_text())
    assert summary["test"]["exact_match"] == reference_summary["test"]["exact_match"]


def test_a_setting_the_run_settled_is_no_change_asked_unset_and_must_match_asked_set():
    """`--joint-vocab` unset follows the model at the start; resuming, unset keeps what was settled."""
    from keras_transformer.config import TrainConfig
    from keras_transformer.runs.directory import changed_settings

    saved = TrainConfig(joint_vocab=True).to_dict()
    assert changed_settings(TrainConfig().to_dict(), saved) == []
    assert changed_settings(TrainConfig(joint_vocab=True).to_dict(), saved) == []
    assert changed_settings(TrainConfig(joint_vocab=False).to_dict(), saved) == ["joint_vocab"]
    assert changed_settings(TrainConfig(joint_vocab=True, epochs=99, batch_size=3).to_dict(), saved) == ["batch_size"]
