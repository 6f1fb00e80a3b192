"""The walkthrough notebooks in notebooks/ run top to bottom, every code cell, without a cell error.

Each notebook is executed from a copy in memory (the committed file, with its outputs, is never
rewritten) by a fresh `python3` kernel, with `notebooks/` as its working directory and
`NOTEBOOK_OUTPUT_DIR` pointing at a temporary folder, where the notebooks write everything they
make (vocabularies, run directories, SavedModels). The notebooks carry their own `assert`s, so
executing them also checks what they teach.

Every figure a notebook draws is checked as it is drawn (`notebooks/figures.py`): one resolution
(110 dpi), no text under 10 pixels, no TeX shown unrendered, no texts over each other or over the
edges of a diagram's box. And no figure is linked from the prose instead of shown: a notebook
opened anywhere but in this repository would show a broken link. A value the prose quotes from an
output is marked (`4.55<!--out-->`) and must be in one of the notebook's committed outputs.
"""

import json
import os
import re
from pathlib import Path

import nbclient
import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = (
    "01_attention_mechanics",
    "02_train_and_translate",
    "03_export_and_serve",
    "04_attention_family",
    "05_gpt_and_bert",
    "06_attention_in_vision",
    "07_vision_results",
)
CELL_TIMEOUT_S = 600


def test_every_notebook_in_the_folder_is_tested():
    assert sorted(path.stem for path in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, tmp_path, monkeypatch):
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in code_cells:  # only what this run produces counts: forget the committed outputs
        cell.outputs, cell.execution_count = [], None
    monkeypatch.setenv("NOTEBOOK_OUTPUT_DIR", str(tmp_path))  # inherited by the kernel process
    checks = tmp_path / "figure_checks.jsonl"  # what figures.watch finds in each figure drawn
    monkeypatch.setenv("NOTEBOOK_FIGURE_CHECKS", str(checks))
    # The kernel imports this checkout's package, whichever checkout an earlier `pip install -e` named.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
        # TensorFlow's C++ start-up logs go to the test's stderr, not into cell outputs.
        extra_arguments=["--IPKernelApp.capture_fd_output=False"],
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error

    # "Run all" runs every code cell, in order: none is empty or tagged to be skipped.
    assert [cell.execution_count for cell in code_cells] == list(range(1, len(code_cells) + 1))
    images = sum("image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", []))
    if name != "03_export_and_serve":  # 03 prints its results; the others teach with plots
        assert images >= 3, f"{name} drew {images} figures"
        drawn = [json.loads(line) for line in checks.read_text().splitlines()]
        assert drawn, f"{name} drew no figure through figures.use()"
        unreadable = {(figure["figure"], figure["title"]): figure["problems"] for figure in drawn if figure["problems"]}
        assert not unreadable, unreadable


# A value the prose quotes from an output is marked `4.55<!--out-->` (the comment shows nowhere): the
# text just before the marker must be in one of the notebook's outputs.
OUTPUT_MARK = re.compile(r"(\S+?)[`*]*<!--out-->")


def output_texts(notebook):
    """Every text the notebook's cells printed or displayed: streams, plain text, Markdown, HTML."""
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            data = output.get("data", {})
            texts.extend(data.get(kind, "") for kind in ("text/plain", "text/markdown", "text/html"))
    return "\n".join("".join(text) if isinstance(text, list) else text for text in texts)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_value_the_prose_quotes_is_in_an_output(name):
    notebook = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    outputs = output_texts(notebook)
    quoted = [
        (index, value.strip("`*(").rstrip(",.;:)"))
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown"
        for value in OUTPUT_MARK.findall(cell.source)
    ]
    assert [(index, value) for index, value in quoted if value not in outputs] == []


def test_no_notebook_links_a_figure_instead_of_showing_it():
    linked = {
        (path.stem, index): re.findall(r"!\[[^\]]*\]\(([^)]+)\)", cell.source)
        for path in NOTEBOOK_DIR.glob("*.ipynb")
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells)
        if cell.cell_type == "markdown"
    }
    assert {cell: links for cell, links in linked.items() if links} == {}
