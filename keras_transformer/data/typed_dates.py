"""Dates typed the way people type them: a held-out set by category.

The built-in corpus (`keras_transformer.data.dates`) renders each surface form and then varies
it as a person typing it would (case, zero padding, commas, spacing). This module measures
whether a trained model reads such input, one kind of typing at a time. Each example takes one
of the generator's surface forms of a held-out date and changes it in one way, its *category*:

    generated             the surface form as the generator renders it   "Mar 21st 1987"
    lowercase             every letter lower case                        "mar 21st 1987"
    uppercase             every letter upper case                        "MAR 21ST 1987"
    title_case            every word capitalised                         "The Twenty-First Of March"
    capitalised_names     month and weekday names capitalised, the rest  "the 21st of March, 1987"
                          lower case
    mixed_case            words in lower, UPPER and Title case, mixed    "SATURDAY, march 21, 1987"
    extra_spaces          doubled spaces, leading and trailing space     "  21  march  1987 "
    spaced_punctuation    a space either side of every comma and         "21 . 03 . 1987"
                          separator
    missing_spaces        no space after a comma or between a number     "march21,1987"
                          and a word
    no_commas             commas left out                                "march 21 1987"
    zero_padding_flipped  day and month numbers zero-padded where the    "21.3.1987", "march 07, 1987"
                          form has none, and the reverse
    canonical             the ISO date itself, to be copied              "1987-03-21"

Except for `generated` and `canonical`, every example differs from the form it was made from,
and the typing is done here, by code separate from the generator's own variation, fully
applied (every letter, every separator). The categories are what people type, so they are the
task: `python train.py` trains on such variation.

Held out: the dates are those of the corpus's test split for the same seed, so no date of the
set (and hence no source of it) occurs in the training split of a run with that seed. Within a
category no source repeats. The set depends only on its arguments, in any process.

Generation is pure Python (standard library only). Scoring a model on the set is
`keras_transformer.evaluation.score_typed_dates`.
"""

import random
import re

from keras_transformer.checks import check_int
from keras_transformer.data import date_forms, date_words, dates

__all__ = ["CATEGORIES", "DEFAULT_SIZE_PER_CATEGORY", "typed_date_set"]

CATEGORIES = (
    "generated",
    "lowercase",
    "uppercase",
    "title_case",
    "capitalised_names",
    "mixed_case",
    "extra_spaces",
    "spaced_punctuation",
    "missing_spaces",
    "no_commas",
    "zero_padding_flipped",
    "canonical",
)
DEFAULT_SIZE_PER_CATEGORY = 200

# Draws in a row that give no new example before giving up (a size beyond what the dates allow).
_MAX_FAILED_DRAWS = 10_000
_NAMES = {
    name
    for names in (date_words.MONTH_NAMES, date_words.WEEKDAY_NAMES)
    for full_name in names
    for name in (full_name, full_name[:3])
}
_LETTERS = re.compile(r"[A-Za-z]+")
# Day and month numbers: one or two digits not inside a longer number and not before "st", "nd"...
_DAY_OR_MONTH = re.compile(r"(?<![0-9])[0-9]{1,2}(?![0-9]|st|nd|rd|th|ST|ND|RD|TH)")
# Commas, dots and slashes, and a hyphen with a digit on either side (not "twenty-one").
_PUNCTUATION = re.compile(r" ?(,|\.|/|(?<=[0-9])-|-(?=[0-9])) ?")
_NUMBER_WORD_GAP = re.compile(r"(?<=,) |(?<=[A-Za-z]) (?=[0-9])|(?<=[0-9]) (?=[A-Za-z])")


def _title_word(word):
    """Each run of letters capitalised, except an ordinal suffix after digits ("21st")."""
    return _LETTERS.sub(
        lambda match: (
            match.group().lower() if match.start() and word[match.start() - 1].isdigit() else match.group().capitalize()
        ),
        word,
    )


def _case_of(word):
    return "upper" if word.isupper() else "lower" if word.islower() else "title"


def _mixed_case(text, rng):
    """Each word in lower, UPPER or Title case, at least two of them among the words with letters.

    A text with fewer than two words with letters comes back unchanged (and is not used).
    """
    words = text.split(" ")
    if sum(word.lower() != word.upper() for word in words) < 2:
        return text
    while True:
        typed = [(word.lower(), word.upper(), _title_word(word))[rng.randrange(3)] for word in words]
        if len({_case_of(word) for word in typed if word.lower() != word.upper()}) > 1:
            return " ".join(typed)


def _flip_padding(text):
    def flip(match):
        number = match.group()
        return number[1:] if number.startswith("0") else f"0{number}" if len(number) == 1 else number

    return _DAY_OR_MONTH.sub(flip, text)


def _type(category, source, date, rng):
    """`source`, a rendering of `date`, typed as `category` says."""
    if category == "generated":
        return source
    if category == "canonical":
        return date.isoformat()
    if category == "lowercase":
        return source.lower()
    if category == "uppercase":
        return source.upper()
    if category == "title_case":
        return " ".join(_title_word(word) for word in source.split(" "))
    if category == "capitalised_names":
        return _LETTERS.sub(
            lambda match: match.group().capitalize() if match.group().lower() in _NAMES else match.group().lower(),
            source,
        )
    if category == "mixed_case":
        return _mixed_case(source, rng)
    if category == "extra_spaces":
        return "  " + "  ".join(source.split(" ")) + " "
    if category == "spaced_punctuation":
        return _PUNCTUATION.sub(r" \1 ", source)
    if category == "missing_spaces":
        return _NUMBER_WORD_GAP.sub("", source)
    if category == "no_commas":
        return source.replace(",", "")
    if category == "zero_padding_flipped":
        return _flip_padding(source)
    raise ValueError(f"`category` must be one of {CATEGORIES}. Received: category={category!r}")


def _category_examples(category, size, seed, with_renderings=False):
    """`(sources, targets)` of one category; with `with_renderings`, also the forms they were typed from."""
    held_out_dates = dates._dates_by_split(seed)["test"]
    rng = random.Random(f"keras_transformer.typed_dates:{seed}:{category}")
    sources, targets, renderings = [], [], []
    seen, failed_draws = set(), 0
    while len(sources) < size:
        date = rng.choice(held_out_dates)
        rendered = date_forms._render(date, rng.choice(date_forms._format_names()), rng)
        typed = _type(category, rendered, date, rng)
        unchanged = typed == rendered and category not in ("generated", "canonical")
        if unchanged or typed in seen:
            failed_draws += 1
            if failed_draws >= _MAX_FAILED_DRAWS:
                raise ValueError(f"Could not draw {size} distinct {category!r} examples; got {len(sources)}")
            continue
        failed_draws = 0
        seen.add(typed)
        sources.append(typed)
        targets.append(date.isoformat())
        renderings.append(rendered)
    return (sources, targets, renderings) if with_renderings else (sources, targets)


def typed_date_set(size_per_category=DEFAULT_SIZE_PER_CATEGORY, seed=0, categories=CATEGORIES):
    """The held-out typed dates: `size_per_category` examples of each category.

    Args:
        size_per_category: examples per category (>= 0).
        seed: the corpus seed of the run to score: the dates are its test split's.
        categories: which of `CATEGORIES`, in the order of the result.

    Returns:
        `{category: (sources, targets)}`, two lists of `str` of length `size_per_category` each;
        the targets are ISO dates (`YYYY-MM-DD`).

    Raises:
        ValueError: an unknown category, or a negative size.

    Example:
        >>> examples = typed_date_set(2, categories=("uppercase",))
        >>> sources, targets = examples["uppercase"]
        >>> all(source == source.upper() for source in sources), len(targets)
        (True, 2)
    """
    if any(category not in CATEGORIES for category in categories):
        raise ValueError(f"`categories` must be some of {CATEGORIES}. Received: categories={categories!r}")
    check_int("size_per_category", size_per_category, 0)
    return {category: _category_examples(category, size_per_category, seed) for category in categories}
