"""The `scores` experiment of attention_scores.py: the built-in task trained with each attention score.

The built-in task (the dates corpus of `python train.py`) trained with each score
function s(x, q) of `keras_transformer.layers.AttentionScore` (`--scores`, default all five:
scaled_dot, dot, additive, bilinear, cosine) in every attention sublayer, the model config's
`attention_score` (`train.py --attention-score`), at the same size and budget:

- Every run is `keras_transformer.runs.train`, the job of `train.py`: train.py's `TrainConfig`
  defaults (batch 64, Noam schedule with 400 warm-up steps, label smoothing 0.1, no weight
  averaging) except the preset (`--preset`, small by default), the budget (`--epochs` x
  `--steps-per-epoch` optimizer steps, 4 x 200 by default), the seed, the beam of the test
  evaluation (`--beam-size`, train.py's 4 by default), the training pairs (`--train-size`) and
  float32 precision, always. It learns the vocabularies, trains with `model.fit`, evaluates the
  test split (no export), in a temporary run directory removed at the end.
- Each seed of `--seeds` (0 and 1 by default) generates the corpus and its splits, shuffles the
  batches and initializes the weights; all the scores of one seed train on the same data, batches
  and vocabularies (learned by its first run, then copied into the others' run directories, which
  read them instead of learning them again). Only the score, and the weights it adds, differ.
- The runs go seed by seed, one at a time in one process (`keras.backend.clear_session()` before
  each); the order of the scores is rotated by one place from one seed to the next, so that drift
  of the machine does not fall on one score: with two seeds and five scores, the first score
  runs first for seed 0 and last for seed 1.

Measured per run: exact match (%) and BLEU of the test split (1,000 sentences), as train.py scores
them (`keras_transformer.evaluation`: beam search, sacreBLEU); the median milliseconds per
training step, timed by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`
(fetching the batch, forward and backward pass and Adam's update; validation between epochs is
outside the steps) over every step but the run's first, which traces the training function; the
trainable parameters; the wall seconds of the whole run (vocabularies, training, evaluation).
Per score: each seed's values and their mean, the median over the timed steps of all its
runs and its ratio to scaled_dot's. Another process on the machine slows the runs that overlap
it: the JSON records the load average at the start and at the end.

Output: the runs one line each as they finish, then a table (one row per score: parameters, exact
match per seed and mean, BLEU per seed and mean, ms per step, ratio to scaled_dot) on stdout; the
JSON (`attention_scores_scores.json`: settings, the order of the runs, versions, CPU model and
flags, load average, and per score and per run the figures above, with each run's chrF, step-time
quartiles, first step, training seconds and final training metrics) in the `--out` folder.
"""

import os
import shutil
import tempfile
import time
from pathlib import Path

import common
import keras
import numpy as np

from keras_transformer.config import TrainConfig

VOCABULARY_FILES = ("source_vocab.txt", "target_vocab.txt")  # what a run directory caches of the vocabularies


class StepTimer(keras.callbacks.Callback):
    """The milliseconds of every training step of a `model.fit`, and the model's trainable parameters.

    A step is timed from `on_train_batch_begin` to `on_train_batch_end`: fetching the batch,
    forward and backward pass and optimizer update (TensorFlow runs the step synchronously, so it
    has finished when `on_train_batch_end` is called). Validation and the epoch-end callbacks fall
    between steps and are not counted.
    """

    def __init__(self):
        super().__init__()
        self.milliseconds = []
        self.trainable_parameters = None
        self._start = None

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.milliseconds.append(1000 * (time.perf_counter() - self._start))

    def on_train_end(self, logs=None):
        self.trainable_parameters = int(sum(np.prod(weight.shape) for weight in self.model.trainable_weights))


def run_orders(scores, seeds):
    """The order of the runs: seed by seed, the scores rotated by one place from each seed to the next.

    Args:
        scores: the score functions, in the order of `--scores`.
        seeds: the seeds, in the order of `--seeds`.

    Returns:
        A list of `(seed, score)`: with two seeds and five scores, the first score runs first for
        the first seed and last for the second.
    """
    return [
        (seed, score) for i, seed in enumerate(seeds) for score in scores[i % len(scores) :] + scores[: i % len(scores)]
    ]


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
        args: the `scores` flags.
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


def summarise_scores(args, runs_done):
    """Per score: parameters, exact match and BLEU per seed and their means, ms per step, its ratio.

    Args:
        args: the `scores` flags.
        runs_done: the results of `train_with_score`, each with its step times (`_step_ms`).

    Returns:
        `{score: {...}}` in the order of `--scores`. `ms_per_step_median` is the median over the
        timed steps of all the score's runs, `ms_per_step_over_scaled_dot` its ratio to
        scaled_dot's (None without a scaled_dot run).
    """
    scores = {}
    for score in args.scores:
        mine = sorted(
            (run for run in runs_done if run["score"] == score), key=lambda run: args.seeds.index(run["seed"])
        )
        steps = [ms for run in mine for ms in run["_step_ms"]]
        scores[score] = {
            "seeds": [run["seed"] for run in mine],
            "parameters": [run["parameters"] for run in mine],
            "exact_match_percent": {
                "seeds": [run["exact_match_percent"] for run in mine],
                "mean": float(np.mean([run["exact_match_percent"] for run in mine])),
            },
            "bleu": {"seeds": [run["bleu"] for run in mine], "mean": float(np.mean([run["bleu"] for run in mine]))},
            "ms_per_step_median": float(np.median(steps)) if steps else None,
            "ms_per_step_median_seeds": [run["ms_per_step_median"] for run in mine],
            "wall_seconds": {
                "seeds": [run["wall_seconds"] for run in mine],
                "mean": float(np.mean([run["wall_seconds"] for run in mine])),
            },
        }
    reference = scores.get("scaled_dot", {}).get("ms_per_step_median")
    for summary in scores.values():
        ms = summary["ms_per_step_median"]
        summary["ms_per_step_over_scaled_dot"] = ms / reference if ms and reference else None
    return scores


# ---------------------------------------------------------------- report, run


def format_parameters(counts):
    """A score's parameter count for the table: one number, or "low-high" when the seeds' differ."""
    low, high = min(counts), max(counts)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def print_scores_report(args, scores, cpu):
    """The table: one row per score, parameters, exact match and BLEU per seed and mean, ms per step."""
    steps = args.epochs * args.steps_per_epoch
    print()
    print(
        f"built-in dates corpus, preset {args.preset}, {steps} steps ({args.epochs} x {args.steps_per_epoch}), "
        f"float32, seeds {', '.join(map(str, args.seeds))}, test beam {args.beam_size}, {os.cpu_count()} CPUs"
    )
    print(common.cpu_line(cpu))
    seeds = args.seeds
    width = max(11, *(len(format_parameters(summary["parameters"])) + 2 for summary in scores.values()))
    header = f"{'score':<12}{'params':>{width}}"
    header += "".join(f"{'EM s' + str(seed):>9}" for seed in seeds) + f"{'EM mean':>9}"
    header += "".join(f"{'BLEU s' + str(seed):>9}" for seed in seeds) + f"{'BLEU mean':>11}"
    header += f"{'ms/step':>9}{'/ scaled_dot':>14}"
    print(header)
    print("-" * len(header))
    for score, summary in scores.items():
        exact, bleu = summary["exact_match_percent"], summary["bleu"]
        ratio = summary["ms_per_step_over_scaled_dot"]
        ms = summary["ms_per_step_median"]
        print(
            f"{score:<12}{format_parameters(summary['parameters']):>{width}}"
            + "".join(f"{value:>9.1f}" for value in exact["seeds"])
            + f"{exact['mean']:>9.1f}"
            + "".join(f"{value:>9.2f}" for value in bleu["seeds"])
            + f"{bleu['mean']:>11.2f}"
            + (f"{ms:>9.2f}" if ms is not None else f"{'-':>9}")
            + (common.format_ratio(ratio, 14) if ratio is not None else f"{'-':>14}")
        )
    print(
        "EM: exact match (%) of the test split; BLEU: sacreBLEU of the same translations; ms/step: median over the "
        "timed steps of every seed (the first step of each run, which traces, not timed)"
    )


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


def scores_json(args, order, runs_done, scores, cpu, load_start, wall):
    """The results JSON of the `scores` experiment (the load average at the end is read now)."""
    settings = {
        "experiment": "scores",
        "corpus": "builtin",
        "scores": args.scores,
        "preset": args.preset,
        "epochs": args.epochs,
        "steps_per_epoch": args.steps_per_epoch,
        "steps": args.epochs * args.steps_per_epoch,
        "seeds": args.seeds,
        "train_size": args.train_size,
        "beam_size": args.beam_size,
        "precision": "float32",
        "backend": keras.backend.backend(),
        "train_config": train_config(args, args.seeds[0], Path("RUN_DIR")).to_dict(),
        "order": [[seed, score] for seed, score in order],
        "ms_per_step": "from on_train_batch_begin to on_train_batch_end of model.fit, every step but each run's "
        "first (tracing)",
        "exact_match_and_bleu": "keras_transformer.evaluation on the test split, as train.py scores it",
        "bleu_signature": runs_done[0]["bleu_signature"],
    }
    return {
        "settings": settings,
        "command": common.command_line(args.argv),
        "versions": common.package_versions(
            {"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy", "sacrebleu": "sacrebleu"}
        ),
        **common.machine(cpu),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "wall_seconds": round(wall, 1),
        "peak_rss_mib": common.peak_rss_mib(),
        "scores": scores,
        "runs": [
            {key: value for key, value in run.items() if not key.startswith("_") and key != "bleu_signature"}
            for run in runs_done
        ],
    }


def run_scores(args):
    """The `scores` experiment: train every (seed, score), report, write the JSON."""
    cpu = common.cpu_info()
    load_start = os.getloadavg()
    started = time.perf_counter()
    order = run_orders(args.scores, args.seeds)
    runs_done = train_every_run(args, order)
    wall = time.perf_counter() - started
    scores = summarise_scores(args, runs_done)
    print_scores_report(args, scores, cpu)
    print(f"wall time {wall / 60:.1f} min")
    data = scores_json(args, order, runs_done, scores, cpu, load_start, wall)
    print(f"wrote {common.write_json(Path(args.out) / 'attention_scores_scores.json', data)}")
    return 0
