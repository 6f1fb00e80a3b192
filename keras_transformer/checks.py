"""The argument checks of the whole package, with one message style.

Each check returns the value (an int as `int`, a number as `float`, a tuple of ints as `tuple`)
or raises `ValueError` with a message that names the argument, says what it may be, and quotes
what it got:

    `num_heads` must be an int >= 1. Received: num_heads=0
    `dropout_rate` must be a number in [0, 1). Received: dropout_rate=1.5
    `score` must be one of ('scaled_dot', 'additive'). Received: score='dot'

`bool` is refused where a number is expected (`True` is an `int` to Python, never a size or a
rate here); NumPy integers and floats are numbers. The module is pure Python: it imports nothing
of the package, of TensorFlow or of Keras, so every module may use it (the bottom layer of
setup.cfg's import contract).
"""

import numbers


def _interval(minimum, maximum, greater_than, less_than):
    """The bounds as words: `>= 1`, `> 0`, `<= 9`, `in [0, 1)`, or `""` when there is none."""
    low = ("[", minimum) if minimum is not None else ("(", greater_than) if greater_than is not None else None
    high = (maximum, "]") if maximum is not None else (less_than, ")") if less_than is not None else None
    if low and high:
        return f" in {low[0]}{low[1]}, {high[0]}{high[1]}"
    if low:
        return f" {'>=' if low[0] == '[' else '>'} {low[1]}"
    if high:
        return f" {'<=' if high[1] == ']' else '<'} {high[0]}"
    return ""


def _within(value, minimum=None, maximum=None, greater_than=None, less_than=None):
    """Whether `value` lies within the bounds (a NaN lies within none)."""
    return (
        (minimum is None or value >= minimum)
        and (maximum is None or value <= maximum)
        and (greater_than is None or value > greater_than)
        and (less_than is None or value < less_than)
        and value == value
    )


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _fail(name, expected, value):
    raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")


def check_int(name, value, minimum=None, maximum=None):
    """Check that an argument is an int within bounds.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given.
        minimum: the smallest value allowed, or None for no lower bound.
        maximum: the largest value allowed, or None for no upper bound.

    Returns:
        `value` as a Python `int`.

    Raises:
        ValueError: `value` is not an int (a `bool` is not) or lies outside `[minimum, maximum]`;
            the message names the argument, the bounds and the value, e.g. "`size` must be an
            int >= 0. Received: size=-1".

    Example:
    >>> check_int("batch_size", 32, minimum=1)
    32
    """
    if not _is_int(value) or not _within(value, minimum, maximum):
        _fail(name, "an int" + _interval(minimum, maximum, None, None), value)
    return int(value)


def check_number(name, value, minimum=None, maximum=None, *, greater_than=None, less_than=None):
    """Check that an argument is a real number within bounds, closed or open.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given.
        minimum: the smallest value allowed (a closed bound), or None.
        maximum: the largest value allowed (a closed bound), or None.
        greater_than: a bound the value must exceed (an open bound), or None; not with `minimum`.
        less_than: a bound the value must stay below (an open bound), or None; not with `maximum`.

    Returns:
        `value` as a Python `float`.

    Raises:
        ValueError: `value` is not a real number (a `bool` is not), is NaN, or lies outside the
            bounds; the message names the argument, the bounds and the value, e.g.
            "`temperature` must be a number > 0. Received: temperature=0".
        TypeError: both bounds of one side are given (a mistake of the caller, not of its user).

    Example:
    >>> check_number("max_rotation", 45, 0, 180)
    45.0
    """
    if minimum is not None and greater_than is not None or maximum is not None and less_than is not None:
        raise TypeError(f"check_number({name!r}): give `minimum` or `greater_than`, `maximum` or `less_than`, not both")
    if not _is_number(value) or not _within(value, minimum, maximum, greater_than, less_than):
        _fail(name, "a number" + _interval(minimum, maximum, greater_than, less_than), value)
    return float(value)


def check_rate(name, value, *, allow_zero=True, allow_one=False):
    """Check that an argument is a rate: a number between 0 and 1, by default in `[0, 1)`.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given.
        allow_zero: whether 0 is allowed (`[0, ...`) or not (`(0, ...`).
        allow_one: whether 1 is allowed (`..., 1]`) or not (`..., 1)`).

    Returns:
        `value` as a Python `float`.

    Raises:
        ValueError: `value` is not a number (a `bool` is not) or lies outside the interval; the
            message names the argument, the interval and the value, e.g. "`dropout_rate` must
            be a number in [0, 1). Received: dropout_rate=1".

    Example:
    >>> check_rate("mask_rate", 0.15, allow_zero=False)
    0.15
    """
    return check_number(
        name,
        value,
        minimum=0 if allow_zero else None,
        greater_than=None if allow_zero else 0,
        maximum=1 if allow_one else None,
        less_than=None if allow_one else 1,
    )


def check_choice(name, value, choices):
    """Check that an argument is one of its choices (a score, a variant, a split...).

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given.
        choices: the allowed values (a tuple, or any iterable: a dict gives its keys); include
            None where None is allowed.

    Returns:
        `value`.

    Raises:
        ValueError: `value` is not one of `choices`; the message names the argument, the choices
            and the value, e.g. "`split` must be one of ('train', 'test'). Received: split='dev'".

    Example:
    >>> check_choice("side", "source", ("source", "target"))
    'source'
    """
    choices = tuple(choices)
    if value not in choices:
        _fail(name, f"one of {choices}", value)
    return value


def check_bool(name, value):
    """Check that an argument is a `bool` (not merely truthy: `0`, `1`, `"no"` are refused).

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given.

    Returns:
        `value`.

    Raises:
        ValueError: `value` is not `True` or `False`; the message names the argument and the value.

    Example:
    >>> check_bool("normalize", False)
    False
    """
    if not isinstance(value, bool):
        _fail(name, "a bool", value)
    return value


def check_ints(name, value, minimum=None, maximum=None, *, length=None, min_length=1):
    """Check that an argument is a tuple (or list) of ints within bounds, e.g. the widths of layers.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: the value given: a tuple or a list.
        minimum: the smallest value allowed of each element, or None.
        maximum: the largest value allowed of each element, or None.
        length: the exact number of elements, or None for any number of at least `min_length`.
        min_length: the fewest elements allowed when `length` is None (0 allows an empty tuple).

    Returns:
        `value` as a tuple of Python `int`s.

    Raises:
        ValueError: `value` is not a tuple or list, has the wrong length, or holds an element
            that is not an int (a `bool` is not) within the bounds; the message names the
            argument, what it may be and the value, e.g. "`output_size` must be a tuple of 2
            ints >= 1. Received: output_size=(12,)".

    Example:
    >>> check_ints("filters", [16, 32], minimum=1)
    (16, 32)
    """
    if length is not None:
        expected = f"a tuple of {length} ints"
    elif min_length == 1:
        expected = "a non-empty tuple of ints"
    else:
        expected = f"a tuple of {min_length} or more ints" if min_length > 1 else "a tuple of ints"
    expected += _interval(minimum, maximum, None, None)
    if (
        not isinstance(value, (tuple, list))
        or (len(value) != length if length is not None else len(value) < min_length)
        or not all(_is_int(v) and _within(v, minimum, maximum) for v in value)
    ):
        _fail(name, expected, value)
    return tuple(int(v) for v in value)
