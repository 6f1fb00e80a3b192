"""The worker protocol of the Multi30k study: one subprocess per model, a result JSON back.

The parent (`run_workers`) runs the study again (`python -m benchmarks.translation.multi30k`) once
per model of `--models`, one after the other, with its own flags and `--precision POLICY --worker
NAME` after them: each model gets every core and its own peak memory, and both train under the
precision the parent chose. A worker (`run_worker`) builds its model, trains it in the budget,
scores it and writes what it measured to `WORKER_RESULT_FILE` in its folder of `--work-dir`
(beside its configs), which the parent reads back; a worker that fails, or leaves no result,
stops the run.

"peak_rss_mib" in the result is the worker's maximum resident set size (`ru_maxrss`), training
and scoring included; "peak_rss_mib_after_training" the same before scoring.
"""

import json
import subprocess
import time

import keras

from benchmarks.harness import machine, results, workers
from benchmarks.translation.multi30k.data import load_worker_data, training_batches, worker_dir
from benchmarks.translation.multi30k.models import build_worker_model, save_worker_configs
from benchmarks.translation.multi30k.scoring import score_test, score_validation_decodings
from benchmarks.translation.multi30k.train import late_dropout, train_in_budget, training_summary
from keras_transformer.runs import export_run

WORKER_RESULT_FILE = "result.json"


def run_workers(args, argv, package):
    """Run every model's worker, one after the other; `{name: result dict}`.

    Args:
        args: the parent's flags, checked (`check_args`).
        argv: the flags the parent was given, which each worker is given too.
        package: the study's `__package__`, which each worker runs (`workers.worker_command`).
    """
    model_results = {}
    for name in args.models:
        result_path = worker_dir(args, name) / WORKER_RESULT_FILE
        result_path.unlink(missing_ok=True)
        print(f"\n=== {name}: training for {args.minutes:g} minutes ===", flush=True)
        start = time.perf_counter()
        command = workers.worker_command(package, argv, "--precision", args.policy, "--worker", name)
        completed = subprocess.run(command)
        if completed.returncode != 0 or not result_path.is_file():
            raise RuntimeError(f"The {name} worker failed (exit status {completed.returncode}); see its output above")
        model_results[name] = json.loads(result_path.read_text())
        model_results[name]["process_wall_seconds"] = round(time.perf_counter() - start, 1)
    return model_results


def data_facts(model, model_config, data, fingerprint):
    """The JSON's description of what a worker trained: size, vocabularies, pairs, config, batches."""
    return {
        "parameters": int(model.count_params()),
        "vocab_sizes": [data.source_tokenizer.vocab_size, data.target_tokenizer.vocab_size],
        "train_pairs": len(data.pairs),
        "dropped_pairs": data.pairs.num_dropped,
        "skipped_while_reading": data.train_text.skipped,
        "model_config": model_config.to_dict(),
        "batch_fingerprint": fingerprint,
    }


def score_worker_model(args, name, translator, greedy, test_text, train_config):
    """Score the trained model on the test split; ours also by `--validation-decodings`, and export it.

    Returns:
        `(result, hypotheses, test_seconds)`: `score_test`'s result, with ours'
        `"validation_decodings"` and `"export_path"` when asked for, the final decoding's test
        translations, and the seconds the test scoring took.
    """
    score_start = time.perf_counter()
    result, hypotheses, final = score_test(args, name, translator, greedy, test_text)
    test_seconds = time.perf_counter() - score_start
    if name == "ours" and args.validation_decodings:
        result["validation_decodings"] = score_validation_decodings(args, translator)
    if name == "ours" and args.export_dir:
        result["export_path"] = str(export_run(final, train_config))
        print(f"{name}: exported to {result['export_path']}", flush=True)
    return result, hypotheses, test_seconds


def example_translations(test, hypotheses, count=5):
    """The JSON's first `count` test sentences: `[{"source", "reference", "translation"}, ...]`."""
    return [
        {"source": s, "reference": r, "translation": h}
        for s, r, h in list(zip(test.sources, test.targets, hypotheses))[:count]
    ]


def run_worker(args):
    """Train and score the model of `--worker` in the budget; write its result JSON to its work folder."""
    name, started = args.worker, time.perf_counter()
    keras.mixed_precision.set_global_policy(args.policy)
    keras.utils.set_random_seed(args.seed)
    run_dir = worker_dir(args, name)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = load_worker_data(args)
    model_config, train_config = save_worker_configs(args, name, data, run_dir)
    model, translator = build_worker_model(args, name, model_config, train_config, data, run_dir)
    print(
        f"{name}: {model.count_params():,} parameters, {len(data.pairs):,} training pairs "
        f"({data.pairs.num_dropped} dropped), {args.policy}, warm-up {args.warmup_steps} steps",
        flush=True,
    )
    fingerprint, train_data = training_batches(args, data.pairs)
    greedy = translator(1)
    late = late_dropout(args, name, model_config, data.pairs)
    if late:
        print(
            f"{name}: dropout {model_config.dropout_rate:g} rises to {late.rate:g} at step {late.start_step}",
            flush=True,
        )
    history, clock, curve, fit_seconds, cooldown_end_steps = train_in_budget(
        args, model, train_data, greedy, data.curve_text, [late] if late else []
    )
    peak_after_training = machine.peak_rss_mib()
    train = training_summary(args, history, clock, data.pairs)
    print(
        f"{name}: trained {train['minutes']:.2f} min, {train['steps']} steps, {train['epochs']:.2f} epochs, "
        f"{train['target_tokens_per_second_median']:,} target tokens/s (median chunk)",
        flush=True,
    )
    result, hypotheses, test_seconds = score_worker_model(args, name, translator, greedy, data.test_text, train_config)
    result.update(
        **data_facts(model, model_config, data, fingerprint),
        train=train,
        curve=curve.points,
        examples=example_translations(data.test_text, hypotheses),
        late_dropout=late and {"rate": late.rate, "start_step": late.start_step, "raised_at": late.raised_at},
        lr_cooldown=train_config.lr_cooldown and {"share": train_config.lr_cooldown, "end_steps": cooldown_end_steps},
        peak_rss_mib=round(machine.peak_rss_mib(), 1),
        peak_rss_mib_after_training=round(peak_after_training, 1),
        wall_seconds={
            "fit": round(fit_seconds, 1),
            "scoring": round(curve.scoring_seconds + test_seconds, 1),
            "worker": round(time.perf_counter() - started, 1),
        },
    )
    results.write_json(run_dir / WORKER_RESULT_FILE, result)
    return 0
