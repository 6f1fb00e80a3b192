"""Built-in parallel corpus: dates written many ways -> one canonical ISO date.

The task: each example pairs a *source* sentence, a calendar date written in
one of many human surface forms, with a *target*, the same date in ISO 8601 form:

    "saturday, march 21, 1987"                        -> "1987-03-21"
    "the twenty-first of march nineteen eighty-seven" -> "1987-03-21"
    "21.03.1987"                                      -> "1987-03-21"

Dates are drawn uniformly from 1900-01-01 .. 2099-12-31.

Typed the way people type.  A surface form is then varied as a person typing
it would (`_vary_typing`, each variation independently at the rate of
`TYPING_PROBABILITIES`): the case becomes lower, UPPER, Title, capitalised
names ("the 21st of March"), sentence or mixed per word (`CASE_STYLES`); day
and month numbers are zero-padded or not ("21.3.1987"); commas are dropped;
spaces go around separators ("21 / 03 / 1987") or are left out
("march21,1987").  The canonical ISO date is one of the forms too, mapping to
itself.  The corpus keeps case, so a tokenizer learned on it must too: the
model learns that "MARCH" and "march" mean the same, no lower-casing hides it.
`keras_transformer.data.typed_dates` measures each kind of typing on held-out
dates.

Why it needs attention:

- Reordering.  The target is always year-month-day, but sources put the
  day, the month or the year first.  To emit the year the decoder has to look
  at wherever the year is in *this* source, which is what cross-attention does;
  attention heatmaps show the target year pieces attending to the source year
  words, the month pieces to the month name, and so on.
- Many-to-one surface forms.  "march", "Mar", "MARCH", "03" and "3" all mean the
  month `03`; "21st", "twenty-first" and "21" all mean the day `21`;
  "1905", "nineteen oh five" and "two thousand and four" style years must be
  read as numbers.  The model has to learn what the pieces mean, not copy them.
- Variable length.  Sources run from 1 whitespace token ("21.03.1987") to
  about 12 ("the twenty-first day of march in the year two thousand and
  twenty-one"), while the target is a fixed 10-character word.
- Consistency constraints.  An optional weekday prefix is always the true
  weekday of the date, so it is redundant information the model may learn to
  ignore (or to check).

Held-out evaluation: every calendar date belongs to exactly one split (about
90% train, 5% validation, 5% test), decided by a stable hash (`zlib.crc32`) of its ISO
string and the seed.  No validation or test *target* ever occurs in train, so
exact match on the test split measures generalisation to unseen dates, not
memorisation.  A consequence for tokenisation: a purely word-level target
vocabulary cannot work (every test target would be out of vocabulary); use
sub-word or character pieces.

Only numeric forms that are unambiguous are produced: numeric dates are
day-first ("21/03/1987") or year-first ("1987/03/21"), never month-first, and
years always have four digits or are spelled out in full.

The module is pure Python (standard library only) so it can be imported
without TensorFlow.
"""

import datetime
import functools
import random
import re
import zlib

__all__ = ["SPLITS", "DEFAULT_SIZES", "builtin_corpus"]

SPLITS = ("train", "validation", "test")
DEFAULT_SIZES = {"train": 20000, "validation": 1000, "test": 1000}

FIRST_DATE = datetime.date(1900, 1, 1)
LAST_DATE = datetime.date(2099, 12, 31)

# Out of 100 hash buckets: [0, 90) train, [90, 95) validation, [95, 100) test.
_SPLIT_BUCKET_BOUNDS = (("train", 90), ("validation", 95), ("test", 100))

# Give up after this many draws in a row that only repeat earlier sources
# (only reached for sizes near or beyond what the split can fill).
_MAX_CONSECUTIVE_DUPLICATES = 10_000

MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
MONTH_ABBREVIATIONS = tuple(name[:3] for name in MONTH_NAMES)
WEEKDAY_NAMES = (
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
)
WEEKDAY_ABBREVIATIONS = tuple(name[:3] for name in WEEKDAY_NAMES)

_UNITS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = (
    "",
    "",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
)
_IRREGULAR_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}


# --------------------------------------------------------------------------
# Spelling numbers
# --------------------------------------------------------------------------
def _spell_cardinal(number):
    """Spell a whole number 0 <= number < 1,000,000 in (British) English words.

    Tens and units are hyphenated, and "and" joins hundreds to a remainder
    below one hundred: 21 -> "twenty-one", 105 -> "one hundred and five",
    2004 -> "two thousand and four", 1987 -> "one thousand nine hundred and
    eighty-seven".
    """
    if not isinstance(number, int) or isinstance(number, bool):
        raise TypeError(f"number must be an int, got {number!r}")
    if not 0 <= number < 1_000_000:
        raise ValueError(f"number must be in [0, 1000000), got {number}")
    if number < 20:
        return _UNITS[number]
    if number < 100:
        tens, units = divmod(number, 10)
        return _TENS[tens] + (f"-{_UNITS[units]}" if units else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        words = f"{_UNITS[hundreds]} hundred"
        return words + (f" and {_spell_cardinal(rest)}" if rest else "")
    thousands, rest = divmod(number, 1000)
    words = f"{_spell_cardinal(thousands)} thousand"
    if rest == 0:
        return words
    if rest < 100:
        return f"{words} and {_spell_cardinal(rest)}"
    return f"{words} {_spell_cardinal(rest)}"


def _spell_ordinal(number):
    """Spell an ordinal 1 <= number < 1,000,000: 1 -> "first", 21 -> "twenty-first"."""
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ValueError(f"ordinal must be a positive int, got {number!r}")
    cardinal = _spell_cardinal(number)
    # Only the last word (or last hyphenated part) takes the ordinal form.
    cut = max(cardinal.rfind(" "), cardinal.rfind("-")) + 1
    head, last = cardinal[:cut], cardinal[cut:]
    if last in _IRREGULAR_ORDINALS:
        last = _IRREGULAR_ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + last


def _ordinal_suffix(number):
    """Numeric ordinal: 1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _spell_year(year, style="paired"):
    """Spell a year the way people say it.

    `style="paired"` (the usual spoken form):
        1900 -> "nineteen hundred", 1905 -> "nineteen oh five",
        1987 -> "nineteen eighty-seven", 2000 -> "two thousand",
        2004 -> "two thousand and four", 2021 -> "twenty twenty-one".
    `style="cardinal"` reads the year as a plain number:
        2021 -> "two thousand and twenty-one",
        1987 -> "one thousand nine hundred and eighty-seven".
    """
    if style == "cardinal":
        return _spell_cardinal(year)
    if style != "paired":
        raise ValueError(f"Unknown year style {style!r}; expected 'paired' or 'cardinal'")
    if not 1000 <= year <= 9999:
        raise ValueError(f"year must have four digits, got {year}")
    century, rest = divmod(year, 100)
    if century % 10 == 0 and rest < 10:  # 2000..2009, 1000..1009, ...
        return _spell_cardinal(year)
    if rest == 0:
        return f"{_spell_cardinal(century)} hundred"
    if rest < 10:
        return f"{_spell_cardinal(century)} oh {_UNITS[rest]}"
    return f"{_spell_cardinal(century)} {_spell_cardinal(rest)}"


def _spoken_year(date, rng):
    """A spelled-out year for `date`, drawn with `rng`.

    Years from 2010 are said either way ("twenty ten" / "two thousand and ten"),
    older years in the paired form.
    """
    if date.year >= 2010 and rng.random() < 0.5:
        return _spell_year(date.year, style="cardinal")
    return _spell_year(date.year)


# --------------------------------------------------------------------------
# Surface forms.  Each takes (date, rng) and returns the source string.
# --------------------------------------------------------------------------
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
    raise ValueError(f"Unknown case style {style!r}; expected one of {tuple(CASE_STYLES)}")


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


# --------------------------------------------------------------------------
# Splits and sampling
# --------------------------------------------------------------------------
def _split_of(date, seed=0):
    """The split a date belongs to: a stable hash of (seed, ISO date)."""
    bucket = zlib.crc32(f"{seed}:{date.isoformat()}".encode("ascii")) % 100
    for split, upper_bound in _SPLIT_BUCKET_BOUNDS:
        if bucket < upper_bound:
            return split
    raise AssertionError("unreachable")  # pragma: no cover


@functools.lru_cache(maxsize=16)
def _dates_by_split(seed):
    """All dates in the range grouped by split, in calendar order."""
    grouped = {split: [] for split in SPLITS}
    first_ordinal, last_ordinal = FIRST_DATE.toordinal(), LAST_DATE.toordinal()
    for day_number in range(first_ordinal, last_ordinal + 1):
        date = datetime.date.fromordinal(day_number)
        grouped[_split_of(date, seed)].append(date)
    return {split: tuple(dates) for split, dates in grouped.items()}


def _sample(split, size, seed):
    """(date, format name, source) triples; the engine behind `builtin_corpus`."""
    dates = _dates_by_split(seed)[split]
    rng = random.Random(f"keras_transformer.builtin_corpus:{seed}:{split}")
    samples, seen_sources = [], set()
    consecutive_duplicates = 0
    while len(samples) < size:
        # Uniform over all dates in the range, keeping those in this split.
        date = rng.choice(dates)
        format_name = rng.choice(_FORMAT_NAMES)
        source = _vary_typing(_render(date, format_name, rng), rng)
        if source in seen_sources:
            consecutive_duplicates += 1
            if consecutive_duplicates >= _MAX_CONSECUTIVE_DUPLICATES:
                raise ValueError(
                    f"Could not draw {size} distinct sources for split {split!r}; "
                    f"got {len(samples)}. Ask for a smaller size."
                )
            continue
        consecutive_duplicates = 0
        seen_sources.add(source)
        samples.append((date, format_name, source))
    return samples


def builtin_corpus(split, size=None, seed=0):
    """Generate the built-in date-normalisation parallel corpus.

    Sources are dates written in one of many English surface forms; targets
    are the same dates in ISO form (`YYYY-MM-DD`).  Every calendar date in
    1900-01-01 .. 2099-12-31 belongs to exactly one split (decided by a stable
    hash of the date and `seed`), so validation and test dates never occur in
    train.  Within a split no source string repeats (a date may repeat, written
    differently).  The result depends only on the arguments, in any process,
    and a smaller `size` gives a prefix of a larger one.

    Args:
        split: One of `SPLITS`: "train", "validation" or "test".
        size: Number of pairs; defaults to 20000 for train and 1000 for
            validation and test.  0 gives two empty lists.
        seed: Integer selecting both the date-to-split assignment and the
            sampling.

    Returns:
        `(sources, targets)`: two lists of `str` of equal length `size`.

    Raises:
        ValueError: for an unknown split, a negative size, or a size larger
            than the split can fill with distinct sources.

    Example:
        >>> sources, targets = builtin_corpus("train", size=3)
        >>> len(sources), len(targets)
        (3, 3)
        >>> all(len(target) == 10 and target[4] == "-" for target in targets)
        True

        A typical pair: `("the twenty-first of march nineteen eighty-seven", "1987-03-21")`.
    """
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; expected one of {SPLITS}")
    if size is None:
        size = DEFAULT_SIZES[split]
    if not isinstance(size, int) or isinstance(size, bool):
        raise TypeError(f"size must be an int or None, got {size!r}")
    if size < 0:
        raise ValueError(f"Invalid size {size}; expected a non-negative integer or None")
    samples = _sample(split, size, seed)
    sources = [source for _, _, source in samples]
    targets = [date.isoformat() for date, _, _ in samples]
    return sources, targets
