r"""Multi30k German->English in a fixed training-time budget: our Transformer against keras-hub's.

    python benchmarks/multi30k.py --data path/to/multi30k --minutes 30
    python benchmarks/multi30k.py --data path/to/multi30k --minutes 0.5 --preset tiny --vocab 2000 \
        --train-size 3000 --test-size 100 --curve-points 2 --curve-sentences 50        # a quick check

`--data` is a folder with Multi30k's `{train,val,test_2016_flickr}.{de,en}.gz`, read only.
`python benchmarks/multi30k.py --help` lists the flags (`multi30k_flags`). One run, three steps:

1. The parent process learns, from the training split only, the WordPiece vocabularies of both
   models (`multi30k_data`): one of both sides' text, used on both sides (`--joint-vocab on`,
   the default with our one embedding table), or one per side. They are cached in `--work-dir`
   and learned outside every budget.
2. Each model of `--models`, ours and keras-hub's (`multi30k_models`), is trained and scored in
   its own subprocess, one after the other, so that each gets every core and its own peak memory
   (`multi30k_worker`: this script again, with `--worker NAME`). Both train with the same loss,
   optimizer and schedule on the same batches, in the same order, for `--minutes` of training
   clock, and are scored along the way on a BLEU curve (`multi30k_train`). Then the whole
   test_2016_flickr split is translated with each model's final decoding (ours: beam search;
   keras-hub's: greedy) and scored with sacreBLEU and chrF (`multi30k_scoring`).
3. The parent prints both models side by side under a header that names the CPU model and its
   matmul flags (`multi30k_report`), writes the results as JSON (`--out`, with the package
   versions, the CPU model and all its flags from /proc/cpuinfo, and the precision chosen) and
   plots BLEU against training minutes (`--plot`).

The measurements, and how the defaults were chosen, are in benchmarks/README.md ("Multi30k BLEU
in a time budget").
"""

import argparse
import os
import sys
import time
from pathlib import Path

import common
from multi30k_data import prepare_vocabularies
from multi30k_flags import (
    add_corpus_and_schedule_flags,
    add_measurement_and_output_flags,
    add_model_and_decoding_flags,
    check_args,
)
from multi30k_report import comparison, plot_curves, print_report
from multi30k_worker import run_worker, run_workers

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
    """The benchmark's flags, checked and completed (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    add_corpus_and_schedule_flags(parser)
    add_model_and_decoding_flags(parser)
    add_measurement_and_output_flags(parser)
    return check_args(parser, parser.parse_args(argv))


def run_parent(args, argv):
    """Vocabularies, then each model's worker, then the report, the JSON and the plot."""
    started = time.perf_counter()
    cpu = common.cpu_info()
    print(f"Precision: {args.precision_choice.describe()}", flush=True)
    if args.precision_choice.warning:
        print(args.precision_choice.warning, flush=True)
    vocabularies = prepare_vocabularies(args)
    results = run_workers(args, argv, __file__)
    print_report(args, results, cpu)
    report = {
        "config": {key: value for key, value in vars(args).items() if key not in ("worker", "precision_choice")},
        "command": common.command_line(argv),
        "versions": common.package_versions(VERSIONS),
        **common.machine(cpu),
        "precision": args.precision_choice.to_dict(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "vocabularies": vocabularies,
        "models": results,
        "wall_seconds": {"total": round(time.perf_counter() - started, 1), "vocabularies": vocabularies["seconds"]},
    }
    if len(results) == 2:
        report["comparison"] = comparison(results)
    out, plot = common.write_json(args.out, report), Path(args.plot)
    plot_curves(args, results, plot)
    print(f"wrote {out} and {plot}")
    if report.get("comparison", {}).get("same_batches") is False:
        print("error: the two models did not train on the same batches", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    """The parent's run, or with `--worker NAME` one model's worker."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    return run_parent(args, argv)


if __name__ == "__main__":
    sys.exit(main())
