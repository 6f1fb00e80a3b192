"""Soft against hard attention on the key-value lookup task: how fast each learns, how noisy its gradient.

    python benchmarks/hard_attention.py                          # 12 variants, 1000 steps, seeds 0, 1, 2
    python benchmarks/hard_attention.py --steps 100 --seeds 0    # a quick check
    python benchmarks/hard_attention.py --help                   # every flag

The task (`keras_transformer.data.lookup`): a dictionary of `--pairs` key-value pairs and a query
key; the answer is the value stored under it, so exactly one position holds it. The model
(`keras_transformer.models.lookup.KeyValueLookup`): key, query and value embeddings of width
`--width`, one `Attention` read (key-value mode, `--score`), a dense classifier over the value
symbols. The variants differ only in how the score function is trained:

    soft       the weighted average, differentiated exactly
    gumbel     hard: a sampled read, straight-through Gumbel-softmax gradient
    argmax     hard: the argmax read in training too, so the score function gets no gradient
               (a control)
    reinforce_...  hard: sampled reads, the REINFORCE (score-function) gradient with one of the
               variance reductions of `keras_transformer.layers.reinforce` (`--variants` takes
               any of them; the defaults take them all):
        reinforce_plain       no baseline: R itself
        reinforce_learned     a learned scalar baseline, regressed on R
        reinforce_value       an input-dependent baseline: a value head on the query, regressed on R
        reinforce_entropy     the learned baseline and an entropy bonus of weight 0.01
        reinforce_normalized  the learned baseline, advantages normalised over the batch
        reinforce_batch_mean  the mean reward of the batch's other examples
        reinforce_loo2/4/8    2, 4 or 8 reads per example, each one's baseline the mean reward
                              of the example's other reads (leave-one-out)
    reinforce  the model's default estimator (`KeyValueLookup`'s `DEFAULT_REINFORCE`)

What runs (`lookup_study.compare_variants`, TensorFlow backend, float32): for
each seed, every variant starts from the same initial weights and trains with Adam on the same
stream of `--steps` x `--batch-size` new examples. Every `--every` steps (and before the first)
it records the accuracy on `--held-out` unseen examples, read with `training=False` (hard
variants: the argmax), and the noise of the gradient the optimizer gets for the score function's
weights (key and query embeddings): over `--gradient-batches` fresh minibatches at the current
weights, the total variance tr Cov[g] and the noise-to-signal ratio tr Cov[g] / |mean g|^2.

Output: a table on stdout (per variant, the mean over seeds of the accuracy at four points of the
run, the steps to reach 90% accuracy per seed and the reads that took (steps x batch x reads
per example), the gradient variance at the shared initial weights and its median over the run,
seconds per run), the JSON `hard_attention.json` (settings,
versions, CPU model and flags, every seed's curves) and a two-panel PNG (`hard_attention.png`:
accuracy and gradient variance against steps, the mean of the seeds) in the `--out` folder.
The defaults take about 9 minutes on 2 CPU cores.
"""

import argparse
import sys
from pathlib import Path

import common
import numpy as np
from lookup_study import (
    REINFORCE_ESTIMATORS,
    STUDY_VARIANTS,
    add_task_flags,
    check_task_flags,
    compare_variants,
    task_settings,
    write_results,
)

DEFAULT_VARIANTS = ("soft", "gumbel", "argmax", *REINFORCE_ESTIMATORS)

TARGET_ACCURACY = 0.9


def parse_args(argv=None):
    """The command line's flags, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    add_task_flags(parser, "--variants", DEFAULT_VARIANTS, STUDY_VARIANTS, steps=1000, every=50)
    parser.add_argument("--score", default="dot", help="The attention's score function.")
    parser.add_argument("--gradient-batches", type=int, default=20, help="Minibatches per gradient-noise measurement.")
    args = parser.parse_args(argv)
    check_task_flags(parser, args, "--variants", STUDY_VARIANTS, held_out_minimum=2)
    common.check_at_least(parser, args, ["gradient_batches"], 2)
    return args


def steps_to(curve, target=TARGET_ACCURACY):
    """The first measured step at which the accuracy reached `target`, or None."""
    return next((step for step, accuracy in zip(curve["steps"], curve["accuracy"]) if accuracy >= target), None)


def summarise(args, studies):
    """Per variant, the figures of the table from every seed's curves."""
    steps = studies[0]["variants"][args.variants[0]]["steps"]
    marks = sorted({steps[min(len(steps) - 1, round(len(steps) * fraction))] for fraction in (0.1, 0.25, 0.5, 1.0)})
    summary = {}
    for variant in args.variants:
        runs = [study["variants"][variant] for study in studies]
        variances = np.array([[noise["variance"] for noise in run["noise"]] for run in runs])  # (seeds, points)
        accuracy = np.array([run["accuracy"] for run in runs]).mean(axis=0)  # (points,): mean over seeds
        summary[variant] = {
            "accuracy_at": {str(mark): float(accuracy[steps.index(mark)]) for mark in marks},
            "steps_to_target": [steps_to(run) for run in runs],
            "samples": runs[0]["samples"],
            "initial_gradient_variance": float(variances[:, 0].mean()),
            "median_gradient_variance": float(np.median(variances[:, 1:])) if variances.shape[1] > 1 else None,
            "seconds": float(np.mean([run["seconds"] for run in runs])),
        }
    return marks, summary


def print_report(args, marks, summary, cpu):
    """The table: accuracy at the marks, steps to 90%, gradient variance, seconds."""
    print()
    print(
        f"key-value lookup: {args.pairs} pairs, {args.num_keys} keys, {args.num_values} values, width {args.width}, "
        f"{args.score} score, {args.steps} Adam steps of {args.batch_size} (lr {args.learning_rate}), "
        f"seeds {','.join(map(str, args.seeds))}, float32"
    )
    print(common.cpu_line(cpu))
    header = (
        f"{'variant':<21}"
        + "".join(f"{'acc@' + str(mark):>10}" for mark in marks)
        + f"{'steps to 90%':>18}{'reads to 90%':>22}{'grad var @0':>13}{'median var':>12}{'s/run':>7}"
    )
    print(header)
    print("-" * len(header))
    for variant, row in summary.items():
        reached = ",".join("never" if step is None else str(step) for step in row["steps_to_target"])
        reads = ",".join(
            "never" if step is None else str(step * args.batch_size * row["samples"]) for step in row["steps_to_target"]
        )
        median = row["median_gradient_variance"]
        print(
            f"{variant:<21}"
            + "".join(f"{row['accuracy_at'][str(mark)]:>10.3f}" for mark in marks)
            + f"{reached:>18}{reads:>22}{row['initial_gradient_variance']:>13.2e}"
            + (f"{median:>12.2e}" if median is not None else f"{'-':>12}")
            + f"{row['seconds']:>7.1f}"
        )
    print(f"(accuracy: mean over seeds, held-out, read with training=False; chance {1 / args.num_values:.3f})")


def plot(path, args, studies):
    """Accuracy and gradient variance against steps, the mean of the seeds, one colour per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (accuracy_axes, variance_axes) = plt.subplots(1, 2, figsize=(13, 5))
    colours = plt.get_cmap("tab20").colors
    for index, variant in enumerate(args.variants):
        runs = [study["variants"][variant] for study in studies]
        steps = runs[0]["steps"]
        accuracy = np.mean([run["accuracy"] for run in runs], axis=0)
        variances = np.mean([[noise["variance"] for noise in run["noise"]] for run in runs], axis=0)
        style = dict(color=colours[index % len(colours)], linewidth=1.4, label=variant)
        style["linestyle"] = "--" if variant.startswith("reinforce_loo") else "-"
        accuracy_axes.plot(steps, accuracy, **style)
        variance_axes.plot(steps, np.where(variances > 0, variances, np.nan), **style)
    accuracy_axes.axhline(1 / args.num_values, color="grey", linestyle=":", linewidth=0.8, label="chance")
    accuracy_axes.axhline(TARGET_ACCURACY, color="grey", linestyle="-.", linewidth=0.8, label="90%")
    accuracy_axes.set(xlabel="training step", ylabel="held-out accuracy")
    accuracy_axes.set_title("learning the lookup (mean of the seeds)")
    variance_axes.set(xlabel="training step", ylabel="tr Cov of the score gradient", yscale="log")
    variance_axes.set_title("gradient noise over minibatches (argmax: none, no gradient)")
    accuracy_axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None):
    """Run the study for every seed, print the table, write the JSON and the plot."""
    args = parse_args(argv)
    cpu = common.cpu_info()
    settings = task_settings(args, "score", "gradient_batches")
    studies = [compare_variants(args.variants, seed=seed, **settings) for seed in args.seeds]
    marks, summary = summarise(args, studies)
    print_report(args, marks, summary, cpu)
    runs = [study["variants"] for study in studies]
    names = {"variants": args.variants}
    written = write_results(args, argv, settings, names, summary, runs, "hard_attention.json", cpu)
    print(f"results: {written}")
    plot(Path(args.out) / "hard_attention.png", args, studies)
    print(f"plot: {Path(args.out) / 'hard_attention.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
