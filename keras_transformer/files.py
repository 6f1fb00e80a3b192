"""Files: written so that a process killed at any moment leaves the old version or the new one; hashed."""

import hashlib
import os
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
