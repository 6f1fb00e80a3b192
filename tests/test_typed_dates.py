"""Tests for keras_transformer.data.typed_dates (the held-out typed dates) and `benchmarks.translation.typed_dates`.

Each category is checked against the surface form it was made from (it differs in the claimed way
and only in it) and, with the independent parser of test_dates.py, against its target date.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_dates import parse_source

from keras_transformer.data import dates, typed_dates
from keras_transformer.data.date_words import MONTH_NAMES, WEEKDAY_NAMES
from keras_transformer.data.dates import builtin_corpus
from keras_transformer.data.typed_dates import CATEGORIES, typed_date_set
from keras_transformer.evaluation import score_typed_dates

SIZE = 150


def _rendered_and_typed(category, size=SIZE, seed=0):
    """`(rendered, typed)` pairs: the generator's form of each example's date, and the example."""
    sources, _, renderings = typed_dates._category_examples(category, size, seed, with_renderings=True)
    return list(zip(renderings, sources, strict=True))


def _letters(word):
    return re.search(r"[A-Za-z]", word) is not None


def _letters_words(text):
    return re.findall(r"[A-Za-z]+", text)


def _is_title(word):
    """Every run of letters capitalised, except an ordinal suffix ("21st")."""
    return all(part[0].isupper() and part[1:].islower() for part in re.findall(r"(?:^|[^0-9A-Za-z])([A-Za-z]+)", word))


CLAIMS = {
    "lowercase": lambda rendered, typed: typed == rendered.lower(),
    "uppercase": lambda rendered, typed: typed == rendered.upper(),
    "title_case": lambda rendered, typed: (
        typed.lower() == rendered.lower() and all(_is_title(word) for word in typed.split())
    ),
    "capitalised_names": lambda rendered, typed: (
        typed.lower() == rendered.lower()
        and all(
            word == word.capitalize() if word.lower() in MONTH_NAMES + WEEKDAY_NAMES else word.islower()
            for word in _letters_words(typed)
            if len(word) > 3
        )
    ),
    "mixed_case": lambda rendered, typed: (
        typed.lower() == rendered.lower()
        and len({"upper" if w.isupper() else "lower" if w.islower() else "title" for w in typed.split() if _letters(w)})
        > 1
    ),
    "extra_spaces": lambda rendered, typed: typed.split() == rendered.split() and "  " in typed,
    "spaced_punctuation": lambda rendered, typed: (
        typed.replace(" ", "") == rendered.replace(" ", "")
        and re.search(r"[^ ][,./]|[,./][^ ]|[0-9]-|-[0-9]", typed) is None
    ),
    "missing_spaces": lambda rendered, typed: (
        typed.replace(" ", "") == rendered.replace(" ", "")
        and re.search(r", |[A-Za-z] [0-9]|[0-9] [A-Za-z]", typed) is None
    ),
    "no_commas": lambda rendered, typed: "," not in typed and typed == rendered.replace(",", ""),
    "zero_padding_flipped": lambda rendered, typed: (
        [int(number) for number in re.findall(r"[0-9]+", typed)]
        == [int(number) for number in re.findall(r"[0-9]+", rendered)]
        and any(
            len(a) != len(b) for a, b in zip(re.findall(r"[0-9]+", typed), re.findall(r"[0-9]+", rendered), strict=True)
        )
    ),
}


@pytest.mark.parametrize("category", list(CLAIMS))
def test_category_differs_from_the_generated_form_as_claimed(category):
    for rendered, typed in _rendered_and_typed(category):
        assert typed != rendered, (category, typed)
        assert CLAIMS[category](rendered, typed), (category, rendered, typed)


def test_generated_and_canonical_categories():
    for rendered, typed in _rendered_and_typed("generated"):
        assert typed == rendered
    sources, targets = typed_date_set(SIZE, categories=("canonical",))["canonical"]
    assert sources == targets


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_example_means_its_target(category):
    sources, targets = typed_date_set(SIZE, categories=(category,))[category]
    assert len(sources) == len(targets) == SIZE
    for source, target in zip(sources, targets, strict=True):
        assert parse_source(source)[0].isoformat() == target, (category, source, target)


def test_categories_in_order_and_no_source_repeats_within_one():
    examples = typed_date_set(SIZE)
    assert tuple(examples) == CATEGORIES
    for sources, _ in examples.values():
        assert len(set(sources)) == len(sources)


@pytest.mark.parametrize("seed", [0, 1])
def test_held_out_from_the_training_split(seed):
    train_sources, train_targets = builtin_corpus("train", seed=seed)
    test_dates = {date.isoformat() for date in dates._dates_by_split(seed)["test"]}
    for sources, targets in typed_date_set(SIZE, seed=seed).values():
        assert set(targets) <= test_dates
        assert not set(targets) & set(train_targets)
        assert not set(sources) & set(train_sources)


def test_deterministic_across_processes_and_seeded():
    code = "from keras_transformer.data.typed_dates import typed_date_set; print(repr(typed_date_set(20, seed=3)))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
            cwd=ROOT,
        ).stdout
        for hash_seed in (1, 2)
    }
    assert outputs == {repr(typed_date_set(20, seed=3)) + "\n"}
    assert typed_date_set(20, seed=3) != typed_date_set(20, seed=4)
    small, large = typed_date_set(5), typed_date_set(20)
    assert all(small[category] == (large[category][0][:5], large[category][1][:5]) for category in CATEGORIES)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match=r"`categories` must be some of \(.*Received: categories=\(.shouting.,\)"):
        typed_date_set(3, categories=("shouting",))
    with pytest.raises(ValueError, match="size_per_category"):
        typed_date_set(-1)
    assert typed_date_set(0, categories=("uppercase",)) == {"uppercase": ([], [])}


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------
def _reader(source):
    """What a perfect model answers: the date the independent parser reads."""
    return parse_source(source)[0].isoformat()


def test_scores_count_exact_matches_per_category():
    examples = typed_date_set(10, categories=("uppercase", "extra_spaces", "canonical"))
    perfect = score_typed_dates(lambda texts: [" " + _reader(text) + " " for text in texts], examples)
    assert {category: score["exact_match"] for category, score in perfect.items()} == dict.fromkeys(
        ["uppercase", "extra_spaces", "canonical", "all"], 1.0
    )
    # A copying model is right exactly on the canonical dates.
    copying = score_typed_dates(lambda texts: texts, examples)
    assert [copying[category]["exact_match"] for category in examples] == [0.0, 0.0, 1.0]
    assert copying["all"] == {"sentences": 30, "exact_match": 1 / 3, "wrong": []}
    source, target = examples["uppercase"][0][0], examples["uppercase"][1][0]
    assert copying["uppercase"]["wrong"][0] == (source, source, target)


@pytest.mark.slow
def test_benchmark_scores_an_export_as_its_run(trained_run, tmp_path, capsys):
    """The script gives the same scores from the run dir and from its export, and says so in its JSON."""
    from benchmarks.translation.typed_dates import __main__ as script

    train_config, summary = trained_run
    flags = ["--per-category", "4", "--test-split", "6", "--categories", "uppercase,canonical"]
    results = []
    for model in (["--run-dir", train_config.run_dir], ["--model", str(pathlib.Path(summary["export_path"]).parent)]):
        out = tmp_path / model[0].strip("-")
        assert script.main([*model, *flags, "--out", str(out)]) == 0
        results.append(json.loads((out / "typed_dates.json").read_text()))
    table = capsys.readouterr().out
    assert "| uppercase |" in table and "| canonical |" in table and "| generated test split |" in table
    by_run, by_export = [result["scores"] for result in results]
    assert list(by_run) == ["uppercase", "canonical", "all", "generated test split"]
    assert by_run == by_export
    assert [by_run[name]["sentences"] for name in by_run] == [4, 4, 8, 6]
    for name, score in by_run.items():
        if name != "all":
            assert score["exact_match"] == 1 - len(score["wrong"]) / score["sentences"]
    assert results[0]["machine"]["cpu"]["model"]
