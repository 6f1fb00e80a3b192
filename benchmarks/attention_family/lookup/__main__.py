"""Soft against hard attention: `python -m benchmarks.attention_family.lookup` (see `__init__`)."""

import sys

import numpy as np

from benchmarks.attention_family.lookup.study import add_task_flags, check_task_flags, task_settings, write_results
from benchmarks.harness import flags, machine
from keras_transformer.config import ModelConfig
from keras_transformer.training.lookup import REINFORCE_ESTIMATORS, STUDY_VARIANTS, compare_variants

DESCRIPTION = "Soft against hard attention on the key-value lookup task: how fast each learns, how noisy its gradient."

DEFAULT_VARIANTS = ("soft", "gumbel", "argmax", *REINFORCE_ESTIMATORS)

TARGET_ACCURACY = 0.9


def build_parser():
    """The study's flags: the variants, the task's and the configs' (by their fields' names), the noise's."""
    parser = flags.study_parser(__package__, DESCRIPTION)
    add_task_flags(parser, "--variants", DEFAULT_VARIANTS, STUDY_VARIANTS, steps=1000, every=50, name="hard_attention")
    flags.add_config_flags(
        parser,
        ModelConfig,
        "the read (ModelConfig fields)",
        fields=("attention_score",),
        defaults={"attention_score": "dot"},
    )
    parser.add_argument("--gradient-batches", type=int, default=20, help="Minibatches per gradient-noise measurement.")
    return parser


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    check_task_flags(parser, args, held_out_minimum=2)
    flags.check_at_least(parser, args, ["gradient_batches"], 2)
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
        f"{args.attention_score} score, {args.steps} Adam steps of {args.batch_size} (lr {args.adam_learning_rate}), "
        f"seeds {','.join(map(str, args.seeds))}, float32"
    )
    print(machine.cpu_line(cpu))
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
    cpu = machine.cpu_info()
    settings = {
        **task_settings(args),
        "attention_score": args.attention_score,
        "gradient_batches": args.gradient_batches,
    }
    studies = [compare_variants(args.variants, seed=seed, **settings) for seed in args.seeds]
    marks, summary = summarise(args, studies)
    print_report(args, marks, summary, cpu)
    runs = [study["variants"] for study in studies]
    written = write_results(args, __package__, settings, {"variants": args.variants}, summary, runs, cpu)
    print(f"results: {written}")
    figure = flags.output_path(args, ".png")
    plot(figure, args, studies)
    print(f"plot: {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
