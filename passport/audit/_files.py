"""The run folder's files as an auditor reads them: tables (or a killed run's parts), sha256.

`RAW_FILES` are the files a passport lists with their sha256, size and row count; `load_table`
reads `<name>.parquet`, or the `<name>.parts/` a killed run leaves. pyarrow only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from passport._errors import RunFolderError
from passport.audit._types import FileFacts

__all__ = ["PROBES_FILE", "RAW_FILES", "REPORT_FILES", "TEXT_COLUMNS", "sha256_file", "sha256_bytes",
           "file_entries", "load_table", "content_sha256", "canonical_json"]

PROBES_FILE = "probes.jsonl"  # the control-plane exchanges of identify (passport.run._replay writes it)
SPEC_FILE = "spec.yaml"  # the spec as run (flags applied): `passport run RUN/spec.yaml` runs it again
RAW_FILES = ("requests.parquet", "chunks.parquet", "telemetry.parquet", "schedule.parquet", "engine.log",
             "declared.json", "calibration.json", "canaries.parquet", PROBES_FILE, SPEC_FILE)
REPORT_FILES = ("report.md", "report.html")  # and plots/*.png


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


def canonical_json(data: Any) -> bytes:
    """The one byte form a JSON value is hashed in: sorted keys, no spaces, UTF-8."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_sha256(passport: Mapping[str, Any]) -> str:
    """The hash a passport carries over its own canonical form (every field but this one and the
    signature of it)."""
    return sha256_bytes(canonical_json({k: v for k, v in passport.items() if k not in ("content_sha256", "signature")}))


def file_entries(folder: Path, reports: bool = False) -> dict[str, FileFacts]:
    """sha256, size and (for Parquet) row count of each raw file present in the run folder (the
    parts of a table a full disk kept from being joined, where the table is absent), and with
    `reports` of report.md, report.html and plots/*.png."""
    folder = Path(folder)
    names = []
    for name in RAW_FILES:
        parts = folder / name.replace(".parquet", ".parts")
        if name.endswith(".parquet") and not (folder / name).is_file() and parts.is_dir():
            names += [f"{parts.name}/{p.name}" for p in sorted(parts.glob("part-*.parquet"))]
        else:
            names.append(name)
    if reports:
        names += [*REPORT_FILES, *(f"plots/{p.name}" for p in sorted((folder / "plots").glob("*.png")))]
    entries: dict[str, FileFacts] = {}
    for name in names:
        path = folder / name
        if path.is_file():
            rows = _rows(path) if name.endswith(".parquet") else None
            entries[name] = FileFacts(sha256=sha256_file(path), bytes=path.stat().st_size, rows=rows)
    return entries


# The text columns, which no figure reads: left on disk when figures are computed (they are most
# of the bytes of a run with long prompts or answers).
TEXT_COLUMNS = {"requests": ("prompt", "response_text", "reasoning_text", "tool_calls"), "chunks": ("data", "event")}


def load_table(run_dir: Path, name: str, figures_only: bool = False) -> pa.Table | None:
    """`<name>.parquet`, or the parts of a killed run (`<name>.parts/`), or None if neither; with
    `figures_only`, without the text columns no figure reads (TEXT_COLUMNS)."""
    skip = TEXT_COLUMNS.get(name, ()) if figures_only else ()
    path = Path(run_dir) / f"{name}.parquet"
    if path.is_file():
        return _read(path, skip)
    parts = Path(run_dir) / f"{name}.parts"
    if parts.is_dir():
        files = sorted(parts.glob("part-*.parquet"))
        return pa.concat_tables([_read(f, skip) for f in files]) if files else None
    return None


def _rows(path: Path) -> int:
    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except (pa.ArrowException, OSError) as exc:
        raise RunFolderError(f"{path} is not a readable Parquet file (truncated or damaged?): {exc}") from exc


def _read(path: Path, skip: tuple[str, ...] = ()) -> pa.Table:
    try:
        if skip:
            names = pq.read_schema(path).names
            return pq.read_table(path, columns=[n for n in names if n not in skip])
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise RunFolderError(f"{path} is not a readable Parquet file (truncated or damaged?): {exc}") from exc
