"""Dates as people type them: a model's exact match per category of the held-out typed dates.

    python -m benchmarks.translation.typed_dates --model saved_models/transformer   # an export (latest version)
    python -m benchmarks.translation.typed_dates --run-dir runs/builtin             # a finished run
    python -m benchmarks.translation.typed_dates --help                             # every flag

The set (`keras_transformer.data.typed_dates.typed_date_set`): `--per-category` examples of each
category (lower case, UPPER CASE, Title Case, capitalised names, mixed case, extra spaces, spaced
punctuation, missing spaces, no commas, zero padding flipped, the canonical ISO date, and the
generator's own forms), made from the dates of the built-in corpus's test split for `--seed`, so
none of them was trained on by a run with that seed. The generated test split
(`builtin_corpus("test")`) is scored beside them for comparison.

Output: a Markdown table on stdout (category, example, sentences, exact match), a few wrong
translations per category, and the JSON `--name`.json (`typed_dates.json`) in the `--out` folder
(the study's `results/` by default: settings, versions, CPU model and flags, scores, every wrong
translation). A run dir decodes with its settings (beam 4 by default); an export decodes as it
was exported. 2,600 sentences take about a minute on 2 CPU cores with the small preset.
"""
