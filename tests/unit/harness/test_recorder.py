from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import harness._recorder
from harness import TELEMETRY_SCHEMA, TableWriter, join_parts, settle_open_writers
from passport.audit import RunFiles
from passport.run._shards import join_leftover_parts


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


def test_writers_an_interrupt_left_open_are_settled_with_their_buffered_rows(tmp_path: Path) -> None:
    """A second Ctrl-C can skip every close(): settling what is still open writes what each writer
    buffered, waits for its parts and ends its thread; a closed writer is not touched again."""
    closed = TableWriter(tmp_path / "closed", "telemetry", TELEMETRY_SCHEMA, flush_rows=10)
    closed.append_row(_row(0))
    closed.close()
    writers = [TableWriter(tmp_path / name, "telemetry", TELEMETRY_SCHEMA, flush_rows=10) for name in ("a", "b")]
    for writer in writers:
        for i in range(13):  # one part of 10 handed to the thread, 3 rows still buffered
            writer.append_row(_row(i))
    settle_open_writers()
    for writer in writers:
        assert writer._executor._shutdown  # noqa: SLF001 - its thread was told to end
        join_parts(writer.folder, "telemetry", TELEMETRY_SCHEMA)
        assert pq.read_table(writer.folder / "telemetry.parquet").column("t_ns").to_pylist() == list(range(13))
    assert not (tmp_path / "closed" / "telemetry.parts").exists()


def test_a_join_interrupted_while_it_removes_the_parts_keeps_every_row(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A second Ctrl-C that lands while a join removes the parts it joined: the joined table stays
    whole, and the join after the interrupt does not take the parts left for the table."""
    writer = TableWriter(tmp_path, "telemetry", TELEMETRY_SCHEMA, flush_rows=10)
    for i in range(25):
        writer.append_row(_row(i))
    writer.settle()
    removing = shutil.rmtree

    def interrupted(path: Path, ignore_errors: bool = False) -> None:
        if ignore_errors:
            return removing(path, ignore_errors=True)
        (sorted(Path(path).glob("part-*.parquet"))[1]).unlink()  # one part removed, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(harness._recorder.shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        join_parts(tmp_path, "telemetry", TELEMETRY_SCHEMA)
    monkeypatch.undo()
    join_leftover_parts(tmp_path)
    assert pq.read_table(tmp_path / "telemetry.parquet").column("t_ns").to_pylist() == list(range(25))


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
