"""The run folder's disk: writable before anything is sent, roomy enough before anything is timed.

A run that cannot write its raw logs has measured nothing anyone can audit, so both are checked
up front: `make_run_folder` creates the folder and writes (and syncs) a probe file in it, and
`check_room` compares the free space with an estimate of what the raw logs will take. The
estimate is deliberately a floor, from the workload's own lengths and the smallest sizes measured
on real runs (a requests row ~570 bytes before its texts, a chunks row 180 bytes with the
simulator's small events and ~350 with llama.cpp's, ~4 characters a token; the parts as written
while timing, not the join after it), so a refusal means the timed phase could not have fitted.
A disk that fills anyway is handled during the run (the writers stop it at once; see `_timed.py`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from harness import Schedule
from passport._errors import OutputFolderError
from workloads import RequestSet

__all__ = ["make_run_folder", "need_bytes", "check_room"]

_REQUEST_ROW_BYTES = 500
_CHUNK_ROW_BYTES = 150
_CHARS_PER_TOKEN = 4
_REPORTS_BYTES = 2**20
_PROBE_BYTES = 4096


def make_run_folder(folder: Path) -> None:
    """Create `folder` and prove it takes a synced write; OutputFolderError (nothing created) if not."""
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise OutputFolderError(f"cannot create the run folder {folder}: {exc.strerror or exc}; "
                                "pass --out with a writable folder") from None
    probe = folder / ".write-check"
    try:
        with open(probe, "wb") as file:
            file.write(b"\0" * _PROBE_BYTES)
            file.flush()
            os.fsync(file.fileno())
        probe.unlink()
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise OutputFolderError(f"cannot write in {folder.parent}: {exc.strerror or exc}; "
                                "pass --out with a writable folder") from None


def _mean(request_set: RequestSet, column: str) -> float:
    value = pc.mean(request_set.table.column(column)).as_py()
    return float(value) if value is not None else 0.0


def need_bytes(schedule: Schedule, request_set: RequestSet, entries: np.ndarray, repetitions: int,
               full_text: bool) -> tuple[int, int]:
    """(bytes, requests): the floor of what the raw logs take, and the requests it counts."""
    scheduled = schedule.table.column("request_index").to_numpy()
    lengths = np.append(entries[1:], request_set.table.num_rows) - entries
    n_requests = int(lengths[scheduled].sum()) * repetitions
    output_tokens = _mean(request_set, "output_tokens_target")
    per_request = _REQUEST_ROW_BYTES + (output_tokens + 2) * _CHUNK_ROW_BYTES
    if full_text:
        per_request += (_mean(request_set, "input_tokens_target") + output_tokens) * _CHARS_PER_TOKEN
    return int(n_requests * per_request) + _REPORTS_BYTES, n_requests


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MiB" if n_bytes >= 2**20 else f"{n_bytes / 1024:,.0f} KiB"


def check_room(folder: Path, need: int, n_requests: int) -> None:
    """OutputFolderError, with the estimate, when the disk under `folder` is clearly too small."""
    free = shutil.disk_usage(folder).free
    if free < need:
        raise OutputFolderError(
            f"{folder.parent} has {_mib(free)} free, but the raw logs of this run's {n_requests:,} requests need "
            f"at least {_mib(need)}: free some space, pass --out on a larger disk, or measure fewer requests")
