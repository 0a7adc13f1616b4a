"""The raw tables of a run folder put back together: Parquet parts a run left behind joined into
their tables, and the shards of a run sent by several workers (`workers/w<k>/`, forked or Ray)
merged into the run folder's usual files, so verify, compare and every reader see one run.
Used by the worker and Ray backends at the end of their phase and by `passport recover`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness import RAW_TABLES, join_parts, open_new, real_dir, write_new
from passport._errors import OutputFolderError

__all__ = ["WORKERS_DIR", "join_leftover_parts", "merge_shards", "shard_bytes", "write_shard", "shard_numbers"]

WORKERS_DIR = "workers"


def join_leftover_parts(folder: Path) -> int:
    """Join any `<name>.parts/` left in `folder` into `<name>.parquet` (an empty table where a
    run recorded nothing); returns how many parts folders there were."""
    joined = 0
    for name, schema in RAW_TABLES:
        parts = folder / f"{name}.parts"
        if parts.is_dir():
            join_parts(folder, name, schema)
            joined += 1
        elif not (folder / f"{name}.parquet").is_file():
            join_parts(folder, name, schema)
    return joined


def shard_numbers(folder: Path) -> list[int]:
    """The workers whose shards are in `folder/workers/`, ascending."""
    return sorted(int(p.name[1:]) for p in (folder / WORKERS_DIR).glob("w[0-9]*") if p.name[1:].isdigit())


def shard_bytes(shard: Path) -> dict[str, bytes]:
    """A worker's shard as Parquet bytes by table name (parts joined first), to send home."""
    join_leftover_parts(shard)
    return {name: (shard / f"{name}.parquet").read_bytes() for name, _ in RAW_TABLES
            if (shard / f"{name}.parquet").is_file()}


def write_shard(folder: Path, worker: int, tables: dict[str, bytes]) -> None:
    """Write a shard that came back as bytes (`shard_bytes`) into `folder/workers/w<worker>/`."""
    shard = real_dir(folder / WORKERS_DIR / f"w{worker}")
    for name, data in tables.items():
        write_new(shard / f"{name}.parquet", data)


def merge_shards(folder: Path, workers: int) -> None:
    """Join every shard's tables into the run folder's (rows tagged with their worker) and remove
    the shards. The coordinator's own telemetry, already in the run folder, is kept first. A
    failed write (a full disk) is an OutputFolderError; the shards stay."""
    try:
        _merge(folder, workers)
    except OSError as exc:
        raise OutputFolderError(f"merging the workers' records into {folder} failed ({exc}); each worker's records "
                                f"are kept in {folder / WORKERS_DIR}/w<k>/ (requests, chunks, telemetry .parquet)") \
            from None
    shutil.rmtree(folder / WORKERS_DIR, ignore_errors=True)


def _merge(folder: Path, workers: int) -> None:
    shards = folder / WORKERS_DIR
    for name, schema in RAW_TABLES:
        tables = []
        if name == "telemetry" and (folder / "telemetry.parquet").is_file():
            tables.append(pq.read_table(folder / "telemetry.parquet"))
        for k in range(workers):
            shard = shards / f"w{k}"
            if not shard.is_dir():
                continue
            join_leftover_parts(shard)  # a worker killed mid-write left its parts
            table = pq.read_table(shard / f"{name}.parquet")
            if "worker" in table.column_names:
                table = table.set_column(table.schema.get_field_index("worker"), "worker",
                                         pa.array([k] * table.num_rows, pa.int16()))
            tables.append(table)
        merged = pa.concat_tables([t.select(schema.names).cast(schema) for t in tables]) if tables \
            else schema.empty_table()
        if name == "requests" and merged.num_rows:
            merged = merged.take(pc.sort_indices(merged, [("sent_ns", "ascending"), ("request_id", "ascending")]))
        with open_new(folder / f"{name}.parquet") as file:
            pq.write_table(merged, file, compression="zstd")
