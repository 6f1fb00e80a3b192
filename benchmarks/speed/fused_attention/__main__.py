"""The command line of the study: `python -m benchmarks.speed.fused_attention` (see `__init__`)."""

import sys

import keras

from benchmarks.harness import flags, machine, results
from benchmarks.speed.fused_attention.measure import measure


def build_parser():
    """The command line."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--lengths", type=flags.parse_list(int, unique=False), default="64,256,1024", help="Comma-separated lengths T."
    )
    parser.add_argument("--tokens", type=int, default=4096, help="Tokens per batch (batch = tokens / T, at least 1).")
    parser.add_argument("--width", type=int, default=512, help="Model width D.")
    parser.add_argument("--heads", type=int, default=8, help="Heads H (D / H per head).")
    parser.add_argument("--steps", type=int, default=5, help="Timed steps of each implementation per round.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of alternating implementations.")
    flags.add_output_flags(parser, __package__, "fused_attention_speed")
    return parser


def parse_args(argv=None):
    """The flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    if min(args.lengths) < 1:
        parser.error(f"--lengths must be positive ints. Received: {','.join(map(str, args.lengths))}")
    flags.check_at_least(parser, args, ("tokens", "width", "heads", "steps", "rounds"), 1)
    if args.width % args.heads:
        parser.error(f"--width must be divisible by --heads. Received: {args.width}, {args.heads}")
    return args


def main(argv=None):
    """Run the comparison; returns the exit status."""
    args = parse_args(argv)
    start = results.start()
    backend = keras.backend.backend()
    runs = []
    for length in args.lengths:
        for causality in (False, True):
            runs.append(measure(args, length, causality))
            run = runs[-1]
            print(
                f"T {length:>5} causal {str(causality):<5} batch {run['batch']:>4}: explicit "
                f"{run['median_ms']['explicit']:8.1f} ms, fused {run['median_ms']['fused']:8.1f} ms, "
                f"fused / explicit speed {results.format_ratio(run['fused_over_explicit_speed'])}",
                flush=True,
            )
    print(f"\n{machine.cpu_line(start.cpu)}; Keras on {backend}")
    packages = {"keras": "keras", "numpy": "numpy", backend: backend}
    data = {
        **results.record_header(__package__, args, start, packages=packages),
        "backend": backend,
        "runs": runs,
    }
    print(f"wrote {results.write_json(flags.output_path(args, extra=f'_{backend}'), data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
