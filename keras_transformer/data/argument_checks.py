"""Checks of the numeric arguments of the language-model data: an int with a minimum, a rate.

Each check returns the value as a plain `int` or `float`, or raises `ValueError` with a message
that names the argument. `bool` is refused where a number is expected.
"""

import numbers


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _check_rate(name, value, low_open=True, high_open=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    value = float(value)
    low_ok = value > 0.0 if low_open else value >= 0.0
    high_ok = value < 1.0 if high_open else value <= 1.0
    if not (low_ok and high_ok):
        interval = ("(" if low_open else "[") + "0, 1" + (")" if high_open else "]")
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return value
