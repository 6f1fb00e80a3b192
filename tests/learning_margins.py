"""Measure the margins of the tests that assert learning: seeds 0 to 4, oneDNN on and off.

A test that asserts a model learns (marked `@pytest.mark.learning(seed=...)`, its bars checked by
the `learning` fixture of `conftest.py`) must clear its bars on every CPU kind, where kernels
round differently and a training run can take another path. This script reruns those tests with
each seed (`--learning-seed`) under each oneDNN setting, in a fresh pytest process per run, and
prints every measured value's range against its bar; the docstrings of the tests state the ranges
it printed. Usage:

    python tests/learning_margins.py                       # all learning tests, seeds 0-4, on and off
    python tests/learning_margins.py -k copy --seeds 0 1   # some of them
    python tests/learning_margins.py --settings on off avx2 --json margins.json

Settings: `on` (TensorFlow's default on x86), `off` (`TF_ENABLE_ONEDNN_OPTS=0`: Eigen kernels),
`avx2` (oneDNN limited to AVX2 instructions with `ONEDNN_MAX_CPU_ISA`, the kernels an AVX2-only
CPU runs; on a CPU with AVX512-BF16, TensorFlow still sends bfloat16 ops to oneDNN, which then
aborts the process, so the `mixed_bfloat16` tests show as FAILED there, as no real CPU would).
"""

import argparse
import ast
import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "on": {"TF_ENABLE_ONEDNN_OPTS": "1"},
    "off": {"TF_ENABLE_ONEDNN_OPTS": "0"},
    "avx2": {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def cpu():
    """This machine's CPU: `{"model", "family", "model_number", "stepping", "flags"}` (vector and matrix flags only).

    The model name alone can hide the generation ("AMD EPYC"); family, model number and stepping
    do not (AMD family 25 is Zen 3 and 4, family 26 Zen 5).
    """
    found, flags = {"model": platform.processor()}, []
    names = {"model name": "model", "cpu family": "family", "model": "model_number", "stepping": "stepping"}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break  # the end of the first processor's block
            key, _, value = (part.strip() for part in line.partition(":"))
            if key in names:
                found[names[key]] = value
            elif key == "flags":
                flags = sorted(f for f in value.split() if f.startswith(("avx", "amx", "fma")))
    except OSError:
        pass
    return {**found, "flags": flags}


def measurements(junit_xml):
    """`[(test id, check name, {"value", "below", "above"})]` recorded by the `learning` fixture."""
    found = []
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        for prop in case.iter("property"):
            if prop.get("name", "").startswith("learning:"):
                found.append((test, prop.get("name").removeprefix("learning:"), ast.literal_eval(prop.get("value"))))
        if case.find("failure") is not None or case.find("error") is not None:
            found.append((test, "FAILED", {"value": float("nan"), "below": None, "above": None}))
    return found


def run(seed, setting, selection, workers):
    """Run the learning tests once; returns their measurements."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.xml"
        command = [sys.executable, "-m", "pytest", "-m", "learning", "--learning-seed", str(seed), "-q"]
        command += ["-n", str(workers), "-p", "no:cacheprovider", f"--junitxml={report}", *selection]
        subprocess.run(command, cwd=ROOT, env={**os.environ, **SETTINGS[setting]}, capture_output=True)
        return measurements(report) if report.exists() else [("(pytest)", "FAILED", {"value": float("nan")})]


def summarize(rows):
    """One line per (test, check): its bar and the range of its values over every run."""
    lines = []
    for test, name in sorted({(row["test"], row["check"]) for row in rows}):
        values = [row for row in rows if (row["test"], row["check"]) == (test, name)]
        low, high = min(row["value"] for row in values), max(row["value"] for row in values)
        bars = (("<", values[0].get("below")), (">", values[0].get("above")))
        bar = " and ".join(f"{sign} {value}" for sign, value in bars if value is not None)
        lines.append(f"{test}  {name}: {low:.4g} .. {high:.4g} over {len(values)} runs (bar {bar or '-'})")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds to train with")
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=["on", "off"], help="oneDNN")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression: only the matching learning tests")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers per run")
    parser.add_argument("--json", type=Path, help="also write every measurement and the CPU to this file")
    args = parser.parse_args(argv)
    selection = ["-k", args.keyword] if args.keyword else []
    rows = []
    for setting in args.settings:
        for seed in args.seeds:
            for test, name, measured in run(seed, setting, selection, args.workers):
                rows.append({"test": test, "check": name, "seed": seed, "setting": setting, **measured})
                print(f"{setting:>5} seed {seed}  {test}  {name}: {measured['value']:.4g}", flush=True)
    print("\nCPU: " + ", ".join(f"{key} {value}" for key, value in cpu().items() if key != "flags"))
    print("\n".join(summarize(rows)))
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu(), "measurements": rows}, indent=1))
    return 1 if any(row["check"] == "FAILED" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
