"""The study's runs: each (seed, score) trained by `keras_transformer.runs.train`, train.py's job, and timed."""

import shutil
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from benchmarks.harness import timing
from keras_transformer.config import TrainConfig

VOCABULARY_FILES = ("source_vocab.txt", "target_vocab.txt")  # what a run directory caches of the vocabularies


class StepTimer(timing.StepTimer):
    """`timing.StepTimer`, the milliseconds of every training step, and the model's trainable parameters at the end."""

    def __init__(self):
        super().__init__()
        self.trainable_parameters = None

    def on_train_end(self, logs=None):
        self.trainable_parameters = int(sum(np.prod(weight.shape) for weight in self.model.trainable_weights))


def train_config(args, seed, run_dir):
    """The `TrainConfig` of one run: train.py's defaults but preset, budget, seed, test size, beam, folders; float32."""
    return TrainConfig(
        preset=args.preset,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        train_size=args.train_size,
        test_size=args.test_size,
        beam_size=args.beam_size,
        seed=seed,
        precision="float32",
        run_dir=str(run_dir),
        export_dir=str(run_dir / "export"),
    )


def train_with_score(args, seed, score, run_dir, vocabularies=None):
    """One run of `keras_transformer.runs.train` (train.py's job) with the attention score `score`.

    Args:
        args: the study's flags.
        seed: the run's seed.
        score: one of `ATTENTION_SCORES`.
        run_dir: a new run directory.
        vocabularies: the `VOCABULARY_FILES` of an earlier run of the same seed, copied into
            `run_dir` first (the run then reads them instead of learning them again), or None.

    Returns:
        The run's results: parameters, test scores, step times, seconds.
    """
    from keras_transformer import runs

    run_dir.mkdir(parents=True)
    for path in vocabularies or ():
        shutil.copy(path, run_dir / Path(path).name)
    timer = StepTimer()
    keras.backend.clear_session()
    started = time.perf_counter()
    summary = runs.train(
        train_config(args, seed, run_dir),
        model_overrides={"attention_score": score},
        log=lambda line: None,
        extra_callbacks=[timer],
        verbose=0,
        export=False,
    )
    wall = time.perf_counter() - started
    timed = timer.milliseconds[1:]  # the first step traces the training function
    test = summary["test"]
    return {
        "score": score,
        "seed": seed,
        "parameters": timer.trainable_parameters,
        "exact_match_percent": 100 * test["exact_match"],
        "bleu": test["bleu"],
        "chrf": test["chrf"],
        "test_sentences": test["sentences"],
        "steps": len(timer.milliseconds),
        "ms_per_step_median": float(np.median(timed)) if timed else None,
        "ms_per_step_quartiles": [float(q) for q in np.percentile(timed, [25, 75])] if timed else None,
        "first_step_ms": round(timer.milliseconds[0], 1),
        "train_seconds": summary["train_seconds_this_session"],
        "wall_seconds": round(wall, 1),
        "vocab_sizes": [summary["model_config"]["source_vocab_size"], summary["model_config"]["target_vocab_size"]],
        "final_metrics": summary["final_metrics"],
        "bleu_signature": test["bleu_signature"],
        "_step_ms": timed,
    }


def train_every_run(args, order):
    """Train every `(seed, score)` of `order` in a temporary folder, printing each run as it finishes.

    Returns:
        The results of `train_with_score`, in the order of the runs, each with its `position`.
    """
    runs_done = []
    vocabularies = {}  # seed -> the vocabulary files of its first run
    with tempfile.TemporaryDirectory(prefix="attention_scores_") as folder:
        for i, (seed, score) in enumerate(order):
            run_dir = Path(folder) / f"seed_{seed}_{score}"
            result = train_with_score(args, seed, score, run_dir, vocabularies.get(seed))
            vocabularies.setdefault(seed, [run_dir / name for name in VOCABULARY_FILES])
            result["position"] = i
            runs_done.append(result)
            print(
                f"[{i + 1}/{len(order)}] seed {seed}, {score}: exact match {result['exact_match_percent']:.1f}%, "
                f"BLEU {result['bleu']:.2f}, {result['ms_per_step_median'] or float('nan'):.2f} ms/step, "
                f"{result['parameters']:,} parameters, {result['wall_seconds']:.0f} s",
                flush=True,
            )
    return runs_done
