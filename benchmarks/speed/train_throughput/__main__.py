"""The command line of the study: `python -m benchmarks.speed.train_throughput` (see `__init__`)."""

import argparse
import sys

import keras

from benchmarks.harness import flags, machine, results
from benchmarks.harness.language_workload import FIRST_PIECE_ID
from benchmarks.harness.matmul_peak import describe_peaks, matmul_peaks, peak_dtypes
from benchmarks.harness.training_workload import (
    MODELS,
    SHARED,
    TASKS,
    at_length,
    model_config,
    step_flops,
    target_tokens_per_step,
)
from benchmarks.speed.train_throughput.bleu import bleu_by_precision
from benchmarks.speed.train_throughput.report import print_report
from benchmarks.speed.train_throughput.rounds import compare
from benchmarks.speed.train_throughput.worker import run_worker
from keras_transformer.config import PRECISIONS, TrainConfig
from keras_transformer.precision import choose_precision


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__)
    flags.add_config_flags(
        parser,
        TrainConfig,
        "training (TrainConfig fields)",
        fields=("preset", "batch_size", "jit_compile"),
        defaults={"preset": "small", "batch_size": 64, "jit_compile": False},
    )
    study = parser.add_argument_group("the study")
    study.add_argument(
        "--task",
        default="translation",
        choices=TASKS,
        help="translation: encoder-decoder Transformers; lm: our decoder-only LM against keras-hub's GPT2Backbone.",
    )
    study.add_argument(
        "--precision",
        nargs="+",
        default=["float32", "auto"],
        choices=PRECISIONS,
        help="Dtype policies to compare in, one pair of workers each (default: float32 auto). auto is "
        "mixed_bfloat16 where the hardware computes bfloat16 natively and float32 elsewhere; a policy given twice "
        "runs once.",
    )
    study.add_argument(
        "--vocab-size", type=int, default=8000, help="Vocabulary size V: the source's and the target's (lm: the one)."
    )
    study.add_argument(
        "--length",
        type=int,
        nargs="+",
        default=[24],
        help="Padded source and target length S = T of a batch (lm: window length T); several lengths: a sweep.",
    )
    study.add_argument(
        "--tokens-per-step",
        type=int,
        help="Batch size at each length = this // length (instead of --batch-size): equal tokens per step.",
    )
    study.add_argument("--steps", type=int, default=20, help="Training steps per round.")
    study.add_argument("--rounds", type=int, default=7, help="Counted rounds per model.")
    study.add_argument("--warmup-rounds", type=int, default=1, help="Rounds run first and not counted.")
    study.add_argument("--batches", type=int, default=16, help="Distinct synthetic batches, cycled.")
    study.add_argument(
        "--models",
        type=flags.parse_list(str, choices=(*MODELS, SHARED)),
        default=",".join(MODELS),
        help=f"Comma-separated subset of: ours,keras-hub,{SHARED}. '{SHARED}' times what both models' steps "
        "share (embeddings, logits, loss, Adam; no blocks), which splits each step into blocks and the rest.",
    )
    study.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    study.add_argument(
        "--bleu-epochs",
        type=int,
        default=4,
        help="Epochs of the built-in-corpus BLEU run per precision (TensorFlow backend); 0 skips it.",
    )
    flags.add_seed_flags(study, help="Seed of the weights and the batches.")
    flags.add_output_flags(study, __package__, "train_throughput")
    parser.add_argument("--worker", choices=(*MODELS, SHARED), help=argparse.SUPPRESS)
    policies = [name for name in PRECISIONS if name != "auto"]  # a worker is given what auto chose
    parser.add_argument("--worker-precision", choices=policies, help=argparse.SUPPRESS)
    parser.add_argument("--worker-length", type=int, help=argparse.SUPPRESS)
    return parser


def parse_args(argv=None):
    """The study's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)  # `args.argv`: the workers get the same flags
    if args.task == "lm" and SHARED in args.models:
        parser.error(f"--models {SHARED} is the translation task's shared part; --task lm has none")
    flags.check_at_least(parser, args, ("vocab_size", "steps", "rounds", "batches", "peak_size"), 1)
    flags.check_at_least(parser, args, ("warmup_rounds",), 0)
    for length in args.length:
        if length < 2:
            parser.error(f"--length must be >= 2. Received: {length}")
        if args.tokens_per_step is not None and args.tokens_per_step < length:
            parser.error(
                f"--tokens-per-step must be >= every --length (a batch of one row at least). Received: "
                f"{args.tokens_per_step} with --length {length}"
            )
    args.length = list(dict.fromkeys(args.length))  # a length given twice runs once
    if args.task == "lm" and args.vocab_size < FIRST_PIECE_ID + 2:
        parser.error(
            f"--vocab-size must be >= {FIRST_PIECE_ID + 2} for --task lm (ids 0-4 are reserved). "
            f"Received: {args.vocab_size}"
        )
    # --preset, --batch-size, --jit-compile and --seed, checked by TrainConfig's own rules.
    task_fields = {"task": "lm", "vocab_size": args.vocab_size}
    if args.task != "lm":
        task_fields = {"task": "translate", "vocab_size": TrainConfig.vocab_size}
        task_fields.update(source_vocab_size=args.vocab_size, target_vocab_size=args.vocab_size)
    for precision in args.precision:
        flags.config_from_flags(parser, args, TrainConfig, precision=precision, **task_fields)
    return args


def choose_policies(args, cpu, accelerators=None):
    """The dtype policies to run: each `--precision` resolved (`choose_precision`), once each.

    Args:
        args: the parsed flags.
        cpu: a `machine.cpu_info()` result.
        accelerators: `keras_transformer.precision.visible_accelerators()`; asked when `None`.

    Returns:
        `(policies, choices)`: the distinct policies in the order of the flags, and the
        `PrecisionChoice` of each flag.
    """
    choices = [choose_precision(name, cpu, accelerators) for name in args.precision]
    return list(dict.fromkeys(choice.policy for choice in choices)), choices


def run_length(args, policies, peak):
    """One length of the sweep (`args` at that length): its batch, model FLOPs and each precision's comparison."""
    flops_per_step = step_flops(args, model_config(args), target_tokens_per_step(args))
    print(f"length {args.length}, batch {args.batch_size}: {flops_per_step / 1e9:.2f} GFLOP per step", flush=True)
    return {
        "length": args.length,
        "batch_size": args.batch_size,
        "model": model_config(args).to_dict(),
        "model_flops_per_step": flops_per_step,
        "precisions": {precision: compare(args, precision, flops_per_step, peak) for precision in policies},
    }


def main(argv=None):
    """The parent's run (peak, comparisons per length, BLEU, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = machine.cpu_info()
    policies, choices = choose_policies(args, cpu)
    for choice in choices:
        print(f"precision {choice.requested}: {choice.describe()}", flush=True)
        if choice.warning:
            print(choice.warning, flush=True)
    peak = matmul_peaks(args.peak_size, peak_dtypes(policies))
    print(f"matmul peak: {describe_peaks(peak)}", flush=True)
    sweep = [run_length(at_length(args, length), policies, peak) for length in args.length]
    bleu = {}
    if args.bleu_epochs and args.task == "translation" and keras.backend.backend() == "tensorflow":
        bleu = bleu_by_precision(args, policies)
    print_report(args, peak, sweep, cpu)
    config = {k: v for k, v in vars(args).items() if not k.startswith("worker") and k != "argv"}
    data = {
        "command": results.command_line(__package__, args.argv),
        "config": {**config, "out": str(args.out)},
        "backend": keras.backend.backend(),
        "versions": machine.package_versions(
            {"keras": "keras", "numpy": "numpy", "tensorflow": "tensorflow", "keras-hub": "keras-hub", "jax": "jax"}
        ),
        **machine.machine(cpu),
        "precision": [choice.to_dict() for choice in choices],
        "matmul_peak_flops": peak,
        "lengths": sweep,
        "bleu_by_precision": bleu,
    }
    print(f"wrote {results.write_json(flags.output_path(args), data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
