"""Built-in parallel corpus: dates written many ways -> one canonical ISO date.

The task: each example pairs a *source* sentence, a calendar date written in
one of many human surface forms, with a *target*, the same date in ISO 8601 form:

    "saturday, march 21, 1987"                        -> "1987-03-21"
    "the twenty-first of march nineteen eighty-seven" -> "1987-03-21"
    "21.03.1987"                                      -> "1987-03-21"

Dates are drawn uniformly from 1900-01-01 .. 2099-12-31.

Typed the way people type.  Each source is one of the surface forms of
`date_forms`, varied as a person typing it would: case, zero padding, commas,
spacing.  The canonical ISO date is one of the forms too, mapping to itself.
The corpus keeps case, so a tokenizer learned on it must too: the model learns
that "MARCH" and "march" mean the same, no lower-casing hides it.
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

Only numeric forms that are unambiguous are produced (`date_forms`): numeric
dates are day-first or year-first, never month-first.

The module is pure Python (standard library only) so it can be imported
without TensorFlow.
"""

import datetime
import functools
import random
import zlib

from keras_transformer.checks import check_choice, check_int
from keras_transformer.data.date_forms import _FORMAT_NAMES, _render, _vary_typing

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
    check_choice("split", split, SPLITS)
    size = DEFAULT_SIZES[split] if size is None else check_int("size", size, 0)
    samples = _sample(split, size, seed)
    sources = [source for _, _, source in samples]
    targets = [date.isoformat() for date, _, _ in samples]
    return sources, targets
