"""The benchmarks are a package of studies, whose flags use the config fields' names; no file edits `sys.path`.

Each study runs as `python -m benchmarks.<area>.<study>` and names a config's setting by the config
field's own name.

Every study is a folder `benchmarks/<area>/<study>/` with a `__main__.py` whose `main(argv)` parses
its flags. The flags are read from the parser each study builds (its `parse_args` is intercepted,
so nothing runs); a flag that sets a field of `TrainConfig`, `ModelConfig` or `LanguageModelConfig`
must be spelled `--field-name`, and a flag must not abbreviate a field (`--warmup` for
`warmup_steps`, `--lr-scale` for `learning_rate_scale`, `--jit` for `jit_compile`).
"""

import argparse
import dataclasses
import importlib
import json
import re
from pathlib import Path

import pytest

from keras_transformer.config import LanguageModelConfig, ModelConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
STUDIES = sorted(".".join(path.parent.relative_to(ROOT).parts) for path in BENCHMARKS.glob("*/*/__main__.py"))
FIELDS = {
    field.name for config in (TrainConfig, ModelConfig, LanguageModelConfig) for field in dataclasses.fields(config)
}
# Abbreviations a flag might use for a word of a field's name.
ABBREVIATIONS = {"lr": "learning_rate", "len": "length"}
# The last word of a field that a flag might leave out (`--warmup` for `warmup_steps`, `--jit` for `jit_compile`).
UNIT_WORDS = ("steps", "rate", "size", "compile", "scale", "len", "length", "momentum")


class _Parsed(Exception):
    """Raised by the intercepted `parse_args`, carrying the parser a study built."""

    def __init__(self, parser):
        super().__init__(parser.prog)
        self.parser = parser


def study_parsers(module_name, monkeypatch):
    """Every parser a study's `main` builds, its sub-commands' included, without running it."""

    def intercept(parser, args=None, namespace=None):
        raise _Parsed(parser)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", intercept)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", intercept)
    main = importlib.import_module(f"{module_name}.__main__").main
    with pytest.raises(_Parsed) as parsed:
        main([])
    parsers = [parsed.value.parser]
    for parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return parsers


def abbreviated_field(name):
    """The config field that a flag's name abbreviates, or None: a token prefix of a field, or a spelled-out field."""
    if name in FIELDS:
        return None
    spelled = "_".join(ABBREVIATIONS.get(token, token) for token in name.split("_"))
    if spelled in FIELDS:
        return spelled
    for suffix in UNIT_WORDS:
        if f"{spelled}_{suffix}" in FIELDS:
            return f"{spelled}_{suffix}"
    return None


def test_every_study_folder_is_a_package_with_an_entry_point():
    assert len(STUDIES) >= 15, STUDIES
    for study in STUDIES:
        folder = ROOT.joinpath(*study.split("."))
        assert (folder / "__init__.py").is_file(), study
        assert (folder.parent / "__init__.py").is_file(), study
    loose = sorted(path.name for path in BENCHMARKS.glob("*.py") if path.name != "__init__.py")
    assert loose == [], f"scripts outside a study folder: {loose}"


@pytest.mark.parametrize("study", STUDIES)
def test_flags_that_set_a_config_field_have_the_fields_name(study, monkeypatch):
    for parser in study_parsers(study, monkeypatch):
        for action in parser._actions:
            long_names = [option[2:].replace("-", "_") for option in action.option_strings if option.startswith("--")]
            if action.dest in FIELDS and action.option_strings:
                assert action.dest in long_names, f"{study}: {action.option_strings} sets {action.dest}"
            for name in long_names:
                field = abbreviated_field(name)
                assert field is None, f"{study}: --{name.replace('_', '-')} abbreviates the field {field}"


def test_abbreviated_field_finds_the_old_names():
    assert abbreviated_field("warmup") == "warmup_steps"
    assert abbreviated_field("lr_scale") == "learning_rate_scale"
    assert abbreviated_field("jit") == "jit_compile"
    assert abbreviated_field("dropout") == "dropout_rate"
    assert abbreviated_field("batch") == "batch_size"
    assert abbreviated_field("warmup_steps") is None
    assert abbreviated_field("beam") == "beam_size"
    for name in ("seeds", "steps", "length", "model", "source", "task", "train_size", "batches"):
        assert abbreviated_field(name) is None, name


SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.insert|\.append|\.extend|\[[^\]]*\]\s*=|\s*[+]?=)")


def test_no_file_edits_sys_path():
    sources = [path for path in ROOT.rglob("*.py") if not {".git", ".venv", "build"} & set(path.parts)]
    edits = [str(path.relative_to(ROOT)) for path in sources if SYS_PATH_EDIT.search(path.read_text())]
    for notebook in ROOT.glob("notebooks/*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        if any(SYS_PATH_EDIT.search("".join(cell["source"])) for cell in cells if cell["cell_type"] == "code"):
            edits.append(str(notebook.relative_to(ROOT)))
    assert edits == [], f"files that edit sys.path: {edits}"
