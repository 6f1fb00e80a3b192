"""Masked-LM pre-training against training from scratch, on a classification task with few labels.

    python benchmarks/pretraining.py                               # decade, small preset, seeds 0, 1
    python benchmarks/pretraining.py --pretrain-steps 100 --finetune-steps 50 --seeds 0   # a quick check
    python benchmarks/pretraining.py --help                        # every flag

What runs (`pretraining_study.compare_pretraining`, TensorFlow backend): per
seed, one WordPiece vocabulary with `<mask>` learned from `--corpus-size` typed dates of the
built-in corpus's train split; an encoder-only model (`--preset`) pre-trained as a masked
language model on that text for `--pretrain-steps` steps; then two classifiers of the same
architecture, a head on `<s>`, both from the same initial weights, trained on the same
`--labeled` labeled dates (`date_classification`, `--label`):

    fine_tuned  the encoder's weights copied from the pre-trained model, all weights trained
                for --finetune-steps steps
    scratch     no pre-training, trained for --pretrain-steps + --finetune-steps steps, read at
                --finetune-steps (equal fine-tuning steps) and at the end (equal total steps)

Every `--every` steps (and before the first) each classifier's accuracy on `--held-out`
validation dates (never in the pre-training text) is recorded.

Output: a table on stdout (per arm, the mean over seeds and each seed's held-out accuracy at a
few points, the pre-training's masked-LM accuracy, seconds), the JSON `pretraining.json`
(settings, the precision chosen and why, versions, CPU model and flags, every seed's curves)
and a PNG of the curves (`pretraining.png`) in the `--out` folder. The defaults took about 8
minutes per seed on 2 shared, heavily loaded CPU cores under `nice -n 19` (pre-training 148 s,
fine-tuning 89 s, scratch 180-210 s); an idle machine was not available to time.
"""

import argparse
import sys
from pathlib import Path

import common
import numpy as np
from pretraining_study import ARMS, compare_pretraining

from keras_transformer.config import PRECISIONS
from keras_transformer.data.date_classification import DATE_LABELS
from keras_transformer.precision import choose_precision

STUDY_FLAGS = (
    "label", "preset", "vocab_size", "corpus_size", "labeled", "held_out", "pretrain_steps", "finetune_steps",
    "every", "batch_size", "seq_len", "pretrain_warmup_steps", "finetune_warmup_steps", "finetune_scale",
)  # fmt: skip


def parse_args(argv=None):
    """The command line's flags, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--label", default="decade", choices=tuple(DATE_LABELS), help="What the classifier reads.")
    parser.add_argument("--preset", default="small", help="Model size preset (language_model_preset).")
    parser.add_argument("--seeds", default="0,1", help="Comma-separated seeds: corpus, weights, shuffling, masking.")
    parser.add_argument("--vocab-size", type=int, default=400, help="Requested vocabulary size (with <mask>).")
    parser.add_argument("--corpus-size", type=int, default=20000, help="Unlabeled training texts (pre-training).")
    parser.add_argument("--labeled", type=int, default=300, help="Labeled training dates of the classifiers.")
    parser.add_argument("--held-out", type=int, default=1000, help="Validation dates of each accuracy measurement.")
    parser.add_argument("--pretrain-steps", type=int, default=400, help="Masked-LM steps (P).")
    parser.add_argument(
        "--finetune-steps", type=int, default=200, help="Classification steps of the fine-tuned arm (F)."
    )
    parser.add_argument("--every", type=int, default=50, help="Steps between two accuracy measurements.")
    parser.add_argument("--batch-size", type=int, default=64, help="Examples per step, in both phases.")
    parser.add_argument("--seq-len", type=int, default=36, help="Tokens per row, <s> and </s> included.")
    parser.add_argument("--pretrain-warmup-steps", type=int, default=200, help="Pre-training's Noam warm-up.")
    parser.add_argument("--finetune-warmup-steps", type=int, default=100, help="Classification's Noam warm-up.")
    parser.add_argument("--finetune-scale", type=float, default=0.5, help="Classification's Noam scale.")
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="Keras dtype policy; auto: mixed_bfloat16 where bfloat16 is native, float32 elsewhere.",
    )
    parser.add_argument("--out", default="benchmarks/results", help="Folder of the JSON results and the PNG plot.")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers. Received: {args.seeds!r}")
    common.check_at_least(
        parser, args, ["labeled", "pretrain_steps", "finetune_steps", "every", "batch_size", "corpus_size"], 1
    )
    common.check_at_least(parser, args, ["held_out"], 2)
    common.check_at_least(parser, args, ["seq_len"], 3)
    for name in ("pretrain_steps", "finetune_steps"):
        if getattr(args, name) % args.every:
            parser.error(f"--{name.replace('_', '-')} must be a multiple of --every={args.every}")
    if not args.finetune_scale > 0:
        parser.error(f"--finetune-scale must be positive. Received: {args.finetune_scale}")
    return args


def summarise(args, studies):
    """Per arm, each seed's held-out accuracy at a few steps; the pre-training's MLM accuracy."""
    marks = sorted({args.every, args.finetune_steps // 2 // args.every * args.every or args.every, args.finetune_steps})
    marks.append(args.pretrain_steps + args.finetune_steps)
    summary = {}
    for arm in ARMS:
        runs = [study["arms"][arm] for study in studies]
        accuracy_at = {
            str(mark): [run["accuracy"][run["steps"].index(mark)] for run in runs]
            for mark in marks
            if mark in runs[0]["steps"]
        }
        summary[arm] = {"accuracy_at": accuracy_at, "seconds": float(np.mean([run["seconds"] for run in runs]))}
    summary["pretraining"] = {
        "mlm_accuracy": [study["pretraining"]["accuracy"] for study in studies],
        "seconds": float(np.mean([study["pretraining"]["seconds"] for study in studies])),
    }
    return marks, summary


def print_report(args, choice, marks, summary, studies, cpu):
    """The table: accuracy at the marks, mean over seeds (each seed's in brackets), seconds."""
    settings = studies[0]["settings"]
    print()
    print(
        f"{args.label} of a typed date ({len(settings['classes'])} classes, chance {settings['chance']:.3f}) from "
        f"{args.labeled} labeled dates; {args.preset} encoder, vocabulary {settings['learned_vocab_size']}, "
        f"MLM pre-training {args.pretrain_steps} steps on {args.corpus_size} texts, batch {args.batch_size}, "
        f"seeds {','.join(map(str, args.seeds))}, {choice.describe()}"
    )
    print(common.cpu_line(cpu))
    header = f"{'arm':<12}" + "".join(f"{'acc@' + str(mark):>22}" for mark in marks) + f"{'s/run':>8}"
    print(header)
    print("-" * len(header))
    for arm in ARMS:
        row = summary[arm]
        cells = []
        for mark in marks:
            values = row["accuracy_at"].get(str(mark))
            cells.append("-" if values is None else f"{np.mean(values):.3f} ({'/'.join(f'{v:.3f}' for v in values)})")
        print(f"{arm:<12}" + "".join(f"{cell:>22}" for cell in cells) + f"{row['seconds']:>8.1f}")
    pre = summary["pretraining"]
    print(
        f"(held-out accuracy, mean (per seed); pre-training: masked-LM accuracy "
        f"{'/'.join(f'{v:.3f}' for v in pre['mlm_accuracy'])} on its last batches, {pre['seconds']:.1f} s/run)"
    )


def plot(path, args, studies):
    """Held-out accuracy against classification steps, one colour per arm, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    names = {"fine_tuned": "MLM pre-trained, fine-tuned", "scratch": "from scratch"}
    for index, arm in enumerate(ARMS):
        for seed_index, study in enumerate(studies):
            run = study["arms"][arm]
            label = names[arm] if seed_index == 0 else None
            linestyle = "-" if seed_index == 0 else "--"
            axes.plot(run["steps"], run["accuracy"], color=f"C{index}", linestyle=linestyle, linewidth=1.3, label=label)
    axes.axvline(args.finetune_steps, color="grey", linestyle=":", linewidth=0.8)
    axes.axhline(studies[0]["settings"]["chance"], color="grey", linestyle="-.", linewidth=0.8, label="chance")
    axes.set(
        xlabel="classification training step",
        ylabel="held-out accuracy",
        title=f"{args.label} from {args.labeled} labeled dates (seeds: solid, dashed)",
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
    studies = [compare_pretraining(**settings, precision=choice.policy, seed=seed) for seed in args.seeds]
    marks, summary = summarise(args, studies)
    print_report(args, choice, marks, summary, studies, cpu)
    out = Path(args.out)
    data = {
        "command": common.command_line(sys.argv[1:] if argv is None else argv),
        "settings": {**studies[0]["settings"], "seeds": args.seeds, "precision": choice.to_dict()},
        "machine": common.machine(cpu),
        "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        "summary": summary,
        "runs": {
            str(seed): {key: study[key] for key in ("pretraining", "arms")} for seed, study in zip(args.seeds, studies)
        },
    }
    del data["settings"]["seed"]
    print(f"results: {common.write_json(out / 'pretraining.json', data)}")
    plot(out / "pretraining.png", args, studies)
    print(f"plot: {out / 'pretraining.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
