"""Dates in English words: month and weekday names, numbers and years spelled out.

The words the built-in corpus (`dates`) writes dates with: `MONTH_NAMES` and `WEEKDAY_NAMES`
(lower case, Monday first) and their three-letter abbreviations; cardinals and ordinals spelled
in (British) English words, "and" joining hundreds to a remainder below one hundred
(105 -> "one hundred and five", 21 -> "twenty-first"); numeric ordinals ("21st"); and years as
people say them ("nineteen eighty-seven", "two thousand and four").

Pure Python (the standard library, and the package's argument checks), like the corpus.
"""

from keras_transformer.checks import check_choice, check_int

__all__ = ["MONTH_NAMES", "MONTH_ABBREVIATIONS", "WEEKDAY_NAMES", "WEEKDAY_ABBREVIATIONS"]

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


def _spell_cardinal(number):
    """Spell a whole number 0 <= number < 1,000,000 in (British) English words.

    Tens and units are hyphenated, and "and" joins hundreds to a remainder
    below one hundred: 21 -> "twenty-one", 105 -> "one hundred and five",
    2004 -> "two thousand and four", 1987 -> "one thousand nine hundred and
    eighty-seven".
    """
    check_int("number", number, 0, 999_999)
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
    check_int("number", number, 1, 999_999)
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
    check_choice("style", style, ("paired", "cardinal"))
    check_int("year", year, 1000, 9999)
    century, rest = divmod(year, 100)
    if century % 10 == 0 and rest < 10:  # 2000..2009, 1000..1009, ...
        return _spell_cardinal(year)
    if rest == 0:
        return f"{_spell_cardinal(century)} hundred"
    if rest < 10:
        return f"{_spell_cardinal(century)} oh {_UNITS[rest]}"
    return f"{_spell_cardinal(century)} {_spell_cardinal(rest)}"
