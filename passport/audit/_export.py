"""A run's raw tables as CSV or JSON Lines, for tools that do not read Parquet.

Rows are written a record batch at a time (a 100,000-request run is never held as Python rows).
Binary columns (the chunks' raw `data` payloads) are written as UTF-8 text, undecodable bytes as
U+FFFD; CSV cells hold lists and structs as JSON text; times stay int64 nanoseconds. A killed
run's parts are read as the table, like every other reader here.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import Any, Literal, TextIO

import pyarrow as pa

from passport._errors import RunFolderError
from passport.audit._files import RunFiles, RunSource

__all__ = ["EXPORT_TABLES", "export_table"]

EXPORT_TABLES = ("requests", "chunks", "telemetry", "schedule", "canaries", "accuracy")
_BATCH_ROWS = 4096


def _plain(value: Any) -> Any:
    """A JSON-ready cell: bytes as text, NaN and infinities as null, nested values kept."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _rows(table: pa.Table) -> Iterator[dict[str, Any]]:
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        for row in batch.to_pylist():
            yield {k: _plain(v) for k, v in row.items()}


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return value


def export_table(source: RunSource, name: str, fmt: Literal["csv", "jsonl"], out: TextIO) -> int:
    """Write table `name` of the run (a folder, or a reader of one) to `out`; returns the rows
    written. RunFolderError when the run has no such table."""
    if name not in EXPORT_TABLES:
        raise RunFolderError(f"no table {name!r}: export one of {', '.join(EXPORT_TABLES)}")
    files = RunFiles.of(source)
    table = files.table(name)
    if table is None:
        raise RunFolderError(f"{files.folder} has no {name}.parquet (nor {name}.parts/): is it a run folder?")
    if fmt == "jsonl":
        for row in _rows(table):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(table.column_names)
        for row in _rows(table):
            writer.writerow([_cell(v) for v in row.values()])
    return int(table.num_rows)
