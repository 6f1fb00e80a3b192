"""Multi30k German->English in a fixed training-time budget: our Transformer against keras-hub's.

The entry point of `python -m benchmarks.translation.multi30k`: the parent's run (the
vocabularies, each model's worker, the report, the JSON and the plot), or with `--worker NAME`
one model's worker. The package's docstring says what the study runs.
"""

import os
import sys
from pathlib import Path

from benchmarks.harness import flags, machine, results
from benchmarks.translation.multi30k.data import prepare_vocabularies
from benchmarks.translation.multi30k.report import comparison, plot_curves, print_report
from benchmarks.translation.multi30k.settings import build_parser, check_args
from benchmarks.translation.multi30k.worker import run_worker, run_workers

# The packages whose versions the JSON records: {JSON key: distribution name}.
VERSIONS = {
    "tensorflow": "tensorflow",
    "tensorflow_text": "tensorflow-text",
    "keras": "keras",
    "keras_hub": "keras-hub",
    "sacrebleu": "sacrebleu",
    "numpy": "numpy",
}


def parse_args(argv=None):
    """The study's flags, checked and completed (`argv`: `sys.argv[1:]` when `None`), the flags given as `args.argv`."""
    parser = build_parser()
    return check_args(parser, flags.parse(parser, argv))


def run_parent(args):
    """Vocabularies, then each model's worker (given the parent's flags), then the report, the JSON and the plot."""
    start = results.start()
    print(f"Precision: {args.precision_choice.describe()}", flush=True)
    if args.precision_choice.warning:
        print(args.precision_choice.warning, flush=True)
    vocabularies = prepare_vocabularies(args)
    model_results = run_workers(args, args.argv, __package__)
    print_report(args, model_results, start.cpu)
    settings = {key: value for key, value in vars(args).items() if key not in ("worker", "precision_choice", "argv")}
    report = {
        "config": {key: str(value) if isinstance(value, Path) else value for key, value in settings.items()},
        "command": results.command_line(__package__, args.argv),
        "versions": machine.package_versions(VERSIONS),
        **machine.machine(start.cpu),
        "precision": args.precision_choice.to_dict(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "vocabularies": vocabularies,
        "models": model_results,
        "wall_seconds": {"total": round(start.seconds(), 1), "vocabularies": vocabularies["seconds"]},
    }
    if len(model_results) == 2:
        report["comparison"] = comparison(model_results)
    out, plot = results.write_json(flags.output_path(args), report), flags.output_path(args, ".png")
    plot_curves(args, model_results, plot)
    print(f"wrote {out} and {plot}")
    if report.get("comparison", {}).get("same_batches") is False:
        print("error: the two models did not train on the same batches", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    """The parent's run, or with `--worker NAME` one model's worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
