"""Every third-party module the package imports is installed by `pip install -e .`.

A module the library imports but `install_requires` does not name works in the test environment
(the `test` extra installs it) and fails for a user who followed the README's first command, as
`keras_hub` once did for `train.py --task lm`. The test reads the imports from the source (an AST
scan of `keras_transformer/`), finds the distribution that provides each module
(`importlib.metadata.packages_distributions`), and requires it in setup.cfg's `install_requires`.

The exceptions are the optional modules, each imported only inside the functions that need it
and named in its extra: `jax` and `torch` (the `backends` extra), which run only under
`KERAS_BACKEND=jax` or `torch`, where Keras itself needs them installed, and `ctranslate2` (the
`ctranslate2` extra), which only the CTranslate2 export and its translator use.
"""

import ast
import configparser
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "keras_transformer"
# Optional modules, imported only inside the functions that need them -> the extra that installs them.
OPTIONAL_MODULES = {"jax": "backends", "torch": "backends", "ctranslate2": "ctranslate2"}


def requirement_names(lines):
    """Normalized distribution names (PEP 503) of requirement lines, skipping blanks and `%(extra)s` references."""
    names = set()
    for line in lines.splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("%("):
            names.add(normalized(re.match(r"[A-Za-z0-9._-]+", line).group(0)))
    return names


def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def setup_requirements():
    """`(install_requires, {extra: names})` from setup.cfg, as normalized distribution names."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "setup.cfg")
    extras = {extra: requirement_names(lines) for extra, lines in config["options.extras_require"].items()}
    return requirement_names(config["options"]["install_requires"]), extras


def third_party_imports(source, filename="<source>"):
    """`{module: inside_a_function}` of the top-level modules `source` imports, minus the stdlib and the package.

    `inside_a_function` is True when every import of the module is inside a function body.
    """
    tree = ast.parse(source, filename=filename)
    found = {}

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top != PACKAGE and top not in sys.stdlib_module_names and top != "__future__":
                    found[top] = found.get(top, True) and in_function
            visit(child, nested)

    visit(tree, False)
    return found


def unlisted_imports(imports, install_requires, extras):
    """Problems of `imports` (`{module: inside_a_function}`) against the requirements: one line each."""
    providers = importlib.metadata.packages_distributions()
    problems = []
    for module, inside_a_function in sorted(imports.items()):
        distributions = {normalized(name) for name in providers.get(module, [])}
        if not distributions:
            problems.append(f"{module}: imported, but no installed distribution provides it")
        elif module in OPTIONAL_MODULES:
            if not inside_a_function:
                problems.append(f"{module}: an optional module must be imported inside a function")
            extra = OPTIONAL_MODULES[module]
            if not distributions & extras.get(extra, set()):
                problems.append(f"{module}: {sorted(distributions)} missing from the {extra!r} extra")
        elif not distributions & install_requires:
            problems.append(f"{module}: {sorted(distributions)} missing from install_requires")
    return problems


def package_imports():
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        for module, inside_a_function in third_party_imports(path.read_text(), str(path)).items():
            found[module] = found.get(module, True) and inside_a_function
    return found


def test_every_third_party_module_the_package_imports_is_in_install_requires():
    install_requires, extras = setup_requirements()
    imports = package_imports()
    assert {"tensorflow", "keras", "keras_hub", "tensorflow_text"} <= set(imports)  # the scan sees the package
    assert unlisted_imports(imports, install_requires, extras) == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("import keras_hub\n", "keras_hub: ['keras-hub'] missing from install_requires"),
        ("from keras_hub.samplers import GreedySampler\n", "keras_hub: ['keras-hub'] missing from install_requires"),
        ("import jax\n", "jax: an optional module must be imported inside a function"),
        ("import no_such_module_anywhere\n", "no_such_module_anywhere: imported, but no installed distribution"),
    ],
    ids=["import", "from_import", "backend_at_top_level", "not_installed"],
)
def test_the_guard_reports_an_import_that_pip_install_would_not_satisfy(source, problem):
    install_requires, extras = setup_requirements()
    problems = unlisted_imports(third_party_imports(source), install_requires - {"keras-hub"}, extras)
    assert len(problems) == 1 and problems[0].startswith(problem)


def test_the_guard_accepts_stdlib_the_package_and_backends_imported_in_functions():
    source = "import os\nfrom keras_transformer import masks\n\ndef devices():\n    import torch\n    return torch\n"
    install_requires, extras = setup_requirements()
    assert third_party_imports(source) == {"torch": True}
    assert unlisted_imports(third_party_imports(source), install_requires, extras) == []
