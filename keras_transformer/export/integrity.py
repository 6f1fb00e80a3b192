"""Checksums of an exported version, and what is wrong with a version that no longer matches them.

Every version folder an export writes holds `checksums.sha256`, one line per other file of the
version: `<SHA-256>  <path in the version folder>`, the format `sha256sum --check` reads
(`cd EXPORT_DIR/MODEL_NAME/3 && sha256sum --check checksums.sha256`). The export writes it into
its staging folder last, after the SavedModel and the warm-up requests, and then renames the
folder into place.

A version is damaged when a file the list names is missing or no longer has its bytes: a truncated
or altered variables file, a missing asset, a half-written `saved_model.pb`, a version copied only
in part. `savedmodel.latest_version_dir` reads the newest intact version and names the damaged
ones it passed over. A version without `checksums.sha256` (exported before checksums existed) is
read as it is, as long as it has a `saved_model.pb`.
"""

import re
from pathlib import Path

from keras_transformer.files import sha256_of, write_text_atomically

CHECKSUMS_FILE = "checksums.sha256"
# The formats an export writes: each one's model file (which every version must hold and list) and
# its name in messages.
EXPORT_FORMATS = {
    "savedmodel": ("saved_model.pb", "SavedModel"),
    "ctranslate2": ("model.bin", "CTranslate2 model"),
}
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


class DamagedExportError(OSError):
    """An export version (or every version of a model) fails its checksums; the message says how."""


def write_checksums(version_dir):
    """Write `version_dir/checksums.sha256`, the SHA-256 of every other file under `version_dir`.

    Args:
        version_dir: a SavedModel's folder, complete.

    Returns:
        `Path` of the checksums file.
    """
    version_dir = Path(version_dir)
    files = sorted(path for path in version_dir.rglob("*") if path.is_file() and path.name != CHECKSUMS_FILE)
    lines = "".join(f"{sha256_of(path)}  {path.relative_to(version_dir).as_posix()}\n" for path in files)
    write_text_atomically(version_dir / CHECKSUMS_FILE, lines)
    return version_dir / CHECKSUMS_FILE


def version_problems(version_dir, export_format="savedmodel"):
    """What is wrong with an export version: a list of short sentences, empty where it is intact.

    Checks every file `checksums.sha256` names against its SHA-256; without that file, only that
    the format's model file (`saved_model.pb`) is there.

    Args:
        version_dir: a version folder (`EXPORT_DIR/MODEL_NAME/N`) or any SavedModel folder.
        export_format: a key of `EXPORT_FORMATS`: `"savedmodel"` or `"ctranslate2"` (`model.bin`).

    Returns:
        list of str, e.g. `["variables/variables.index is missing"]`.
    """
    model_file, _ = EXPORT_FORMATS[export_format]
    version_dir = Path(version_dir)
    checksums = version_dir / CHECKSUMS_FILE
    if not checksums.is_file():
        return [] if (version_dir / model_file).is_file() else [f"{model_file} is missing"]
    try:
        lines = checksums.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return [f"{CHECKSUMS_FILE} cannot be read ({error})"]
    problems, listed = [], set()
    for number, line in enumerate(lines, 1):
        match = _LINE.match(line)
        if match is None:
            problems.append(f"{CHECKSUMS_FILE} line {number} is not '<sha256>  <path>'")
            continue
        expected, name = match.groups()
        listed.add(name)
        path = version_dir / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif sha256_of(path) != expected:
            problems.append(f"{name} does not match its checksum ({path.stat().st_size} bytes now)")
    if model_file not in listed:
        problems.append(f"{CHECKSUMS_FILE} does not list {model_file}")
    return problems
