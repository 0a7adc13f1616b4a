"""The run folder's files as an auditor reads them: tables (or a killed run's parts), sha256.

`RAW_FILES` are the files a passport lists with their sha256, size and row count; `load_table`
reads `<name>.parquet`, or the `<name>.parts/` a killed run leaves. pyarrow only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TypedDict

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["RAW_FILES", "FileFacts", "sha256_file", "sha256_bytes", "file_entries", "load_table"]

RAW_FILES = ("requests.parquet", "chunks.parquet", "telemetry.parquet", "schedule.parquet", "engine.log",
             "declared.json", "canaries.parquet")


class FileFacts(TypedDict):
    """One file of the passport's `files` table."""

    sha256: str
    bytes: int
    rows: int | None


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_entries(folder: Path) -> dict[str, FileFacts]:
    """sha256, size and (for Parquet) row count of each raw file present in the run folder."""
    entries: dict[str, FileFacts] = {}
    for name in RAW_FILES:
        path = Path(folder) / name
        if path.is_file():
            rows = pq.ParquetFile(path).metadata.num_rows if name.endswith(".parquet") else None
            entries[name] = FileFacts(sha256=sha256_file(path), bytes=path.stat().st_size, rows=rows)
    return entries


def load_table(run_dir: Path, name: str) -> pa.Table | None:
    """`<name>.parquet`, or the parts of a killed run (`<name>.parts/`), or None if neither."""
    path = Path(run_dir) / f"{name}.parquet"
    if path.is_file():
        return pq.read_table(path)
    parts = Path(run_dir) / f"{name}.parts"
    if parts.is_dir():
        files = sorted(parts.glob("part-*.parquet"))
        return pa.concat_tables([pq.read_table(f) for f in files]) if files else None
    return None
