"""The `learning` fixture fails a test whose value misses its bar, and the margin sweep reads what it recorded."""

import math

import pytest
from conftest import LearningCheck
from learning_margins import measurements, summarize


def recorder():
    recorded = []
    return recorded, lambda name, value: recorded.append((name, value))


def test_check_returns_a_value_that_clears_its_bars_and_records_it():
    recorded, record = recorder()
    check = LearningCheck(seed=3, record_property=record)
    assert check.check("loss ratio", 0.25, below=0.7) == 0.25
    assert check.check("accuracy", 0.6, above=0.15, below=0.95) == 0.6
    assert recorded[0] == ("learning:loss ratio", repr({"value": 0.25, "below": 0.7, "above": None}))


@pytest.mark.parametrize(
    "value, bars, message",
    [
        (0.8, {"below": 0.7}, r"loss ratio = 0.8, the bar is < 0.7 \(seed 3\)"),
        (0.1, {"above": 0.15, "below": 0.95}, r"loss ratio = 0.1, the bar is < 0.95 and > 0.15 \(seed 3\)"),
        (math.nan, {"below": 0.7}, r"loss ratio = nan"),
    ],
    ids=["above_the_upper_bar", "below_the_lower_bar", "nan"],
)
def test_check_fails_naming_the_value_the_bar_and_the_seed(value, bars, message):
    recorded, record = recorder()
    with pytest.raises(AssertionError, match=message):
        LearningCheck(seed=3, record_property=record).check("loss ratio", value, **bars)
    assert len(recorded) == 1  # recorded before failing: the sweep sees the value that missed


def test_sweep_reads_recorded_values_and_failures_from_a_junit_report(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_x" name="test_a"><properties>'
        "<property name=\"learning:loss\" value=\"{'value': 0.2, 'below': 0.7, 'above': None}\" />"
        '<property name="unrelated" value="1" /></properties></testcase>'
        '<testcase classname="tests.test_x" name="test_b"><failure message="boom" /></testcase>'
        "</testsuite></testsuites>"
    )
    found = measurements(report)
    assert found[0] == ("tests.test_x::test_a", "loss", {"value": 0.2, "below": 0.7, "above": None})
    assert found[1][:2] == ("tests.test_x::test_b", "FAILED") and len(found) == 2


def test_sweep_summary_gives_each_checks_range_and_bar():
    rows = [
        {"test": "t", "check": "loss", "value": value, "below": 0.7, "above": None, "seed": seed, "setting": "on"}
        for seed, value in enumerate([0.3, 0.1, 0.25])
    ]
    assert summarize(rows) == ["t  loss: 0.1 .. 0.3 over 3 runs (bar < 0.7)"]
