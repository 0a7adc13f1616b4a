"""Writes into a run folder that never follow a symlink someone planted there.

A file is written to a fresh temporary name in the same folder (random, created exclusively,
never through a link) and renamed over its target: a rename replaces a symlink at the target
itself instead of writing where it points, and readers see the old file or the new one, never
half of it. A folder that is a symlink is replaced by a real one before anything is written in
it. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["open_new", "write_new", "real_dir"]


def real_dir(path: Path) -> Path:
    """`path` as a real folder (created if missing; a symlink in its place removed first)."""
    path = Path(path)
    if path.is_symlink():
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def open_new(target: Path) -> Iterator[BinaryIO]:
    """A binary file that becomes `target` when the block ends without an error (and is removed
    when it does not)."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_new(target: Path, data: bytes) -> None:
    """Write `data` as `target` (see `open_new`)."""
    with open_new(target) as file:
        file.write(data)
