"""Every attention score trained on the key-value lookup task: how fast each learns and what its maps become.

    python -m benchmarks.attention_family.lookup.scores                          # 5 scores, 500 steps, seeds 0, 1, 2
    python -m benchmarks.attention_family.lookup.scores --steps 100 --seeds 0    # a quick check
    python -m benchmarks.attention_family.lookup.scores --help                   # every flag

The task (`keras_transformer.data.lookup`): a dictionary of `--pairs` key-value pairs and a query
key; the answer is the value under it, so one pair holds it. The model
(`keras_transformer.models.lookup.KeyValueLookup`, soft attention): key, query and value
embeddings of width `--width`, one `Attention` read in key-value mode with the score function
under test (`--scores`: scaled_dot, dot, additive, bilinear, cosine), a dense classifier.

What runs (`keras_transformer.training.lookup.compare_scores`, TensorFlow backend, float32): for
each seed, every score starts from the same embeddings and read-out (the score's own weights are
its own) and trains with Adam on the same stream of `--steps` x `--batch-size` new examples.
Held-out accuracy every `--every` steps; before and after training, on `--held-out` unseen
examples, what the read does: the mean attention weight on the pair that holds the answer, how
often that pair has the highest weight, and the mean entropy of the weights (log P nats: uniform;
0: all on one pair).

Output: a table on stdout (per score, the steps to 90% per seed, the final accuracy, and the three
figures before and after training, means over seeds), the JSON (`--name`.json, `lookup_scores.json`
by default: settings, versions, CPU model and flags, every seed's curves, figures and the first
maps) and a PNG (`lookup_scores.png`: for the first seed, each score's maps over 8 held-out
examples before and after training, the answer's pair marked) in the `--out` folder (the lookup
studies' `results/`, which holds the figure docs/benchmarks/scoring.md shows). The defaults take
about a minute on 2 CPU cores.
"""

import sys

import numpy as np

from benchmarks.attention_family.lookup.study import (
    PACKAGE,
    add_task_flags,
    check_task_flags,
    task_settings,
    write_results,
)
from benchmarks.harness import flags, machine
from keras_transformer.config import ATTENTION_SCORES
from keras_transformer.training.lookup import compare_scores

# The module the command runs (`__name__` is "__main__" when it runs).
MODULE = f"{PACKAGE}.scores"

FIGURES = ("weight_on_answer", "answer_is_argmax", "entropy")


def build_parser():
    """The study's flags: the scores, and the task's and its training's."""
    parser = flags.study_parser(MODULE, __doc__)
    add_task_flags(parser, "--scores", ATTENTION_SCORES, ATTENTION_SCORES, steps=500, every=25, name="lookup_scores")
    return parser


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    check_task_flags(parser, args, held_out_minimum=8)
    return args


def summarise(args, studies):
    """Per score: steps to 90% per seed, the final accuracy and the figures before and after, means over seeds."""
    summary = {}
    for score in args.scores:
        runs = [study["scores"][score] for study in studies]
        summary[score] = {
            "steps_to_90": [run["steps_to_90"] for run in runs],
            "final_accuracy": float(np.mean([run["accuracy"][-1] for run in runs])),
            **{
                f"{when}_{figure}": float(np.mean([run[when][figure] for run in runs]))
                for when in ("before", "after")
                for figure in FIGURES
            },
            "seconds": float(np.mean([run["seconds"] for run in runs])),
        }
    return summary


def print_report(args, summary, cpu):
    """The table: steps to 90%, final accuracy, weight on the answer, argmax on it, entropy."""
    print()
    print(
        f"key-value lookup, soft attention: {args.pairs} pairs, {args.num_keys} keys, {args.num_values} values, "
        f"width {args.width}, {args.steps} Adam steps of {args.batch_size} (lr {args.adam_learning_rate}), "
        f"seeds {','.join(map(str, args.seeds))}, float32"
    )
    print(machine.cpu_line(cpu))
    header = (
        f"{'score':<11}{'steps to 90%':>16}{'accuracy':>10}{'weight on answer':>20}"
        f"{'answer is argmax':>20}{'entropy (nats)':>18}{'s/run':>7}"
    )
    print(header)
    print("-" * len(header))
    for score, row in summary.items():
        reached = ",".join("never" if step is None else str(step) for step in row["steps_to_90"])
        cells = [f"{row['before_' + figure]:.3f} -> {row['after_' + figure]:.3f}" for figure in FIGURES]
        print(
            f"{score:<11}{reached:>16}{row['final_accuracy']:>10.3f}{cells[0]:>20}{cells[1]:>20}{cells[2]:>18}"
            f"{row['seconds']:>7.1f}"
        )
    print(f"(before -> after training, held-out, means over seeds; uniform weights: entropy {np.log(args.pairs):.3f})")


def draw_maps(axes_rows, study, scores):
    """Each score's maps before and after training in two rows of axes, the answer's pair boxed.

    Args:
        axes_rows: two sequences of matplotlib axes, one per score each: before, after.
        study: a `compare_scores` result.
        scores: the score names, in the axes' order.

    Returns:
        the last image drawn, for a colour bar (every map shares the scale 0 to 1).
    """
    from matplotlib.patches import Rectangle

    positions = study["positions"]
    for column, score in enumerate(scores):
        run = study["scores"][score]
        for row, (when, maps) in enumerate((("untrained", run["maps_before"]), ("trained", run["maps_after"]))):
            axes = axes_rows[row][column]
            image = axes.imshow(np.array(maps), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            for example, position in enumerate(positions):
                axes.add_patch(Rectangle((position - 0.5, example - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.2))
            axes.set_title(f"{score}, {when}", fontsize=9)
            axes.set_xlabel("pair")
            axes.set_ylabel("example" if column == 0 else "")
    return image


def plot(path, args, studies):
    """The first seed's maps, before and after training, one column per score."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(args.scores), figsize=(3 * len(args.scores), 5.5), squeeze=False)
    image = draw_maps(axes, studies[0], args.scores)
    figure.suptitle(f"attention weights over the pairs, seed {args.seeds[0]} (red: the pair that holds the answer)")
    figure.tight_layout()
    figure.colorbar(image, ax=axes, label="attention weight", fraction=0.02)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None):
    """Run the study for every seed, print the table, write the JSON and the maps."""
    args = parse_args(argv)
    cpu = machine.cpu_info()
    settings = task_settings(args)
    studies = [compare_scores(args.scores, seed=seed, **settings) for seed in args.seeds]
    summary = summarise(args, studies)
    print_report(args, summary, cpu)
    written = write_results(args, MODULE, settings, {"scores": args.scores}, summary, studies, cpu)
    print(f"results: {written}")
    figure = flags.output_path(args, ".png")
    plot(figure, args, studies)
    print(f"maps: {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
