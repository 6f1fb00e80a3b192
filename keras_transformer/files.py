"""Writing files so that a process killed at any moment leaves the old version or the new one."""

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
