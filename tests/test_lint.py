"""The code reads one way: ruff's lint passes, and docstrings are all in the Google style.

The lint (configured in `pyproject.toml`, over every Python file and notebook) covers pyflakes,
pycodestyle, import order and the Google docstring convention (pydocstyle rules). ruff cannot see
reStructuredText markup inside a docstring, so a second test rejects it: Sphinx roles (a role
name between colons before a backtick), double-backtick literals and underlined section banners.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON_PATHS = ("keras_transformer", "tests", "benchmarks", "train.py")
RST_MARKUP = {
    "a Sphinx role": re.compile(r":(func|class|meth|mod|attr|obj|data|exc|ref):`"),
    "a double-backtick literal": re.compile(r"``"),
    "an underlined section banner": re.compile(r"^\s*\S.*\n\s*(-{3,}|={3,}|~{3,})\s*$", re.MULTILINE),
}


def python_files():
    for name in PYTHON_PATHS:
        path = ROOT / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def docstrings(path):
    """`(line, docstring)` of the module and of every class and function in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                yield getattr(node, "lineno", 1), text


def test_ruff_lint_passes():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", list(python_files()), ids=lambda path: str(path.relative_to(ROOT)))
def test_docstrings_use_no_restructuredtext_markup(path):
    found = [
        f"line {line}: {what}"
        for line, text in docstrings(path)
        for what, pattern in RST_MARKUP.items()
        if pattern.search(text)
    ]
    assert found == [], f"{path.name}: Google-style docstrings use single backticks and plain headings ({found})"


def test_the_markup_check_sees_each_kind_of_markup():
    for text in ("See :func:`split_words`.", "Use ``x``.", "The task\n--------\nDates."):
        assert any(pattern.search(text) for pattern in RST_MARKUP.values()), text
    google = "Args:\n    x: a `[B, T]` tensor; `-2^32 + 1` masks."
    assert not any(pattern.search(google) for pattern in RST_MARKUP.values())
