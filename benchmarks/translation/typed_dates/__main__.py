"""The command line of the study: `python -m benchmarks.translation.typed_dates` (see `__init__`)."""

import sys
import time
from pathlib import Path

from benchmarks.harness import flags, machine, results
from keras_transformer.data.dates import builtin_corpus
from keras_transformer.data.typed_dates import CATEGORIES, DEFAULT_SIZE_PER_CATEGORY, typed_date_set
from keras_transformer.evaluation import score_typed_dates

TEST_SPLIT = "generated test split"


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = flags.study_parser(__package__)
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", type=Path, help="SavedModel folder, or a model folder of integer versions.")
    model.add_argument("--run-dir", type=Path, help="A finished training run (its model, vocabularies and settings).")
    parser.add_argument("--per-category", type=int, default=DEFAULT_SIZE_PER_CATEGORY, help="Examples per category.")
    flags.add_seed_flags(parser, default=None, help="Corpus seed whose test dates to use (default: the run's, or 0).")
    parser.add_argument("--categories", default=",".join(CATEGORIES), help="Comma-separated categories to score.")
    parser.add_argument("--test-split", type=int, default=1000, help="Sentences of the generated test split; 0: none.")
    parser.add_argument("--show-wrong", type=int, default=3, help="Wrong translations to print per category.")
    flags.add_output_flags(parser, __package__, "typed_dates")
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("per_category",), 1)
    flags.check_at_least(parser, args, ("test_split", "show_wrong"), 0)
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
    args = parse_args(argv)
    cpu = machine.cpu_info()
    print(machine.cpu_line(cpu))
    translate, seed, description = load_translate(args)
    start = time.perf_counter()
    scores, examples = score(translate, args, seed)
    seconds = time.perf_counter() - start
    print(f"{description}, corpus seed {seed}, {seconds:.0f} s")
    print("\n".join(report(scores, examples, args.show_wrong)))
    path = results.write_json(
        flags.output_path(args),
        {
            "command": results.command_line(__package__, args.argv),
            "model": description,
            "seed": seed,
            "per_category": args.per_category,
            "seconds": round(seconds, 1),
            "machine": machine.machine(cpu),
            "versions": machine.package_versions({"tensorflow": "tensorflow", "keras": "keras"}),
            "scores": scores,
        },
    )
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
