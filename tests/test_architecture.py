"""The package's import graph keeps its architecture: layered contracts and no import circle.

The contracts live in setup.cfg (`[importlinter]`): cli above runs above evaluation and export,
above training and decoding, above models above layers above config and masks above checks
(the argument checks every module may use); data knows no model and no job; vision stands beside
the job. Import Linter checks them on the whole graph, imports inside functions included. A
circle between two modules (each importing the other, directly or through others) is a second
check, on every module of the package: grimp's graph, Tarjan's strongly connected components.
The benchmarks are a package of studies beside it: each study imports only `benchmarks.harness`
and the package (an independence contract, which must name every study folder), the harness
imports no study, and the package imports no benchmark (a contract, and a third check that reads
every import statement).
"""

import ast
import configparser
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "keras_transformer"


def test_import_linter_contracts_hold():
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='setup.cfg', no_cache=True, no_logo=True))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def circles(imports):
    """The import circles of a graph `{module: set of modules it imports}`: sorted lists of modules, one per circle.

    A circle is a strongly connected component of more than one module (Tarjan's algorithm), or a
    module that imports itself.
    """
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in imports.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1 or module in imports.get(module, ()):
                found.append(sorted(component))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return sorted(found)


def test_no_module_of_the_package_imports_itself_back():
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    assert len(imports) > 40  # the whole package was read
    assert circles(imports) == []


def test_circles_finds_every_circle_and_nothing_else():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": {"g"}, "g": set()}
    assert circles(imports) == [["a", "b", "c"], ["e"]]
    assert circles({"a": {"b"}, "b": {"c"}}) == []


def test_the_package_imports_no_benchmark_or_study():
    # The studies are one package, `benchmarks` (`python -m benchmarks.<area>.<study>`), whose modules no
    # file puts on `sys.path` one by one: an import of any of them starts with `benchmarks`.
    studies = {path.parent.name for path in (ROOT / "benchmarks").glob("*/*/__main__.py")}
    assert {"pretraining", "lookup"} <= studies and (ROOT / "benchmarks" / "__init__.py").is_file()
    found = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}: {name}" for name in names if name.split(".")[0] == "benchmarks"]
    assert found == []


def test_the_independence_contract_names_every_study():
    # A new study folder must join setup.cfg's `studies` contract, or nothing would keep it apart.
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    listed = config["importlinter:contract:studies"]["modules"].split()
    folders = sorted(
        ".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "benchmarks").glob("*/*/__main__.py")
    )
    assert listed == folders
