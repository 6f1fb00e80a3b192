"""Files: written so that a process killed at any moment leaves the old version or the new one; hashed."""

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def fsync_path(path):
    """Flush a file's data, or a folder's entries, to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_text_atomically(path, text):
    """Write `text` to `path` through a staging file renamed into place.

    Args:
        path: the file to write; missing parent folders are made.
        text: its new content (UTF-8).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".staging-{path.name}")
    staging.write_text(text, encoding="utf-8")
    fsync_path(staging)
    os.replace(staging, path)


def sha256_of(path):
    """The SHA-256 of a file's bytes, as a hex string (read a megabyte at a time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def staging_folder(parent, prefix=".staging-"):
    """A new, empty folder in `parent` to write into before it is renamed into place.

    The body renames it where it belongs; if the body raises (or is interrupted), the folder and
    whatever was written into it are removed, so no half-written folder is left behind.

    Args:
        parent: the folder to make it in (made if missing); the rename target should be in it too.
        prefix: the start of its name.

    Yields:
        `Path` of the folder.
    """
    Path(parent).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
