"""The command line of the study: `python -m benchmarks.attention_family.scores` (see `__init__`)."""

import sys

from benchmarks.attention_family.scores.report import print_scores_report, scores_json, summarise_scores
from benchmarks.attention_family.scores.train import train_every_run
from benchmarks.harness import flags, results, timing
from keras_transformer.config import ATTENTION_SCORES, TrainConfig

DESCRIPTION = (
    "Trains the Transformer on the built-in dates corpus once per score function and seed, at the same size "
    "and number of steps, and reports test exact match, BLEU, ms per step and parameters (see the package "
    "docstring)."
)
# The study's defaults of the TrainConfig fields it offers; the others keep train.py's defaults.
DEFAULTS = {"preset": "small", "epochs": 4, "steps_per_epoch": 200, "train_size": 0, "test_size": 0, "beam_size": 4}


def build_parser():
    """The study's flags: the TrainConfig fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__, DESCRIPTION)
    parser.add_argument(
        "--scores",
        type=flags.parse_list(str, choices=ATTENTION_SCORES),
        default=",".join(ATTENTION_SCORES),
        help="Comma-separated score functions to train (the model config's attention_score).",
    )
    flags.add_config_flags(
        parser, TrainConfig, "every run (TrainConfig fields)", fields=tuple(DEFAULTS), defaults=DEFAULTS
    )
    study = parser.add_argument_group("the study")
    flags.add_seed_flags(
        study,
        default=(0, 1),
        several=True,
        help="Each seed generates the corpus, shuffles it and initializes the weights.",
    )
    flags.add_output_flags(study, __package__, "attention_scores")
    return parser


def parse_args(argv=None):
    """The study's flags, checked by `TrainConfig.validate` (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.config_from_flags(parser, args, TrainConfig, precision="float32")
    flags.check_tensorflow(parser)
    return args


def main(argv=None):
    """Train every (seed, score), report, write the JSON."""
    args = parse_args(argv)
    start = results.start()
    order = timing.run_orders(args.scores, args.seeds)
    runs_done = train_every_run(args, order)
    wall = start.seconds()
    scores = summarise_scores(args, runs_done)
    print_scores_report(args, scores, start.cpu)
    print(f"wall time {wall / 60:.1f} min")
    data = scores_json(args, order, runs_done, scores, start, wall)
    print(f"wrote {results.write_json(flags.output_path(args), data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
