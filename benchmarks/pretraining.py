"""Masked-LM pre-training where labels are scarce: fine-tuned, from scratch and a linear probe, by label count.

    python benchmarks/pretraining.py                                  # topics, 30 .. 3,000 labels, seeds 0, 1, 2
    python benchmarks/pretraining.py --label-counts 30 --seeds 0 --pretrain-max-steps 400   # a quick check
    python benchmarks/pretraining.py --corpus dates --label decade    # the typed dates instead
    python benchmarks/pretraining.py --help                           # every flag

What runs (`pretraining_study.compare_pretraining`, TensorFlow backend), per seed: a WordPiece
vocabulary with `<mask>` learned from `--corpus-size` unlabeled texts of the corpus's train split
(`--corpus topics`: sentences of a small grammar whose words all belong to the sentence's topic,
`keras_transformer.data.topic_sentences`, the class the topic; `--corpus dates`: typed dates, the
class `--label`); an encoder-only model (`--preset`) pre-trained on them as a masked language
model until its masked-piece accuracy on validation texts levels off (gains less than
`--plateau` over the last 20% of its steps) or `--pretrain-max-steps`; then, at each of
`--label-counts`, three classifiers of the same architecture (a head on `<s>`) from the same
initial weights, trained on the same first labelled examples for the same steps:

    fine_tuned  the encoder's weights copied from the pre-trained model, all weights trained
    scratch     no pre-training, all weights trained
    probe       the pre-trained encoder frozen, only the head trained (a linear probe)

each at every Noam scale of `--finetune-scales`; the scale most accurate on the validation
examples is the arm's, and its accuracy on `--test-size` test examples is reported.

Output: a table on stdout (per label count and arm, the mean over seeds and each seed's test
accuracy, the chosen scales; the masked LM's validation accuracy and steps per seed), the JSON
`pretraining.json` (settings, the precision chosen and why, versions, CPU model and flags, every
seed's results) and a PNG (`pretraining.png`: test accuracy against label count, log x axis,
the mean of the seeds and their min-max band) in the `--out` folder.
"""

import argparse
import sys
from pathlib import Path

import common
import numpy as np
from pretraining_study import ARMS, CORPORA, compare_pretraining

from keras_transformer.config import PRECISIONS
from keras_transformer.data.date_classification import DATE_LABELS
from keras_transformer.precision import choose_precision

STUDY_FLAGS = (
    "corpus", "label", "preset", "vocab_size", "corpus_size", "label_counts", "validation_size", "test_size",
    "pretrain_max_steps", "every", "plateau", "batch_size", "mask_rate", "seq_len", "pretrain_warmup_steps",
    "finetune_batch_size", "finetune_epochs", "finetune_min_steps", "finetune_max_steps", "finetune_warmup_steps",
    "finetune_scales",
)  # fmt: skip
# What differs between the corpora: the dates are longer texts of more distinct pieces.
CORPUS_DEFAULTS = {"topics": {"seq_len": 12, "vocab_size": 600}, "dates": {"seq_len": 36, "vocab_size": 400}}
ARM_NAMES = {"fine_tuned": "MLM pre-trained, fine-tuned", "scratch": "from scratch", "probe": "linear probe (frozen)"}


def _numbers(parser, text, kind, flag):
    try:
        return [kind(value) for value in text.split(",")]
    except ValueError:
        parser.error(f"{flag} must be comma-separated numbers. Received: {text!r}")


def parse_args(argv=None):
    """The command line's flags, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--corpus", default="topics", choices=CORPORA, help="The unlabeled text and the task.")
    parser.add_argument("--label", default="decade", choices=tuple(DATE_LABELS), help="With --corpus dates: the class.")
    parser.add_argument("--preset", default="small", help="Model size preset (language_model_preset).")
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds: corpus, weights, shuffling, masking.")
    parser.add_argument(
        "--label-counts", default="30,100,300,1000,3000", help="Comma-separated numbers of labelled examples."
    )
    parser.add_argument("--vocab-size", type=int, help="Requested vocabulary size (with <mask>); default by corpus.")
    parser.add_argument("--corpus-size", type=int, default=20000, help="Unlabeled training texts (pre-training).")
    parser.add_argument("--validation-size", type=int, default=500, help="Validation examples (stopping, scales).")
    parser.add_argument("--test-size", type=int, default=1000, help="Test examples of the reported accuracy.")
    parser.add_argument("--pretrain-max-steps", type=int, default=3000, help="The masked LM's most steps.")
    parser.add_argument("--every", type=int, default=200, help="Steps between two masked-LM validation measurements.")
    parser.add_argument(
        "--plateau", type=float, default=0.005, help="Stop the masked LM when its accuracy gained less over 20%%."
    )
    parser.add_argument("--batch-size", type=int, default=256, help="Examples per masked-LM step.")
    parser.add_argument("--mask-rate", type=float, default=0.3, help="Share of the pieces the masked LM hides.")
    parser.add_argument("--seq-len", type=int, help="Tokens per row, <s> and </s> included; default by corpus.")
    parser.add_argument("--pretrain-warmup-steps", type=int, default=200, help="Pre-training's Noam warm-up.")
    parser.add_argument("--finetune-batch-size", type=int, default=32, help="Examples per classification step.")
    parser.add_argument("--finetune-epochs", type=float, default=5, help="Passes over the labelled examples.")
    parser.add_argument("--finetune-min-steps", type=int, default=150, help="The fewest classification steps.")
    parser.add_argument("--finetune-max-steps", type=int, default=500, help="The most classification steps.")
    parser.add_argument("--finetune-warmup-steps", type=int, default=50, help="Classification's Noam warm-up.")
    parser.add_argument(
        "--finetune-scales", default="0.3,1.0", help="Comma-separated Noam scales; validation chooses one per arm."
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="Keras dtype policy; auto: mixed_bfloat16 where bfloat16 is native, float32 elsewhere.",
    )
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results and the PNG plot.")
    args = parser.parse_args(argv)
    args.seeds = _numbers(parser, args.seeds, int, "--seeds")
    args.label_counts = _numbers(parser, args.label_counts, int, "--label-counts")
    args.finetune_scales = _numbers(parser, args.finetune_scales, float, "--finetune-scales")
    for name, value in CORPUS_DEFAULTS[args.corpus].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    common.check_at_least(
        parser,
        args,
        ["pretrain_max_steps", "every", "batch_size", "corpus_size", "finetune_batch_size", "finetune_min_steps"],
        1,
    )
    common.check_at_least(parser, args, ["validation_size", "test_size"], 2)
    common.check_at_least(parser, args, ["seq_len"], 3)
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
    print(common.cpu_line(cpu))
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
    cpu = common.cpu_info()
    choice = choose_precision(args.precision, cpu=cpu)
    if choice.warning:
        print(choice.warning)
    settings = {name: getattr(args, name) for name in STUDY_FLAGS}
    studies = []
    for seed in args.seeds:
        studies.append(compare_pretraining(**settings, precision=choice.policy, seed=seed))
        print(f"seed {seed} done", flush=True)
    summary = summarise(args, studies)
    print_report(args, choice, summary, studies, cpu)
    out = Path(args.out)
    data = {
        "command": common.command_line(sys.argv[1:] if argv is None else argv),
        "settings": {**studies[0]["settings"], "seeds": args.seeds, "precision": choice.to_dict()},
        "machine": common.machine(cpu),
        "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        "summary": summary,
        "runs": {str(seed): study for seed, study in zip(args.seeds, studies)},
    }
    del data["settings"]["seed"]
    plot(out / "pretraining.png", args, summary, studies[0]["settings"])
    for run in data["runs"].values():
        del run["settings"]  # the same but for the seed, which is the key
    print(f"results: {common.write_json(out / 'pretraining.json', data)}")
    print(f"plot: {out / 'pretraining.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
