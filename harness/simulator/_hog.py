"""A busy machine on demand: one spinning process per core, for tests and benchmarks that must
hold on a shared CI machine (the judgments of compare and the validity rules), not only on a
quiet one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["cpu_hog"]


@contextlib.contextmanager
def cpu_hog(processes: int | None = None) -> Iterator[int]:
    """`processes` busy-looping Python processes (default: one per core) while the block runs;
    yields their number. They are killed when the block ends, however it ends."""
    count = processes if processes is not None else (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
             for _ in range(count)]
    try:
        yield count
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
