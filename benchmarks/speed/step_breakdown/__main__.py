"""The command line of the study: `python -m benchmarks.speed.step_breakdown` (see `__init__`).

XLA reads `XLA_FLAGS` when it first compiles: `main` sets the HLO dump after parsing the flags and
before anything runs on the backend; the modules that build and run the model are imported then.
"""

import os
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import flags
from benchmarks.harness.training_workload import TASKS
from keras_transformer.config import PRECISIONS, ModelConfig, TrainConfig

DUMP_FLAG = "--xla_dump_to"


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(
        __package__,
        epilog="Without --attention-dropout-rate the preset's (the tutorial's) dropout on the attention weights "
        "runs; 0 lets the fused attention run in training where auto chooses it.",
    )
    flags.add_config_flags(
        parser, TrainConfig, "model size (TrainConfig fields)", fields=("preset",), defaults={"preset": "small"}
    )
    flags.add_config_flags(parser, ModelConfig, "model (ModelConfig fields)", fields=("attention_dropout_rate",))
    study = parser.add_argument_group("the study")
    study.add_argument(
        "--task", default="translation", choices=TASKS, help="Our encoder-decoder or decoder-only model."
    )
    study.add_argument(
        "--precision", default="float32", choices=[p for p in PRECISIONS if p != "auto"], help="Dtype policy."
    )
    study.add_argument("--vocab-size", type=int, default=8000, help="Vocabulary size V.")
    study.add_argument("--length", type=int, nargs="+", default=[64, 256, 1024], help="Sequence lengths to break down.")
    study.add_argument("--tokens-per-step", type=int, default=4096, help="Batch size at each length = this // length.")
    study.add_argument("--steps", type=int, default=10, help="Training steps per timed round.")
    study.add_argument("--rounds", type=int, default=3, help="Timed rounds per length (the median step).")
    study.add_argument("--trace-steps", type=int, default=3, help="Steps traced by the profiler per length.")
    study.add_argument("--batches", type=int, default=4, help="Distinct synthetic batches, cycled.")
    study.add_argument("--top", type=int, default=12, help="Ops listed per length, the longest first.")
    study.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    study.add_argument(
        "--threads",
        default="towers",
        choices=["towers", "default"],
        help="TensorFlow's threads: towers (as train.py and train_throughput's ours set them: one training tower "
        "per core where that applies, the matmul peak measured in a process of its own) or TensorFlow's default.",
    )
    study.add_argument(
        "--trace", help="Keep the profiler traces and the HLO dump in this folder (default: a temporary one)."
    )
    flags.add_seed_flags(study, help="Seed of the weights and the batches.")
    flags.add_output_flags(study, __package__, "step_breakdown")
    return parser


def parse_args(argv=None):
    """The study's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(
        parser, args, ("vocab_size", "steps", "rounds", "trace_steps", "batches", "top", "peak_size"), 1
    )
    for length in args.length:
        if length < 2 or args.tokens_per_step < length:
            parser.error(
                f"every --length must be >= 2 and <= --tokens-per-step ({args.tokens_per_step}). Received: {length}"
            )
    # --preset, --precision, --seed and --attention-dropout-rate, checked by the configs' own rules.
    task = {"task": "lm", "vocab_size": args.vocab_size}
    if args.task != "lm":
        task = {"task": "translate", "vocab_size": TrainConfig.vocab_size}
        task.update(source_vocab_size=args.vocab_size, target_vocab_size=args.vocab_size)
    flags.config_from_flags(parser, args, TrainConfig, **task)
    flags.config_from_flags(parser, args, ModelConfig)
    args.attention_dropout_rate = getattr(args, "attention_dropout_rate", None)  # None: the preset's
    args.batch_size = None  # what the workload reads: the batch of a length is --tokens-per-step // length
    return args


def set_hlo_dump(trace):
    """Have XLA dump the train step's optimized HLO as text; returns the run's folder.

    The folder is `trace` (`--trace`) or a new temporary one; the dump goes to its `hlo/`.
    """
    folder = Path(trace) if trace else Path(tempfile.mkdtemp(prefix="step_breakdown_"))
    xla_flags = os.environ.get("XLA_FLAGS", "")
    if DUMP_FLAG in xla_flags:
        sys.exit(f"XLA_FLAGS already sets {DUMP_FLAG}; step_breakdown sets it itself (to {folder / 'hlo'})")
    dump = f"{DUMP_FLAG}={folder / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    os.environ["XLA_FLAGS"] = f"{xla_flags} {dump}".strip()
    return folder


def main(argv=None):
    """Parse the flags, set XLA's HLO dump, then break the step down at every length; print and write the JSON.

    `XLA_FLAGS` is given back as it was at the end (JAX read it when it started).
    """
    args = parse_args(argv)
    xla_flags = os.environ.get("XLA_FLAGS")
    try:
        return run(args, set_hlo_dump(args.trace))
    finally:
        if xla_flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = xla_flags


def run(args, folder):
    """`main`'s run, with the HLO dump set (into `folder`/hlo)."""
    import keras

    from benchmarks.harness import machine, results
    from benchmarks.harness.matmul_peak import matmul_peaks, matmul_peaks_elsewhere, peak_dtypes
    from benchmarks.speed.step_breakdown.measure import device_kind, run_length
    from benchmarks.speed.step_breakdown.report import print_report

    if keras.backend.backend() not in ("jax", "tensorflow"):
        sys.exit(f"step_breakdown traces JAX's or TensorFlow's step; Keras runs {keras.backend.backend()}")
    cpu = machine.cpu_info()
    towers = 1
    if keras.backend.backend() == "tensorflow" and args.threads == "towers":
        from keras_transformer.training.threads import configure_cpu_threads

        peak = matmul_peaks_elsewhere(args.peak_size, peak_dtypes([args.precision]))
        towers = configure_cpu_threads()
    else:
        peak = matmul_peaks(args.peak_size, peak_dtypes([args.precision]))
    lengths = []
    for length in args.length:
        print(f"length {length}: building, compiling, timing, tracing", flush=True)
        result = run_length(args, length, peak, folder)
        result["device"], result["towers"] = device_kind(), towers
        lengths.append(result)
    print_report(args, lengths, peak, cpu)
    written = {
        "command": results.command_line(__package__, args.argv),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "argv"},
        "backend": keras.backend.backend(),
        "device": lengths[0]["device"],
        "versions": machine.package_versions(
            {"keras": "keras", "jax": "jax", "tensorflow": "tensorflow", "numpy": "numpy"}
        ),
        **machine.machine(cpu),
        "matmul_peak_flops": peak,
        "lengths": lengths,
    }
    print(f"wrote {results.write_json(flags.output_path(args), written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
