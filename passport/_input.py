"""Input files read the way a user's file must be read: a regular file (or standard input for
`-`) of a bounded size, checked before a byte is read, so `/dev/zero`, a FIFO or a 100 MB file is
refused in milliseconds instead of filling memory or blocking. Standard library only: the CLI
checks a spec's path with it before importing anything heavy.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

__all__ = ["MAX_SPEC_BYTES", "check_input_file", "read_bounded"]

MAX_SPEC_BYTES = 4 * 2**20


def _refusal(info: os.stat_result, path: Path | str, what: str, max_bytes: int) -> str | None:
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        return f"{what} {path} is {kind}, not a file; give a file (or - for standard input)"
    if info.st_size > max_bytes:
        return f"{what} {path} is {info.st_size:,} bytes; a {what} is at most {max_bytes:,}"
    return None


def check_input_file(path: Path | str, what: str, max_bytes: int = MAX_SPEC_BYTES) -> None:
    """OSError when `path` cannot be reached, ValueError when it is not a regular file or is
    larger than `max_bytes`; nothing is read (`-`, standard input, passes)."""
    if str(path) != "-":
        refusal = _refusal(os.stat(path), path, what, max_bytes)
        if refusal is not None:
            raise ValueError(refusal)


def read_bounded(path: Path | str, what: str, max_bytes: int = MAX_SPEC_BYTES) -> bytes:
    """The bytes of `path` (`-`: standard input), checked as `check_input_file` does on the
    opened file itself (so a file swapped after the check is caught), at most `max_bytes`."""
    if str(path) == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of blocking
        try:
            refusal = _refusal(os.fstat(fd), path, what, max_bytes)
            if refusal is not None:
                raise ValueError(refusal)
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(max_bytes + 1)
        finally:
            os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"{what} {path} is over {max_bytes:,} bytes, the most a {what} may be")
    return data
