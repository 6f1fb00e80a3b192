"""How a date is written: the surface forms of the built-in corpus, and a person's typing of them.

A surface form renders a date as text, each its own way (`_FORMATS`, 19 of them, the ISO date
among them): "saturday, march 21, 1987", "the twenty-first of march nineteen eighty-seven",
"21.03.1987", "1987-03-21". Only numeric forms that are unambiguous are produced: numeric dates
are day-first ("21/03/1987") or year-first ("1987/03/21"), never month-first, and years always
have four digits or are spelled out in full. A form that names the weekday names the true one.

Typed the way people type. A rendered form is then varied as a person typing it would
(`_vary_typing`, each variation independently at the rate of `TYPING_PROBABILITIES`): the case
becomes lower, UPPER, Title, capitalised names ("the 21st of March"), sentence or mixed per word
(`CASE_STYLES`); day and month numbers are zero-padded or not ("21.3.1987"); commas are dropped;
spaces go around separators ("21 / 03 / 1987") or are left out ("march21,1987"). The varied text
means the same date.

Each form and each variation takes a `random.Random` for its choices, so the corpus that draws
them (`dates`) is reproducible. Pure Python (standard library only).
"""

import re

from keras_transformer.data.date_words import (
    MONTH_ABBREVIATIONS,
    MONTH_NAMES,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAY_NAMES,
    _ordinal_suffix,
    _spell_ordinal,
    _spell_year,
)

__all__ = ["TYPING_PROBABILITIES", "CASE_STYLES"]


# --------------------------------------------------------------------------
# Surface forms.  Each takes (date, rng) and returns the source string.
# --------------------------------------------------------------------------
def _spoken_year(date, rng):
    """A spelled-out year for `date`, drawn with `rng`.

    Years from 2010 are said either way ("twenty ten" / "two thousand and ten"),
    older years in the paired form.
    """
    if date.year >= 2010 and rng.random() < 0.5:
        return _spell_year(date.year, style="cardinal")
    return _spell_year(date.year)


def _month(date):
    return MONTH_NAMES[date.month - 1]


def _month_abbreviation(date):
    return MONTH_ABBREVIATIONS[date.month - 1]


def _weekday(date):
    return WEEKDAY_NAMES[date.weekday()]


def _day_month_numbers(date, rng):
    """Day and month digits, zero-padded or not (both the same way)."""
    if rng.random() < 0.7:
        return f"{date.day:02d}", f"{date.month:02d}"
    return str(date.day), str(date.month)


def _format_month_day_year(date, rng):
    month = _month(date)
    if rng.random() < 0.5:
        month = month.capitalize()
    return f"{month} {date.day}, {date.year}"


def _format_abbreviated_month_ordinal_year(date, rng):
    return f"{_month_abbreviation(date).capitalize()} {_ordinal_suffix(date.day)} {date.year}"


def _format_day_month_year(date, rng):
    return f"{date.day} {_month(date)} {date.year}"


def _format_ordinal_day_month_year(date, rng):
    return f"{_ordinal_suffix(date.day)} {_month(date)} {date.year}"


def _format_the_ordinal_of_month_year(date, rng):
    return f"the {_ordinal_suffix(date.day)} of {_month(date)}, {date.year}"


def _format_year_month_day(date, rng):
    return f"{date.year} {_month(date)} {date.day}"


def _format_numeric_dots(date, rng):
    day, month = _day_month_numbers(date, rng)
    return f"{day}.{month}.{date.year}"


def _format_numeric_slashes(date, rng):
    day, month = _day_month_numbers(date, rng)
    return f"{day}/{month}/{date.year}"


def _format_numeric_dashes(date, rng):
    return f"{date.day:02d}-{date.month:02d}-{date.year}"


def _format_numeric_year_first(date, rng):
    return f"{date.year}/{date.month:02d}/{date.day:02d}"


def _format_day_abbreviated_month_year_hyphens(date, rng):
    return f"{date.day:02d}-{_month_abbreviation(date).capitalize()}-{date.year}"


def _format_iso(date, rng):
    return date.isoformat()


def _format_weekday_month_day_year(date, rng):
    return f"{_weekday(date)}, {_month(date)} {date.day}, {date.year}"


def _format_abbreviated_weekday_day_month_year(date, rng):
    weekday = WEEKDAY_ABBREVIATIONS[date.weekday()].capitalize()
    return f"{weekday} {date.day} {_month_abbreviation(date).capitalize()} {date.year}"


def _format_weekday_the_ordinal_of_month_year(date, rng):
    return f"{_weekday(date)} the {_ordinal_suffix(date.day)} of {_month(date)} {date.year}"


def _format_spelled_the_day_of_month(date, rng):
    return f"the {_spell_ordinal(date.day)} of {_month(date)} {_spoken_year(date, rng)}"


def _format_spelled_month_the_day(date, rng):
    return f"{_month(date)} the {_spell_ordinal(date.day)}, {_spoken_year(date, rng)}"


def _format_spelled_day_of_month_in_the_year(date, rng):
    return f"the {_spell_ordinal(date.day)} day of {_month(date)} in the year {_spoken_year(date, rng)}"


def _format_spelled_weekday_the_day_of_month(date, rng):
    return f"{_weekday(date)}, the {_spell_ordinal(date.day)} of {_month(date)}, {_spoken_year(date, rng)}"


_FORMATS = {
    "month_day_year": _format_month_day_year,
    "abbreviated_month_ordinal_year": _format_abbreviated_month_ordinal_year,
    "day_month_year": _format_day_month_year,
    "ordinal_day_month_year": _format_ordinal_day_month_year,
    "the_ordinal_of_month_year": _format_the_ordinal_of_month_year,
    "year_month_day": _format_year_month_day,
    "numeric_dots": _format_numeric_dots,
    "numeric_slashes": _format_numeric_slashes,
    "numeric_dashes": _format_numeric_dashes,
    "numeric_year_first": _format_numeric_year_first,
    "iso": _format_iso,
    "day_abbreviated_month_year_hyphens": _format_day_abbreviated_month_year_hyphens,
    "weekday_month_day_year": _format_weekday_month_day_year,
    "abbreviated_weekday_day_month_year": _format_abbreviated_weekday_day_month_year,
    "weekday_the_ordinal_of_month_year": _format_weekday_the_ordinal_of_month_year,
    "spelled_the_day_of_month": _format_spelled_the_day_of_month,
    "spelled_month_the_day": _format_spelled_month_the_day,
    "spelled_day_of_month_in_the_year": _format_spelled_day_of_month_in_the_year,
    "spelled_weekday_the_day_of_month": _format_spelled_weekday_the_day_of_month,
}
_FORMAT_NAMES = tuple(_FORMATS)


def _format_names():
    """Names of all surface forms, in a fixed order."""
    return _FORMAT_NAMES


def _render(date, format_name, rng):
    """The source string for `date` in the named surface form."""
    return _FORMATS[format_name](date, rng)


# --------------------------------------------------------------------------
# Typing variation: what a person does to a surface form while typing it.
# --------------------------------------------------------------------------
# Month and weekday names and their abbreviations, the words English capitalises.
_NAME_WORDS = frozenset(MONTH_NAMES + MONTH_ABBREVIATIONS + WEEKDAY_NAMES + WEEKDAY_ABBREVIATIONS)
# A day or month number (one or two digits, not part of a year), unless an ordinal suffix follows.
_SHORT_NUMBER_RE = re.compile(r"(?<!\d)\d{1,2}(?!\d|st|nd|rd|th)")
# A separator of a numeric date: "." or "/", or "-" next to a digit (never the "-" of "twenty-one").
_SEPARATOR_RE = re.compile(r"\s*(,|[./]|(?<=\d)-|-(?=\d))\s*")
# A space that people leave out: after a comma, and between a number and a word.
_OMITTABLE_SPACE_RE = re.compile(r"(?<=,) +|(?<=\d) +(?=[A-Za-z])|(?<=[A-Za-z]) +(?=\d)")
_ALPHA_RUN_RE = re.compile(r"[A-Za-z]+")

# Each probability applies independently to every source; a source may get several variations.
TYPING_PROBABILITIES = {"case": 0.6, "padding": 0.25, "commas": 0.15, "spacing": 0.35}
# How a varied source is capitalised, with the relative weight of each.
CASE_STYLES = {"lower": 2, "upper": 4, "title": 2, "names": 2, "sentence": 1, "mixed": 4}


def _capitalise_word(word):
    """Each run of letters capitalised, but not an ordinal suffix: "twenty-first" -> "Twenty-First", "21st"."""
    return _ALPHA_RUN_RE.sub(lambda match: _capitalise_run(match, word), word)


def _capitalise_run(match, text):
    run = match.group()
    after_digit = match.start() > 0 and text[match.start() - 1].isdigit()  # the "st" of "21st"
    return run.lower() if after_digit else run.capitalize()


def _capitalise_names(text):
    """Month and weekday names capitalised, every other letter lower case: "Saturday, the 21st of March"."""
    return _ALPHA_RUN_RE.sub(
        lambda match: match.group().capitalize() if match.group().lower() in _NAME_WORDS else match.group().lower(),
        text,
    )


def _recase(text, style, rng):
    """`text` capitalised in one of `CASE_STYLES`; "mixed" picks lower, UPPER or Title per word."""
    if style == "lower":
        return text.lower()
    if style == "upper":
        return text.upper()
    if style == "title":
        return " ".join(_capitalise_word(word) for word in text.split(" "))
    if style == "names":
        return _capitalise_names(text)
    if style == "sentence":
        text = text.lower()
        return text[:1].upper() + text[1:]
    if style == "mixed":
        return " ".join(_recase(word, rng.choice(("lower", "upper", "title")), rng) for word in text.split(" "))
    raise ValueError(f"`style` must be one of {tuple(CASE_STYLES)}. Received: style={style!r}")


def _repad(text, rng):
    """Each day and month number zero-padded or not, independently: "21.03.1987" -> "21.3.1987"."""
    return _SHORT_NUMBER_RE.sub(lambda match: rng.choice((f"{int(match.group()):02d}", str(int(match.group())))), text)


def _respace(text, rng):
    """Spaces put around separators ("21 / 03 / 1987") or left out ("march21,1987")."""
    if rng.random() < 0.5:
        spacings = (" {} ", " {}", "{} ") if rng.random() < 0.5 else (" {} ",)
        return _SEPARATOR_RE.sub(lambda match: rng.choice(spacings).format(match.group(1)), text).strip()
    spaced = _OMITTABLE_SPACE_RE.sub(lambda match: "" if rng.random() < 0.7 else match.group(), text)
    return spaced if spaced != text else _OMITTABLE_SPACE_RE.sub("", text)


def _vary_typing(text, rng):
    """`text` as a person might type it: case, zero padding, commas and spacing varied at random.

    Each variation of `TYPING_PROBABILITIES` applies independently: the case becomes one of
    `CASE_STYLES`; day and month numbers are zero-padded or not; commas are dropped; spaces go
    around separators or are left out. Runs of whitespace are not produced: the tokenizer splits
    on them, so they cannot change what a model sees. The result means the same date.
    """
    if rng.random() < TYPING_PROBABILITIES["padding"]:
        text = _repad(text, rng)
    if rng.random() < TYPING_PROBABILITIES["case"]:
        styles = tuple(CASE_STYLES)
        text = _recase(text, rng.choices(styles, weights=[CASE_STYLES[style] for style in styles])[0], rng)
    if rng.random() < TYPING_PROBABILITIES["commas"]:
        text = text.replace(",", "")
    if rng.random() < TYPING_PROBABILITIES["spacing"]:
        text = _respace(text, rng)
    return text
