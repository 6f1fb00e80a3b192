"""Damaged export versions are found by their checksums and never read: an older intact version is, or a clear error.

The damage is done to copies of the shared tiny run's export, one kind at a time: a truncated or
altered variables file, a missing asset, a half-written `saved_model.pb`.
"""

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from keras_transformer.cli import main
from keras_transformer.export import CHECKSUMS_FILE, DamagedExportError, latest_version_dir, version_problems

VARIABLES = "variables/variables.data-00000-of-00001"


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _alter(path):  # one byte changed, the size kept: TensorFlow would load other weights without a word
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated variables": (VARIABLES, _truncate, f"{VARIABLES} does not match its checksum"),
    "altered variables": (VARIABLES, _alter, f"{VARIABLES} does not match its checksum"),
    "missing asset": ("assets/target_vocab.txt", Path.unlink, "assets/target_vocab.txt is missing"),
    "half-written saved_model.pb": ("saved_model.pb", _truncate, "saved_model.pb does not match its checksum"),
}


@pytest.fixture
def two_versions(trained_run, tmp_path):
    """A model folder holding the shared export twice, as versions 1 and 2: `(model folder, version 2)`."""
    _, summary = trained_run
    model_dir = tmp_path / "dates"
    for version in ("1", "2"):
        shutil.copytree(summary["export_path"], model_dir / version)
    return model_dir, model_dir / "2"


def test_an_export_lists_every_file_of_its_version_with_its_sha256(trained_run):
    _, summary = trained_run
    version_dir = Path(summary["export_path"])
    listed = {}
    for line in (version_dir / CHECKSUMS_FILE).read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    files = {p.relative_to(version_dir).as_posix() for p in version_dir.rglob("*") if p.is_file()}
    assert set(listed) == files - {CHECKSUMS_FILE}
    assert {"saved_model.pb", VARIABLES, "assets/target_vocab.txt", "assets.extra/tf_serving_warmup_requests"} <= set(
        listed
    )
    for name, digest in listed.items():
        assert hashlib.sha256((version_dir / name).read_bytes()).hexdigest() == digest, name
    assert version_problems(version_dir) == []
    if shutil.which("sha256sum"):  # the format the coreutils tool checks
        checked = subprocess.run(
            ["sha256sum", "--check", "--strict", CHECKSUMS_FILE], cwd=version_dir, capture_output=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_version_is_named_and_passed_over_for_the_newest_intact_one(two_versions, kind):
    model_dir, newest = two_versions
    name, damage, problem = DAMAGE[kind]
    damage(newest / name)
    if "checksum" in problem:
        problem += f" ({(newest / name).stat().st_size} bytes now)"
    assert version_problems(newest) == [problem]
    skipped = []
    assert latest_version_dir(model_dir, on_skip=lambda *args: skipped.append(args)) == model_dir / "1"
    assert skipped == [(newest, [problem])]
    with pytest.warns(UserWarning, match=re.escape(f"skipped damaged version {newest}: {problem}")):
        assert latest_version_dir(model_dir) == model_dir / "1"
    with pytest.raises(DamagedExportError, match=re.escape(f"{newest} is damaged: {problem}")):
        latest_version_dir(newest)  # asked for by its own path: refused, not replaced


def test_with_every_version_damaged_the_error_names_each(two_versions):
    model_dir, newest = two_versions
    _truncate(model_dir / "1" / VARIABLES)
    (newest / "assets" / "source_vocab.txt").unlink()
    message = (
        f"No intact version in {model_dir}: version 2: assets/source_vocab.txt is missing; "
        f"version 1: {VARIABLES} does not match its checksum ("
    )
    with pytest.raises(DamagedExportError, match=re.escape(message)):
        latest_version_dir(model_dir)


def test_a_version_without_checksums_is_read_as_it_is_and_one_without_a_graph_is_not(two_versions):
    model_dir, newest = two_versions
    (newest / CHECKSUMS_FILE).unlink()  # as exported before checksums existed
    assert version_problems(newest) == [] and latest_version_dir(model_dir) == newest
    (newest / "saved_model.pb").unlink()
    assert version_problems(newest) == ["saved_model.pb is missing"]
    with pytest.warns(UserWarning, match="saved_model.pb is missing"):
        assert latest_version_dir(model_dir) == model_dir / "1"


def test_a_bad_checksums_line_is_a_problem_not_a_crash(two_versions):
    _, newest = two_versions
    count = len((newest / CHECKSUMS_FILE).read_text().splitlines())
    with open(newest / CHECKSUMS_FILE, "a") as file:
        file.write("not a checksum\n")
    assert version_problems(newest) == [f"{CHECKSUMS_FILE} line {count + 1} is not '<sha256>  <path>'"]


def test_translate_reads_the_newest_intact_version_and_says_which_it_skipped(two_versions, capsys):
    model_dir, newest = two_versions
    assert main(["translate", "--model", str(newest), "21.03.1987"]) == 0
    intact = capsys.readouterr().out
    _alter(newest / VARIABLES)
    assert main(["translate", "--model", str(model_dir), "21.03.1987"]) == 0
    out, err = capsys.readouterr()
    assert out == intact  # version 1's translation: the altered weights were never loaded
    assert f"warning: skipped version 2 of {model_dir}, damaged: {VARIABLES} does not match its checksum" in err
    _truncate(model_dir / "1" / "saved_model.pb")
    assert main(["translate", "--model", str(model_dir), "21.03.1987"]) == 2
    assert f"error: No intact version in {model_dir}: version 2: {VARIABLES}" in capsys.readouterr().err
