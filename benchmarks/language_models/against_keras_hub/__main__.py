"""The command line of the study: `python -m benchmarks.language_models.against_keras_hub` (see `__init__`)."""

import argparse
import sys

from benchmarks.harness import flags, machine, results
from benchmarks.harness.language_workload import FIRST_PIECE_ID, KINDS, MODELS
from benchmarks.language_models.against_keras_hub.parent import race, start_workers
from benchmarks.language_models.against_keras_hub.report import print_report, results_json
from benchmarks.language_models.against_keras_hub.worker import run_worker
from keras_transformer.config import LanguageModelConfig, TrainConfig


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__)
    flags.add_config_flags(
        parser,
        TrainConfig,
        "training (TrainConfig fields)",
        fields=("preset", "batch_size", "precision", "jit_compile"),
        defaults={"preset": "small", "batch_size": 16, "precision": "auto", "jit_compile": False},
    )
    flags.add_config_flags(
        parser,
        LanguageModelConfig,
        "models (LanguageModelConfig fields)",
        fields=("vocab_size", "learned_positions"),
        defaults={"vocab_size": 8000, "learned_positions": True},
    )
    study = parser.add_argument_group("the study")
    study.add_argument("--length", type=int, default=64, help="Training sequence length T.")
    study.add_argument("--prompt-length", type=int, default=16, help="Tokens of every prompt (generation).")
    study.add_argument("--new-tokens", type=int, default=48, help="Tokens generated after every prompt.")
    study.add_argument(
        "--kinds",
        type=flags.parse_list(str, choices=KINDS),
        default=",".join(KINDS),
        help="Comma-separated subset of: decoder,encoder.",
    )
    study.add_argument("--steps", type=int, default=10, help="Training steps per round.")
    study.add_argument("--rounds", type=int, default=5, help="Counted rounds per model (training and generation).")
    study.add_argument("--warmup-rounds", type=int, default=1, help="Training rounds run first and not counted.")
    study.add_argument("--batches", type=int, default=8, help="Distinct synthetic batches, cycled.")
    study.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    flags.add_seed_flags(study, help="Seed of the weights, batches and prompts.")
    flags.add_output_flags(study, __package__, "language_models")
    parser.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    return parser


def parse_args(argv=None):
    """The study's flags, checked (`argv`: `sys.argv[1:]` when `None`).

    `--learned-positions false` runs ours with the tutorial's sinusoids (GPT-2 and BERT learn theirs).
    """
    parser = build_parser()
    args = flags.parse(parser, argv)  # `args.argv`: the workers get the same flags
    args.kinds = [kind for kind in KINDS if kind in args.kinds]
    flags.check_at_least(parser, args, ("steps", "rounds", "batches", "peak_size"), 1)
    flags.check_at_least(parser, args, ("prompt_length", "new_tokens"), 1)
    flags.check_at_least(parser, args, ("warmup_rounds",), 0)
    flags.check_at_least(parser, args, ("length",), 3)  # a masked-LM row is <s> piece </s> at least
    flags.check_at_least(parser, args, ("vocab_size",), FIRST_PIECE_ID + 2)
    flags.config_from_flags(parser, args, TrainConfig, task="lm")  # --preset, --batch-size, --precision, ...
    return args


def main(argv=None):
    """The parent's run (peak, training, generation, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = machine.cpu_info()
    workers, ready = start_workers(args)
    precision = ready["ours"]["precision"]
    print(f"precision {args.precision}: {precision['policy']} ({precision['reason']})", flush=True)
    peak, training, generation = race(args, workers, ready)
    print_report(args, cpu, precision, peak, training, generation)
    data = results_json(args, cpu, precision, peak, training, generation)
    print(f"wrote {results.write_json(flags.output_path(args), data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
