"""keras_transformer.checks, the argument checks of the whole package.

Each check returns the value, refuses a bool for a number, holds its bounds, and says what went
wrong in the one message style (the argument, what it may be, `Received: name=value`). The
module imports nothing but the standard library.
"""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from keras_transformer import checks
from keras_transformer.checks import check_bool, check_choice, check_int, check_ints, check_number, check_rate


def raises(message):
    """`pytest.raises(ValueError)` matching `message` exactly (the whole message)."""
    return pytest.raises(ValueError, match="^" + re.escape(message) + "$")


# ---------------------------------------------------------------------------
# check_int
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, minimum, maximum",
    [
        (0, None, None),
        (-3, None, None),
        (1, 1, None),
        (7, None, 7),
        (5, 0, 9),
        (np.int64(4), 1, None),
        (2**70, 1, None),
    ],
)
def test_check_int_returns_a_good_value_as_a_python_int(value, minimum, maximum):
    result = check_int("n", value, minimum, maximum)
    assert result == value and type(result) is int


@pytest.mark.parametrize(
    "value, minimum, maximum, message",
    [
        (0, 1, None, "`n` must be an int >= 1. Received: n=0"),
        (10, None, 9, "`n` must be an int <= 9. Received: n=10"),
        (-1, 0, 9, "`n` must be an int in [0, 9]. Received: n=-1"),
        (10, 0, 9, "`n` must be an int in [0, 9]. Received: n=10"),
        (2.0, 1, None, "`n` must be an int >= 1. Received: n=2.0"),
        ("3", None, None, "`n` must be an int. Received: n='3'"),
        (None, 1, None, "`n` must be an int >= 1. Received: n=None"),
        (True, None, None, "`n` must be an int. Received: n=True"),
        (False, 0, None, "`n` must be an int >= 0. Received: n=False"),
    ],
)
def test_check_int_refuses_bools_other_types_and_values_out_of_bounds(value, minimum, maximum, message):
    with raises(message):
        check_int("n", value, minimum, maximum)


# ---------------------------------------------------------------------------
# check_number and check_rate
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, bounds",
    [
        (0, {}),
        (-2.5, {}),
        (0, {"minimum": 0}),
        (180, {"minimum": 0, "maximum": 180}),
        (1e-9, {"greater_than": 0}),
        (0.999, {"minimum": 0, "less_than": 1}),
        (np.float32(0.5), {"greater_than": 0, "maximum": 1}),
        (float("inf"), {"minimum": 0}),
    ],
)
def test_check_number_returns_a_good_value_as_a_python_float(value, bounds):
    result = check_number("x", value, **bounds)
    assert result == float(value) and type(result) is float


@pytest.mark.parametrize(
    "value, bounds, message",
    [
        (-1, {"minimum": 0}, "`x` must be a number >= 0. Received: x=-1"),
        (0, {"greater_than": 0}, "`x` must be a number > 0. Received: x=0"),
        (3, {"maximum": 2}, "`x` must be a number <= 2. Received: x=3"),
        (2, {"less_than": 2}, "`x` must be a number < 2. Received: x=2"),
        (181, {"minimum": 0, "maximum": 180}, "`x` must be a number in [0, 180]. Received: x=181"),
        (0, {"greater_than": 0, "maximum": 1}, "`x` must be a number in (0, 1]. Received: x=0"),
        (1, {"minimum": 0, "less_than": 1}, "`x` must be a number in [0, 1). Received: x=1"),
        (float("nan"), {}, "`x` must be a number. Received: x=nan"),
        ("0.1", {}, "`x` must be a number. Received: x='0.1'"),
        (True, {"minimum": 0}, "`x` must be a number >= 0. Received: x=True"),
        (None, {"greater_than": 0}, "`x` must be a number > 0. Received: x=None"),
    ],
)
def test_check_number_refuses_bools_other_types_and_values_out_of_bounds(value, bounds, message):
    with raises(message):
        check_number("x", value, **bounds)


def test_check_number_takes_one_bound_of_each_side():
    with pytest.raises(TypeError, match="not both"):
        check_number("x", 1, minimum=0, greater_than=0)
    with pytest.raises(TypeError, match="not both"):
        check_number("x", 1, maximum=2, less_than=2)


@pytest.mark.parametrize(
    "value, ends, good",
    [
        (0.0, {}, True),
        (0.5, {}, True),
        (1.0, {}, False),
        (0.0, {"allow_zero": False}, False),
        (1e-6, {"allow_zero": False}, True),
        (1.0, {"allow_one": True}, True),
        (1.0, {"allow_zero": False, "allow_one": True}, True),
        (-0.1, {"allow_one": True}, False),
        (1.5, {"allow_one": True}, False),
    ],
)
def test_check_rate_holds_its_interval(value, ends, good):
    if good:
        assert check_rate("rate", value, **ends) == value
    else:
        with pytest.raises(ValueError, match=r"^`rate` must be a number in [\[(]0, 1[\])]\. Received: rate="):
            check_rate("rate", value, **ends)


@pytest.mark.parametrize(
    "ends, interval", [({}, "[0, 1)"), ({"allow_zero": False}, "(0, 1)"), ({"allow_one": True}, "[0, 1]")]
)
def test_check_rate_names_its_interval_and_refuses_a_bool(ends, interval):
    with raises(f"`dropout_rate` must be a number in {interval}. Received: dropout_rate=False"):
        check_rate("dropout_rate", False, **ends)
    with raises(f"`dropout_rate` must be a number in {interval}. Received: dropout_rate=2"):
        check_rate("dropout_rate", 2, **ends)


# ---------------------------------------------------------------------------
# check_choice and check_bool
# ---------------------------------------------------------------------------
def test_check_choice_returns_a_choice_and_names_the_choices_otherwise():
    assert check_choice("split", "test", ("train", "test")) == "test"
    assert check_choice("hard", None, (None, "argmax")) is None
    assert check_choice("label", "month", {"month": 12, "decade": 10}) == "month"  # a dict's keys
    with raises("`split` must be one of ('train', 'test'). Received: split='dev'"):
        check_choice("split", "dev", ("train", "test"))
    with raises("`label` must be one of ('month', 'decade'). Received: label='year'"):
        check_choice("label", "year", {"month": 12, "decade": 10})
    with raises("`hard` must be one of (None, 'argmax'). Received: hard='soft'"):
        check_choice("hard", "soft", (None, "argmax"))


def test_check_bool_takes_only_true_and_false():
    assert check_bool("normalize", True) is True
    assert check_bool("normalize", False) is False
    for value in (0, 1, "yes", None, np.float32(1)):
        with raises(f"`normalize` must be a bool. Received: normalize={value!r}"):
            check_bool("normalize", value)


# ---------------------------------------------------------------------------
# check_ints
# ---------------------------------------------------------------------------
def test_check_ints_returns_a_tuple_of_python_ints():
    result = check_ints("filters", [16, np.int64(32)], 1)
    assert result == (16, 32) and all(type(v) is int for v in result)
    assert check_ints("size", (12, 12), 1, length=2) == (12, 12)
    assert check_ints("filters", (), 1, min_length=0) == ()
    assert check_ints("sizes", (3, 5, 7), 1, 7, min_length=2) == (3, 5, 7)


@pytest.mark.parametrize(
    "value, bounds, message",
    [
        ((), {}, "`v` must be a non-empty tuple of ints >= 1. Received: v=()"),
        ((4, 0), {}, "`v` must be a non-empty tuple of ints >= 1. Received: v=(4, 0)"),
        ((4, True), {}, "`v` must be a non-empty tuple of ints >= 1. Received: v=(4, True)"),
        ((4, 2.0), {}, "`v` must be a non-empty tuple of ints >= 1. Received: v=(4, 2.0)"),
        (4, {}, "`v` must be a non-empty tuple of ints >= 1. Received: v=4"),
        ("ab", {}, "`v` must be a non-empty tuple of ints >= 1. Received: v='ab'"),
        ((12,), {"length": 2}, "`v` must be a tuple of 2 ints >= 1. Received: v=(12,)"),
        ((3,), {"min_length": 2}, "`v` must be a tuple of 2 or more ints >= 1. Received: v=(3,)"),
        ([0], {"min_length": 0}, "`v` must be a tuple of ints >= 1. Received: v=[0]"),
        ((1, 9), {"maximum": 8}, "`v` must be a non-empty tuple of ints in [1, 8]. Received: v=(1, 9)"),
    ],
)
def test_check_ints_refuses_wrong_lengths_and_elements(value, bounds, message):
    with raises(message):
        check_ints("v", value, 1, **bounds)


# ---------------------------------------------------------------------------
# The module itself
# ---------------------------------------------------------------------------
def test_the_checks_import_only_the_standard_library():
    tree = ast.parse(Path(checks.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"numbers"}


def test_every_public_check_is_documented_and_returns_what_it_checked():
    public = [name for name in dir(checks) if name.startswith("check_")]
    assert public == ["check_bool", "check_choice", "check_int", "check_ints", "check_number", "check_rate"]
    for name in public:
        doc = getattr(checks, name).__doc__
        assert "Args:" in doc and "Returns:" in doc and "Raises:" in doc, name
