"""Small C helpers shipped as source, compiled on first use with the machine's C compiler.

The harness is pure Python; where one step must run without the GIL (the pacer's sends,
harness/_pacer.c) it is a few dozen lines of C compiled here once per source and machine into
`$PASSPORT_CACHE/native/` (default `~/.cache/passport/native/`) with `$CC` (default `cc`), then
loaded with ctypes. Where there is no compiler, the platform is not Linux, or
`PASSPORT_NATIVE=0`, `load` says why and the caller uses its Python path: a helper makes the
harness cheaper and more precise, never possible.

A cached library is loaded only when it is a regular file owned by this user and writable by no
one else; otherwise it is compiled again under a new name.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NativeLibrary", "load"]

_COMPILE_TIMEOUT_S = 60


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded helper: `released` calls drop the GIL for the call (for what waits), `held`
    calls keep it (for what takes a microsecond)."""

    released: ctypes.CDLL
    held: ctypes.PyDLL
    path: Path


def _cache_dir() -> Path:
    return Path(os.environ.get("PASSPORT_CACHE", Path.home() / ".cache" / "passport")) / "native"


def _trusted(path: Path) -> bool:
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _compile(source: Path, target: Path) -> str | None:
    """Compile `source` into `target` (written beside it, then renamed); the reason on failure."""
    compiler = os.environ.get("CC", "cc")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)],
                              capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        os.unlink(tmp)
        return f"cannot run the C compiler {compiler!r}: {exc}"
    if done.returncode != 0:
        os.unlink(tmp)
        return f"{compiler} failed: {(done.stderr or done.stdout).strip()[:300]}"
    os.chmod(tmp, 0o700)
    os.replace(tmp, target)
    return None


def load(name: str) -> NativeLibrary | str:
    """The helper `harness/_<name>.c`, compiled if need be and loaded; or why it cannot be."""
    if os.environ.get("PASSPORT_NATIVE", "1") == "0":
        return "disabled by PASSPORT_NATIVE=0"
    if not sys.platform.startswith("linux"):
        return f"native helpers are built for Linux only (this is {sys.platform})"
    source = Path(__file__).with_name(f"_{name}.c")
    try:
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        return f"its source is missing: {exc}"
    target = _cache_dir() / f"{name}-{digest}-{platform.machine()}.so"
    try:
        if not _trusted(target):
            if target.exists() or target.is_symlink():
                target = target.with_name(f"{target.stem}-{os.getpid()}.so")  # never load what another could write
            reason = _compile(source, target)
            if reason is not None:
                return reason
        return NativeLibrary(ctypes.CDLL(str(target)), ctypes.PyDLL(str(target)), target)
    except OSError as exc:
        return f"cannot build or load {target}: {exc}"
