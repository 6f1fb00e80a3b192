"""The command line of the study: `python -m benchmarks.language_models.pretraining` (see `__init__`)."""

import sys

import numpy as np

from benchmarks.harness import flags, machine, results
from benchmarks.language_models.pretraining.study import ARMS, CORPORA, compare_pretraining
from keras_transformer.config import LanguageModelConfig, TrainConfig
from keras_transformer.data.date_classification import DATE_LABELS
from keras_transformer.precision import choose_precision

# `compare_pretraining`'s arguments that the flags set, by the argument's name: the flag's attribute.
STUDY_FLAGS = {
    "corpus": "corpus", "label": "label", "preset": "preset", "vocab_size": "vocab_size", "corpus_size": "corpus_size",
    "label_counts": "label_counts", "validation_size": "validation_size", "test_size": "test_size",
    "pretrain_max_steps": "pretrain_max_steps", "every": "every", "plateau": "plateau", "batch_size": "batch_size",
    "mask_rate": "mask_rate", "seq_len": "max_length", "pretrain_warmup_steps": "pretrain_warmup_steps",
    "finetune_batch_size": "finetune_batch_size", "finetune_epochs": "finetune_epochs",
    "finetune_min_steps": "finetune_min_steps", "finetune_max_steps": "finetune_max_steps",
    "finetune_warmup_steps": "finetune_warmup_steps", "finetune_scales": "finetune_scales",
}  # fmt: skip
# What differs between the corpora: the dates are longer texts of more distinct pieces.
CORPUS_DEFAULTS = {"topics": {"max_length": 12, "vocab_size": 600}, "dates": {"max_length": 36, "vocab_size": 400}}
ARM_NAMES = {"fine_tuned": "MLM pre-trained, fine-tuned", "scratch": "from scratch", "probe": "linear probe (frozen)"}


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__)
    parser.add_argument("--corpus", default="topics", choices=CORPORA, help="The unlabeled text and the task.")
    parser.add_argument("--label", default="decade", choices=tuple(DATE_LABELS), help="With --corpus dates: the class.")
    flags.add_config_flags(
        parser,
        TrainConfig,
        "pre-training (TrainConfig fields)",
        fields=("preset", "vocab_size", "batch_size", "validation_size", "test_size", "precision"),
        defaults={"preset": "small", "vocab_size": None, "batch_size": 256, "validation_size": 500, "test_size": 1000},
    )
    flags.add_config_flags(
        parser, LanguageModelConfig, "the encoder (LanguageModelConfig fields)", fields=("max_length",),
        defaults={"max_length": None},
    )  # fmt: skip
    for action in parser._actions:  # without the flag, the corpus decides
        if action.dest in ("vocab_size", "max_length"):
            by_corpus = ", ".join(f"{corpus} {values[action.dest]}" for corpus, values in CORPUS_DEFAULTS.items())
            action.help = action.help.replace("(default: None)", f"(default by --corpus: {by_corpus})")
    study = parser.add_argument_group("the study")
    flags.add_seed_flags(study, default=(0, 1, 2), several=True, help="Corpus, weights, shuffling, masking.")
    study.add_argument(
        "--label-counts",
        type=flags.parse_list(int),
        default="30,100,300,1000,3000",
        help="Comma-separated numbers of labelled examples.",
    )
    study.add_argument("--corpus-size", type=int, default=20000, help="Unlabeled training texts (pre-training).")
    study.add_argument("--pretrain-max-steps", type=int, default=3000, help="The masked LM's most steps.")
    study.add_argument("--every", type=int, default=200, help="Steps between two masked-LM validation measurements.")
    study.add_argument(
        "--plateau", type=float, default=0.005, help="Stop the masked LM when its accuracy gained less over 20%%."
    )
    study.add_argument("--mask-rate", type=float, default=0.3, help="Share of the pieces the masked LM hides.")
    study.add_argument("--pretrain-warmup-steps", type=int, default=200, help="Pre-training's Noam warm-up.")
    study.add_argument("--finetune-batch-size", type=int, default=32, help="Examples per classification step.")
    study.add_argument("--finetune-epochs", type=float, default=5, help="Passes over the labelled examples.")
    study.add_argument("--finetune-min-steps", type=int, default=150, help="The fewest classification steps.")
    study.add_argument("--finetune-max-steps", type=int, default=500, help="The most classification steps.")
    study.add_argument("--finetune-warmup-steps", type=int, default=50, help="Classification's Noam warm-up.")
    study.add_argument(
        "--finetune-scales",
        type=flags.parse_list(float),
        default="0.3,1.0",
        help="Comma-separated Noam scales; validation chooses one per arm.",
    )
    flags.add_output_flags(study, __package__, "pretraining")
    return parser


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    for name, value in CORPUS_DEFAULTS[args.corpus].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    flags.check_at_least(
        parser,
        args,
        ["pretrain_max_steps", "every", "batch_size", "corpus_size", "finetune_batch_size", "finetune_min_steps"],
        1,
    )
    flags.check_at_least(parser, args, ["validation_size", "test_size"], 2)
    flags.check_at_least(parser, args, ["max_length"], 3)
    # The fields' own rules (--preset, --vocab-size, --batch-size, --precision, --max-length); --corpus is ours.
    flags.config_from_flags(parser, args, TrainConfig, task="mlm", corpus="builtin")
    flags.config_from_flags(parser, args, LanguageModelConfig, kind="encoder")
    if args.pretrain_max_steps % args.every:
        parser.error(f"--pretrain-max-steps must be a multiple of --every={args.every}")
    if args.finetune_max_steps < args.finetune_min_steps:
        parser.error("--finetune-max-steps must be at least --finetune-min-steps")
    if not all(1 <= count <= args.corpus_size for count in args.label_counts):
        parser.error(f"--label-counts must be in [1, --corpus-size]. Received: {args.label_counts}")
    if not all(scale > 0 for scale in args.finetune_scales) or not args.finetune_epochs > 0:
        parser.error("--finetune-scales and --finetune-epochs must be positive")
    if not 0 < args.mask_rate < 1:
        parser.error(f"--mask-rate must be in (0, 1). Received: {args.mask_rate}")
    return args


def summarise(args, studies):
    """Per label count and arm: each seed's test accuracy and chosen scale, their mean, min and max.

    Returns:
        `{"curve": {count: {"steps", arm: {"test_accuracy", "mean", "min", "max", "chosen_scale"}}},
        "pretraining": {"validation_accuracy", "chosen_steps", "levelled_off", "seconds"}}`, lists
        one entry per seed.
    """
    curve = {}
    for count in map(str, args.label_counts):
        entry = {"steps": studies[0]["curve"][count]["steps"]}
        for arm in ARMS:
            runs = [study["curve"][count][arm] for study in studies]
            accuracy = [run["test_accuracy"] for run in runs]
            entry[arm] = {
                "test_accuracy": accuracy,
                "mean": float(np.mean(accuracy)),
                "min": min(accuracy),
                "max": max(accuracy),
                "chosen_scale": [run["chosen_scale"] for run in runs],
            }
        curve[count] = entry
    pretraining = {
        "validation_accuracy": [study["pretraining"]["validation_accuracy"][-1] for study in studies],
        "chosen_steps": [study["pretraining"]["chosen_steps"] for study in studies],
        "levelled_off": [study["pretraining"]["levelled_off"] for study in studies],
        "seconds": [study["pretraining"]["seconds"] for study in studies],
    }
    return {"curve": curve, "pretraining": pretraining}


def _task(args, settings):
    if args.corpus == "topics":
        return f"the topic of a sentence ({len(settings['classes'])} classes, chance {settings['chance']:.3f})"
    return f"the {args.label} of a typed date ({len(settings['classes'])} classes, chance {settings['chance']:.3f})"


def print_report(args, choice, summary, studies, cpu):
    """The table: per label count and arm, the mean test accuracy over seeds, each seed's, the chosen scales."""
    settings = studies[0]["settings"]
    seeds = ",".join(map(str, args.seeds))
    print()
    print(
        f"{_task(args, settings)}; {args.preset} encoder, vocabulary {settings['learned_vocab_size']}, MLM on "
        f"{args.corpus_size} texts (batch {args.batch_size}, {args.mask_rate:.0%} masked), seeds {seeds}, "
        f"{choice.describe()}"
    )
    print(machine.cpu_line(cpu))
    pre = summary["pretraining"]
    print(
        "masked LM, per seed: validation accuracy "
        + "/".join(f"{value:.3f}" for value in pre["validation_accuracy"])
        + " after "
        + "/".join(map(str, pre["chosen_steps"]))
        + " steps (levelled off: "
        + "/".join("yes" if value else "no" for value in pre["levelled_off"])
        + f"), {np.mean(pre['seconds']):.0f} s/run"
    )
    header = f"{'labels':>7}{'steps':>7}  {'arm':<28}{'mean':>7}  {'per seed':<22}{'scale per seed':<16}"
    print(header)
    print("-" * len(header))
    for count, entry in summary["curve"].items():
        for arm in ARMS:
            row = entry[arm]
            per_seed = "/".join(f"{value:.3f}" for value in row["test_accuracy"])
            scales = "/".join(f"{value:g}" for value in row["chosen_scale"])
            print(f"{count:>7}{entry['steps']:>7}  {ARM_NAMES[arm]:<28}{row['mean']:>7.3f}  {per_seed:<22}{scales:<16}")
    rates = ", ".join(
        f"{scale:g}: {rate:.2g}" for scale, rate in zip(args.finetune_scales, settings["peak_learning_rates"])
    )
    print(f"(test accuracy; the scale chosen on validation; peak learning rate of each scale: {rates})")


def plot(path, args, summary, settings):
    """Test accuracy against label count, log x axis: per arm the mean of the seeds and their min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    counts = [int(count) for count in summary["curve"]]
    for index, arm in enumerate(ARMS):
        rows = [summary["curve"][str(count)][arm] for count in counts]
        color = f"C{index}"
        axes.plot(counts, [row["mean"] for row in rows], marker="o", color=color, label=ARM_NAMES[arm])
        axes.fill_between(counts, [row["min"] for row in rows], [row["max"] for row in rows], color=color, alpha=0.2)
    axes.axhline(settings["chance"], color="grey", linestyle="-.", linewidth=0.8, label="chance")
    axes.set_xscale("log")
    axes.set(
        xlabel="labelled training examples (log scale)",
        ylabel="test accuracy",
        title=f"{args.corpus}: mean of seeds {','.join(map(str, args.seeds))}, band from min to max",
    )
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None):
    """Run the study for every seed, print the table, write the JSON and the plot."""
    args = parse_args(argv)
    cpu = machine.cpu_info()
    choice = choose_precision(args.precision, cpu=cpu)
    if choice.warning:
        print(choice.warning)
    settings = {argument: getattr(args, name) for argument, name in STUDY_FLAGS.items()}
    studies = []
    for seed in args.seeds:
        studies.append(compare_pretraining(**settings, precision=choice.policy, seed=seed))
        print(f"seed {seed} done", flush=True)
    summary = summarise(args, studies)
    print_report(args, choice, summary, studies, cpu)
    data = {
        "command": results.command_line(__package__, args.argv),
        "settings": {**studies[0]["settings"], "seeds": args.seeds, "precision": choice.to_dict()},
        "machine": machine.machine(cpu),
        "versions": machine.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        "summary": summary,
        "runs": {str(seed): study for seed, study in zip(args.seeds, studies)},
    }
    del data["settings"]["seed"]
    figure = flags.output_path(args, ".png")
    figure.parent.mkdir(parents=True, exist_ok=True)
    plot(figure, args, summary, studies[0]["settings"])
    for run in data["runs"].values():
        del run["settings"]  # the same but for the seed, which is the key
    print(f"results: {results.write_json(flags.output_path(args), data)}")
    print(f"plot: {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
