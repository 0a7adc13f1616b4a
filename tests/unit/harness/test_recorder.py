from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import harness._recorder
from harness import TELEMETRY_SCHEMA, TableWriter, join_parts
from passport.audit import RunFiles


def _row(i: int) -> dict[str, object]:
    return {"t_ns": i, "source": "client", "name": "x", "value": float(i)}


def test_flushed_parts_are_readable_before_close_as_after_a_kill(tmp_path: Path) -> None:
    writer = TableWriter(tmp_path, "telemetry", TELEMETRY_SCHEMA, flush_rows=10)
    for i in range(25):
        writer.append_row(_row(i))
    writer.sync()  # what was flushed is on disk; no close(): as if the process had been killed
    table = RunFiles(tmp_path).table("telemetry")
    assert table is not None and table.column("t_ns").to_pylist() == list(range(25))
    assert not (tmp_path / "telemetry.parquet").exists()
    join_parts(tmp_path, "telemetry", TELEMETRY_SCHEMA)  # what `passport` does with them later
    assert pq.read_table(tmp_path / "telemetry.parquet").num_rows == 25


def test_close_joins_parts_into_one_file_of_few_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush a part, but the joined table in groups of JOINED_ROW_GROUP_ROWS rows: a reader pays
    per row group, and a part a group made a 100,000-request table ten times slower to read."""
    writer = TableWriter(tmp_path, "telemetry", TELEMETRY_SCHEMA, flush_rows=10)
    for i in range(25):
        writer.append_row(_row(i))
    path = writer.close()
    assert pq.read_table(path).column("t_ns").to_pylist() == list(range(25))
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    monkeypatch.setattr(harness._recorder, "JOINED_ROW_GROUP_ROWS", 20)
    writer = TableWriter(tmp_path / "small", "telemetry", TELEMETRY_SCHEMA, flush_rows=10)
    for i in range(25):
        writer.append_row(_row(i))
    path = writer.close()
    assert pq.read_table(path).column("t_ns").to_pylist() == list(range(25))
    assert [pq.ParquetFile(path).metadata.row_group(k).num_rows for k in range(2)] == [20, 5]
    assert not (tmp_path / "telemetry.parts").exists()
