"""Tests for the built-in date corpus: keras_transformer.data.dates, date_forms and date_words.

Sources are checked with a parser written here independently of the module's
generator, so a wrong spelling or a wrong weekday cannot hide behind the same
code producing and checking it.
"""

import calendar
import collections
import datetime
import os
import pathlib
import random
import re
import subprocess
import sys
import time

import pytest

from keras_transformer.data import date_forms, date_words, dates
from keras_transformer.data.dates import SPLITS, builtin_corpus

# ---------------------------------------------------------------------------
# An independent parser for every surface form.
# ---------------------------------------------------------------------------
MONTHS = [calendar.month_name[number].lower() for number in range(1, 13)]
WEEKDAYS = [name.lower() for name in calendar.day_name]
UNIT_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS_WORDS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
ORDINAL_WORDS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh "
    "twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
    "nineteenth twentieth twenty-first twenty-second twenty-third twenty-fourth "
    "twenty-fifth twenty-sixth twenty-seventh twenty-eighth twenty-ninth "
    "thirtieth thirty-first"
).split()
FILLER_WORDS = {"the", "of", "day", "in", "year"}


def _word_below_100(word):
    """'seven' -> 7, 'forty' -> 40, 'eighty-seven' -> 87."""
    if word in UNIT_WORDS:
        return UNIT_WORDS.index(word)
    if word in TENS_WORDS:
        return TENS_WORDS[word]
    tens, units = word.split("-")
    assert units in UNIT_WORDS[1:10], word
    return TENS_WORDS[tens] + UNIT_WORDS.index(units)


def _parse_spoken_year(words):
    """Spoken year words -> int, e.g. ['nineteen', 'oh', 'five'] -> 1905."""
    if words[:2] == ["two", "thousand"]:
        rest = words[2:]
        if not rest:
            return 2000
        assert rest[0] == "and" and len(rest) == 2, words
        return 2000 + _word_below_100(rest[1])
    assert len(words) in (2, 3), words
    century = _word_below_100(words[0])
    assert century in (19, 20), words
    if words[1:] == ["hundred"]:
        return century * 100
    if words[1] == "oh":
        assert len(words) == 3 and words[2] in UNIT_WORDS[1:10], words
        return century * 100 + UNIT_WORDS.index(words[2])
    assert len(words) == 2, words
    rest = _word_below_100(words[1])
    assert rest >= 10, words
    return century * 100 + rest


def undo_typing(source):
    """`source` in lower case with one spelling of spaces and punctuation.

    Separators lose their spaces ("21 / 03" -> "21/03"), commas become spaces, and a number and
    a word typed together are split ("march21" -> "march 21"; an ordinal suffix stays: "21st").
    """
    text = re.sub(r"\s*([./-])\s*", r"\1", source.lower())
    text = re.sub(r"\s*,\s*", " ", text)
    text = re.sub(r"(?<=[a-z])(?=[0-9])", " ", text)
    text = re.sub(r"(?<=[0-9])(?!st|nd|rd|th)(?=[a-z])", " ", text)
    return " ".join(text.split())


def parse_source(source):
    """Parse any source the corpus produces, however typed; returns (date, weekday or None)."""
    source = undo_typing(source)
    match = re.fullmatch(r"(\d{1,2})([./-])(\d{1,2})\2(\d{4})", source)
    if match:
        return datetime.date(int(match[4]), int(match[3]), int(match[1])), None
    match = re.fullmatch(r"(\d{4})([/-])(\d{1,2})\2(\d{1,2})", source)
    if match:
        return datetime.date(int(match[1]), int(match[3]), int(match[4])), None
    match = re.fullmatch(r"(\d{1,2})-([a-z]{3})-(\d{4})", source)
    if match:
        month = [name[:3] for name in MONTHS].index(match[2]) + 1
        return datetime.date(int(match[3]), month, int(match[1])), None

    words = source.split()
    weekday = None
    if words[0] in WEEKDAYS or words[0] in [name[:3] for name in WEEKDAYS]:
        weekday = [name[:3] for name in WEEKDAYS].index(words[0][:3])
        words = words[1:]
    month_positions = [
        index for index, word in enumerate(words) if word in MONTHS or word in [name[:3] for name in MONTHS]
    ]
    assert len(month_positions) == 1, source
    month = [name[:3] for name in MONTHS].index(words[month_positions[0]][:3]) + 1
    rest = [word for index, word in enumerate(words) if index != month_positions[0] and word not in FILLER_WORDS]

    day = year = None
    year_words = []
    for word in rest:
        if re.fullmatch(r"\d{4}", word):
            year = int(word)
        elif re.fullmatch(r"\d{1,2}(st|nd|rd|th)?", word):
            digits = re.match(r"\d+", word)[0]
            if word != digits:  # check the ordinal suffix is the right one
                suffix = {"1": "st", "2": "nd", "3": "rd"}.get(digits[-1], "th")
                if digits in ("11", "12", "13"):
                    suffix = "th"
                assert word == digits + suffix, source
            day = int(digits)
        elif word in ORDINAL_WORDS:
            day = ORDINAL_WORDS.index(word) + 1
        else:
            year_words.append(word)
    if year_words:
        assert year is None, source
        year = _parse_spoken_year(year_words)
    assert day is not None and year is not None, source
    return datetime.date(year, month, day), weekday


def _format_counts(split, size, seed=0):
    return collections.Counter(name for _, name, _ in dates._sample(split, size, seed))


# ---------------------------------------------------------------------------
# Sizes, errors, determinism
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("split, expected", [("train", 20000), ("validation", 1000), ("test", 1000)])
def test_default_sizes(split, expected):
    sources, targets = builtin_corpus(split)
    assert len(sources) == len(targets) == expected
    assert all(isinstance(text, str) for text in sources + targets)


@pytest.mark.parametrize("size", [0, 1, 7, 2500])
def test_size_override(size):
    sources, targets = builtin_corpus("validation", size=size)
    assert len(sources) == len(targets) == size


def test_size_zero_gives_empty_lists():
    assert builtin_corpus("test", size=0) == ([], [])


def test_unknown_split_raises():
    with pytest.raises(ValueError, match=r"`split` must be one of \('train', 'validation', 'test'\). Received: split="):
        builtin_corpus("dev")


def test_negative_size_raises():
    with pytest.raises(ValueError, match=r"`size` must be an int >= 0. Received: size=-1"):
        builtin_corpus("train", size=-1)


def test_impossible_size_raises_instead_of_looping(monkeypatch):
    # With a single date per split and no typing variation only a few dozen distinct sources exist.
    one_date = (datetime.date(1987, 3, 21),)
    monkeypatch.setattr(dates, "_dates_by_split", lambda seed: dict.fromkeys(SPLITS, one_date))
    monkeypatch.setattr(dates, "_vary_typing", lambda text, rng: text)
    with pytest.raises(ValueError, match="distinct sources"):
        builtin_corpus("test", size=1000)


def test_same_call_gives_same_lists():
    assert builtin_corpus("train", size=2000, seed=3) == builtin_corpus("train", size=2000, seed=3)


def test_deterministic_across_processes():
    code = (
        "from keras_transformer.data.dates import builtin_corpus;print(repr(builtin_corpus('test', size=50, seed=5)))"
    )
    repository_root = pathlib.Path(__file__).resolve().parents[1]
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(hash_seed)},
            cwd=repository_root,
        ).stdout
        for hash_seed in (1, 2)
    }
    assert outputs == {repr(builtin_corpus("test", size=50, seed=5)) + "\n"}


def test_different_seed_differs():
    assert builtin_corpus("train", size=200, seed=0) != builtin_corpus("train", size=200, seed=1)
    assert builtin_corpus("test", size=200, seed=0)[1] != builtin_corpus("test", size=200, seed=1)[1]


def test_smaller_size_is_prefix():
    small = builtin_corpus("train", size=100)
    large = builtin_corpus("train", size=1000)
    assert small == (large[0][:100], large[1][:100])


# ---------------------------------------------------------------------------
# Held-out dates
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_splits_disjoint_by_target_date(seed):
    train = set(builtin_corpus("train", seed=seed)[1])
    validation = set(builtin_corpus("validation", seed=seed)[1])
    test = set(builtin_corpus("test", seed=seed)[1])
    assert not train & validation
    assert not train & test
    assert not validation & test


def test_every_date_in_exactly_one_split_in_roughly_90_5_5():
    by_split = dates._dates_by_split(0)
    counts = {split: len(dates) for split, dates in by_split.items()}
    total_days = (datetime.date(2099, 12, 31) - datetime.date(1900, 1, 1)).days + 1
    assert sum(counts.values()) == total_days
    assert len(set().union(*by_split.values())) == total_days
    assert 0.88 < counts["train"] / total_days < 0.92
    assert 0.04 < counts["validation"] / total_days < 0.06
    assert 0.04 < counts["test"] / total_days < 0.06


def test_no_duplicate_sources_within_split():
    sources, _ = builtin_corpus("train")
    assert len(set(sources)) == len(sources)


# ---------------------------------------------------------------------------
# Content of the pairs
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("split", SPLITS)
def test_targets_are_iso_dates_in_range(split):
    for target in builtin_corpus(split, size=2000)[1]:
        date = datetime.date.fromisoformat(target)
        assert date.isoformat() == target
        assert datetime.date(1900, 1, 1) <= date <= datetime.date(2099, 12, 31)


@pytest.mark.parametrize("split", SPLITS)
def test_every_source_means_its_target(split):
    sources, targets = builtin_corpus(split, size=3000, seed=7)
    weekday_prefixes = 0
    for source, target in zip(sources, targets):
        date, weekday = parse_source(source)
        assert date.isoformat() == target, (source, target)
        if weekday is not None:
            weekday_prefixes += 1
            assert weekday == date.weekday(), (source, target)
    assert weekday_prefixes > 100


EDGE_DATES = [
    datetime.date(1900, 1, 1),
    datetime.date(1905, 2, 28),
    datetime.date(1999, 12, 31),
    datetime.date(2000, 2, 29),
    datetime.date(2004, 11, 13),
    datetime.date(2010, 5, 2),
    datetime.date(2021, 8, 22),
    datetime.date(2099, 12, 31),
]


def test_every_format_means_its_date_on_edge_dates():
    rng = random.Random(0)
    for date in EDGE_DATES:
        for name in date_forms._format_names():
            for _ in range(3):  # several random variants per format
                source = date_forms._render(date, name, rng)
                assert parse_source(source)[0] == date, (name, source)


def test_sources_whitespace_tokens_between_1_and_12():
    sources, _ = builtin_corpus("train")
    lengths = collections.Counter(len(source.split()) for source in sources)
    assert min(lengths) == 1
    assert max(lengths) == 12
    assert all(source == " ".join(source.split()) for source in sources)


def test_no_two_digit_years_and_numeric_dates_are_day_first():
    sources, targets = builtin_corpus("train")
    for source, target in zip(sources, targets):
        date = datetime.date.fromisoformat(target)
        numbers = re.findall(r"\d+", source)
        assert all(len(number) in (1, 2, 4) for number in numbers), source
        assert sum(len(number) == 4 for number in numbers) <= 1, source
        if len(numbers) == 3 and len(numbers[2]) == 4:  # d.m.yyyy style: day first
            assert (int(numbers[0]), int(numbers[1])) == (date.day, date.month), source


def test_at_least_ten_formats_appear_in_1000_samples():
    counts = _format_counts("train", 1000)
    assert len(counts) >= 10
    assert len(date_forms._format_names()) >= 12


def test_all_formats_appear_in_every_split():
    for split in SPLITS:
        assert set(_format_counts(split, 1000)) == set(date_forms._format_names())


def test_spelled_forms_and_year_variants_appear():
    sources, _ = builtin_corpus("train")
    text = "\n".join(sources)
    for fragment in ["nineteen oh ", "two thousand and ", "twenty twenty-", "-first", "monday", "Sat ", "."]:
        assert fragment in text, fragment


# ---------------------------------------------------------------------------
# Typing variation: case, zero padding, commas, spacing, the ISO date itself
# ---------------------------------------------------------------------------


def test_typed_variants_of_every_format_keep_their_date():
    rng = random.Random(0)
    for date in EDGE_DATES:
        for name in date_forms._format_names():
            for _ in range(20):
                source = date_forms._vary_typing(date_forms._render(date, name, rng), rng)
                assert parse_source(source)[0] == date, (name, source)


@pytest.mark.parametrize(
    "style, typed",
    [
        ("lower", "saturday, the 21st of march, nineteen eighty-seven"),
        ("upper", "SATURDAY, THE 21ST OF MARCH, NINETEEN EIGHTY-SEVEN"),
        ("title", "Saturday, The 21st Of March, Nineteen Eighty-Seven"),
        ("names", "Saturday, the 21st of March, nineteen eighty-seven"),
        ("sentence", "Saturday, the 21st of march, nineteen eighty-seven"),
    ],
)
def test_case_styles(style, typed):
    assert date_forms._recase("saturday, The 21st of MARCH, nineteen eighty-seven", style, random.Random(0)) == typed


def test_mixed_case_varies_words_not_letters():
    rng = random.Random(0)
    for _ in range(50):
        words = date_forms._recase("saturday, the twenty-first of march", "mixed", rng).split(" ")
        title = ["-".join(part.capitalize() for part in word.split("-")) for word in words]
        assert all(word in (word.lower(), word.upper(), titled) for word, titled in zip(words, title)), words
        assert [word.lower() for word in words] == "saturday, the twenty-first of march".split(" ")


TYPING_KINDS = (
    "canonical",
    "upper case",
    "title case",
    "mixed case",
    "spaced punctuation",
    "missing spaces",
    "unpadded dashes",
)


def _typing_kinds(source, target):
    """The kinds of typing a source of the corpus shows, checked without the generator's code."""
    letters = re.sub(r"[^A-Za-z]", "", source)
    words = re.findall(r"[A-Za-z]+", source)
    # Day and month numbers: the ISO date and the day-first dashes form are always zero-padded.
    numbers = re.fullmatch(r"(\d+)-(\d+)-(\d{4})|(\d{4})-(\d+)-(\d+)", source.replace(" ", ""))
    kinds = {
        "canonical": source == target,
        "upper case": len(letters) > 3 and letters.isupper(),
        "title case": len(words) > 3 and all(word[0].isupper() and word[1:].islower() for word in words),
        "mixed case": any(word.isupper() and len(word) > 1 for word in words) and any(w.islower() for w in words),
        "spaced punctuation": re.search(r" [,./]|\d -|- \d", source) is not None,
        "missing spaces": re.search(r",\S|[A-Za-z]\d|\d(?!st|nd|rd|th)[A-Za-z]", source) is not None,
        "unpadded dashes": numbers is not None and any(len(group) == 1 for group in numbers.groups() if group),
    }
    return {kind for kind, present in kinds.items() if present}


def test_every_kind_of_typing_is_in_every_split():
    for split in SPLITS:
        sources, targets = builtin_corpus(split, size=2000)
        counts = collections.Counter(kind for pair in zip(sources, targets) for kind in _typing_kinds(*pair))
        assert set(counts) == set(TYPING_KINDS), counts
        assert min(counts.values()) >= 10, counts


def test_typing_leaves_a_share_of_sources_in_the_generators_case():
    sources, _ = builtin_corpus("train", size=5000)
    untouched_case = sum(source == date_forms._capitalise_names(source) or source.islower() for source in sources)
    assert 0.2 < untouched_case / len(sources) < 0.8


def test_generation_is_fast():
    dates._dates_by_split.cache_clear()
    start = time.perf_counter()
    builtin_corpus("train", size=20000, seed=11)
    assert time.perf_counter() - start < 2.0


# ---------------------------------------------------------------------------
# Number spelling
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "number, words",
    [
        (0, "zero"),
        (1, "one"),
        (13, "thirteen"),
        (15, "fifteen"),
        (20, "twenty"),
        (21, "twenty-one"),
        (40, "forty"),
        (88, "eighty-eight"),
        (99, "ninety-nine"),
        (100, "one hundred"),
        (105, "one hundred and five"),
        (342, "three hundred and forty-two"),
        (2000, "two thousand"),
        (2004, "two thousand and four"),
        (2021, "two thousand and twenty-one"),
        (1987, "one thousand nine hundred and eighty-seven"),
    ],
)
def test_spell_cardinal(number, words):
    assert date_words._spell_cardinal(number) == words


@pytest.mark.parametrize(
    "number, words",
    [
        (1, "first"),
        (2, "second"),
        (3, "third"),
        (4, "fourth"),
        (5, "fifth"),
        (8, "eighth"),
        (9, "ninth"),
        (11, "eleventh"),
        (12, "twelfth"),
        (13, "thirteenth"),
        (20, "twentieth"),
        (21, "twenty-first"),
        (22, "twenty-second"),
        (23, "twenty-third"),
        (30, "thirtieth"),
        (31, "thirty-first"),
        (40, "fortieth"),
        (99, "ninety-ninth"),
        (100, "one hundredth"),
    ],
)
def test_spell_ordinal(number, words):
    assert date_words._spell_ordinal(number) == words


@pytest.mark.parametrize(
    "year, words",
    [
        (1900, "nineteen hundred"),
        (1905, "nineteen oh five"),
        (1910, "nineteen ten"),
        (1987, "nineteen eighty-seven"),
        (2000, "two thousand"),
        (2004, "two thousand and four"),
        (2010, "twenty ten"),
        (2021, "twenty twenty-one"),
        (2099, "twenty ninety-nine"),
    ],
)
def test_spell_year(year, words):
    assert date_words._spell_year(year) == words
    assert _parse_spoken_year(words.split()) == year


def test_spell_year_cardinal_style():
    assert date_words._spell_year(2021, style="cardinal") == "two thousand and twenty-one"


@pytest.mark.parametrize(
    "number, text",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (30, "30th"),
        (31, "31st"),
    ],
)
def test_numeric_ordinal_suffix(number, text):
    assert date_words._ordinal_suffix(number) == text


def test_spell_rejects_bad_numbers():
    with pytest.raises(ValueError):
        date_words._spell_cardinal(-1)
    with pytest.raises(ValueError):
        date_words._spell_ordinal(0)
