"""Dates as people type them: a model's exact match per category of the held-out typed dates.

    python benchmarks/typed_dates.py --model saved_models/transformer    # an export (latest version)
    python benchmarks/typed_dates.py --run-dir runs/builtin              # a finished run
    python benchmarks/typed_dates.py --help                              # every flag

The set (`keras_transformer.data.typed_dates.typed_date_set`): `--per-category` examples of each
category (lower case, UPPER CASE, Title Case, capitalised names, mixed case, extra spaces, spaced
punctuation, missing spaces, no commas, zero padding flipped, the canonical ISO date, and the
generator's own forms), made from the dates of the built-in corpus's test split for `--seed`, so
none of them was trained on by a run with that seed. The generated test split
(`builtin_corpus("test")`) is scored beside them for comparison.

Output: a Markdown table on stdout (category, example, sentences, exact match), a few wrong
translations per category, and the JSON `typed_dates.json` in the `--out` folder (settings,
versions, CPU model and flags, scores, every wrong translation). A run dir decodes with its
settings (beam 4 by default); an export decodes as it was exported. 2,600 sentences take about a
minute on 2 CPU cores with the small preset.
"""

import argparse
import sys
import time
from pathlib import Path

import common

from keras_transformer.data.dates import builtin_corpus
from keras_transformer.data.typed_dates import CATEGORIES, DEFAULT_SIZE_PER_CATEGORY, typed_date_set
from keras_transformer.evaluation import score_typed_dates

TEST_SPLIT = "generated test split"


def parse_args(argv=None):
    """The command line's flags, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", type=Path, help="SavedModel folder, or a model folder of integer versions.")
    model.add_argument("--run-dir", type=Path, help="A finished training run (its model, vocabularies and settings).")
    parser.add_argument("--per-category", type=int, default=DEFAULT_SIZE_PER_CATEGORY, help="Examples per category.")
    parser.add_argument(
        "--seed", type=int, default=None, help="Corpus seed whose test dates to use (default: the run's, or 0)."
    )
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="Comma-separated categories to score.")
    parser.add_argument("--test-split", type=int, default=1000, help="Sentences of the generated test split; 0: none.")
    parser.add_argument("--show-wrong", type=int, default=3, help="Wrong translations to print per category.")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="Folder of typed_dates.json.")
    args = parser.parse_args(argv)
    common.check_at_least(parser, args, ("per_category",), 1)
    common.check_at_least(parser, args, ("test_split", "show_wrong"), 0)
    args.categories = [name for name in args.categories.split(",") if name]
    unknown = sorted(set(args.categories) - set(CATEGORIES))
    if unknown or not args.categories:
        parser.error(f"--categories must be some of {', '.join(CATEGORIES)}. Received: {unknown or 'none'}")
    return args


def load_translate(args):
    """`(translate, seed, description)`: a function translating a list of str, the corpus seed, the model."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of the SavedModel)

    from keras_transformer.evaluation import translate_texts

    if args.run_dir is not None:
        from keras_transformer.runs import load_run

        train_config, _, _, translator = load_run(args.run_dir)
        seed = train_config.seed if args.seed is None else args.seed
        return (lambda texts: translate_texts(translator, texts)), seed, f"run {args.run_dir}"

    from keras_transformer.export import SIGNATURE_KEY, latest_version_dir

    version_dir = latest_version_dir(args.model)
    signature = tf.saved_model.load(str(version_dir)).signatures[SIGNATURE_KEY]

    def translate(texts, batch_size=256):
        outputs = []
        for start in range(0, len(texts), batch_size):
            batch = tf.constant(texts[start : start + batch_size], dtype=tf.string)
            outputs.extend(text.decode("utf-8") for text in signature(text=batch)["translation"].numpy())
        return outputs

    return translate, 0 if args.seed is None else args.seed, f"SavedModel {version_dir}"


def score(translate, args, seed):
    """`(scores, examples)`: the typed set's scores (with `"all"`), then the generated test split's."""
    examples = typed_date_set(args.per_category, seed=seed, categories=args.categories)
    scores = score_typed_dates(translate, examples)
    if args.test_split:
        examples[TEST_SPLIT] = builtin_corpus("test", size=args.test_split, seed=seed)
        scores[TEST_SPLIT] = score_typed_dates(translate, {TEST_SPLIT: examples[TEST_SPLIT]})[TEST_SPLIT]
    return scores, examples


def report(scores, examples, show_wrong):
    """The Markdown table and a few wrong translations, as lines."""
    lines = ["| category | example | sentences | exact match |", "|---|---|---:|---:|"]
    for category, score in scores.items():
        example = f"`{examples[category][0][0]!r}`" if category in examples and examples[category][0] else ""
        lines.append(f"| {category} | {example} | {score['sentences']} | {score['exact_match']:.1%} |")
    for category, score in scores.items():
        for source, hypothesis, reference in score["wrong"][:show_wrong]:
            lines.append(f"wrong ({category}): {source!r} -> {hypothesis!r} (reference {reference!r})")
    return lines


def main(argv=None):
    """Score a model on the typed dates; print the table and write the JSON."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    cpu = common.cpu_info()
    print(common.cpu_line(cpu))
    translate, seed, description = load_translate(args)
    start = time.perf_counter()
    scores, examples = score(translate, args, seed)
    seconds = time.perf_counter() - start
    print(f"{description}, corpus seed {seed}, {seconds:.0f} s")
    print("\n".join(report(scores, examples, args.show_wrong)))
    path = common.write_json(
        args.out / "typed_dates.json",
        {
            "command": common.command_line(argv),
            "model": description,
            "seed": seed,
            "per_category": args.per_category,
            "seconds": round(seconds, 1),
            "machine": common.machine(cpu),
            "versions": common.package_versions({"tensorflow": "tensorflow", "keras": "keras"}),
            "scores": scores,
        },
    )
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
