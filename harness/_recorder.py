"""Raw logs: Parquet files written incrementally while the run goes.

Each flush (every `flush_rows` rows or `flush_s` seconds) writes one small, complete Parquet
file under `<name>.parts/`, off the event loop in a writer thread; `close()` joins the parts
into `<name>.parquet` (one row group per part) and removes them. A run killed before `close()`
leaves `<name>.parts/`, which pandas, pyarrow and DuckDB read as one table
(`pd.read_parquet("requests.parts")`), as does `passport.audit.load_table`; `join_parts`
turns it into `<name>.parquet`. A part that cannot be written (a full disk) is removed, never
left half-written; the first such error is kept in `error` and handed to `on_error` (from the
writer thread) so that the run can stop at once, and `close()` then leaves the parts as they are
instead of joining them (a join needs as much room again). Parts are written uncompressed (no CPU spent on compression
while the run streams); the joined file is zstd-compressed.

Schemas are public and versioned with the passport (`RAW_SCHEMA_VERSION`); see docs/concepts/design.md
"The run folder" and README "Raw logs" for what each column means. Times are int64 ns on the
run's monotonic clock (0 = the run's start), null when the event never happened.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness._openai import CHUNK_KINDS
from harness._safefile import open_new, real_dir
from harness._sse import EventBodies

__all__ = [
    "RAW_SCHEMA_VERSION",
    "REQUESTS_SCHEMA",
    "CHUNKS_SCHEMA",
    "TELEMETRY_SCHEMA",
    "RAW_TABLES",
    "TableWriter",
    "settle_open_writers",
    "piece_array",
    "join_parts",
]

# 2: shape, session, turn, context and response-check columns; 3: attempt, retry_of; 4: worker;
# 5: slot_ns; 6: n_inputs, n_results, embedding_dim, audio_ms (the endpoint kinds past chat)
RAW_SCHEMA_VERSION = 6

REQUESTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),
        ("repetition", pa.int32()),
        ("seq", pa.int64()),
        ("phase", pa.string()),
        ("request_index", pa.int64()),
        ("user", pa.int32()),
        ("intended_ns", pa.int64()),
        ("sent_ns", pa.int64()),
        ("first_byte_ns", pa.int64()),
        ("first_token_ns", pa.int64()),
        ("first_content_ns", pa.int64()),
        ("last_token_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("connect_ns", pa.int64()),
        ("new_connection", pa.bool_()),
        ("resent", pa.bool_()),
        ("http_status", pa.int32()),
        ("outcome", pa.string()),
        ("timeout_kind", pa.string()),
        ("error", pa.string()),
        ("retry_after", pa.string()),
        ("finish_reason", pa.string()),
        ("max_tokens", pa.int64()),
        ("max_tokens_is_target", pa.bool_()),
        ("input_tokens_target", pa.int64()),
        ("input_tokens_client", pa.int64()),
        ("output_tokens_target", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("tokens_source", pa.string()),
        ("completion_tokens_client", pa.int64()),
        ("n_chunks", pa.int32()),
        ("n_token_chunks", pa.int32()),
        ("prompt", pa.string()),
        ("response_text", pa.string()),
        ("reasoning_text", pa.string()),
        ("tool_calls", pa.string()),
        ("prompt_sha256", pa.string()),
        ("response_sha256", pa.string()),
        ("prompt_chars", pa.int64()),
        ("response_chars", pa.int64()),
        # raw schema 2: traffic shapes (all null for a plain synthetic request)
        ("shape", pa.string()),
        ("session", pa.int64()),
        ("turn", pa.int32()),
        ("session_turns", pa.int32()),
        ("context_messages", pa.int32()),
        ("context_tokens_client", pa.int64()),
        ("check", pa.string()),
        ("check_result", pa.string()),
        ("check_reason", pa.string()),
        ("reasoning_tokens_client", pa.int64()),
        # raw schema 3: retries of rejected requests (load.on_reject)
        ("attempt", pa.int32()),
        ("retry_of", pa.int64()),
        # raw schema 4: the worker process that sent it (load.workers > 1; null: one process)
        ("worker", pa.int16()),
        # raw schema 5: when an open loop's in-flight cap (load.concurrency) let a request that found
        # it full go (null: it found a slot free, or there is no cap)
        ("slot_ns", pa.int64()),
        # raw schema 6: embeddings' inputs or rerank's/score's documents sent, the vectors or scores
        # that came back and the vectors' length; an audio request's clip duration
        ("n_inputs", pa.int32()),
        ("n_results", pa.int32()),
        ("embedding_dim", pa.int32()),
        ("audio_ms", pa.int64()),
    ]
)

CHUNKS_SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),
        ("seq", pa.int32()),
        ("recv_ns", pa.int64()),
        ("kind", pa.dictionary(pa.int8(), pa.string())),
        ("token_bearing", pa.bool_()),
        ("n_chars", pa.int32()),
        ("event", pa.string()),
        ("data", pa.binary()),
    ]
)

# The values of each dictionary column; its pieces are indices into them.
_DICTIONARIES = {"kind": pa.array(CHUNK_KINDS, pa.string())}

TELEMETRY_SCHEMA = pa.schema(
    [
        ("t_ns", pa.int64()),
        ("source", pa.string()),
        ("name", pa.string()),
        ("value", pa.float64()),
        ("worker", pa.int16()),  # raw schema 4: a worker process's own sample (client CPU, loop lag)
    ]
)


# The raw tables of a run folder, by file name (`<name>.parquet`, or `<name>.parts/` while written).
RAW_TABLES = (("requests", REQUESTS_SCHEMA), ("chunks", CHUNKS_SCHEMA), ("telemetry", TELEMETRY_SCHEMA))


# Rows in a row group of a joined table. The parts are small (a flush each, for totality); a
# reader pays per row group and column, so the table of a 100,000-request run read in 391 of
# them took 0.63 s and in one 0.06 s (benchmarks/audit_large.py). Groups of this size keep the
# join's memory to one group's rows.
JOINED_ROW_GROUP_ROWS = 262_144


def join_parts(folder: Path, name: str, schema: pa.Schema) -> Path:
    """Join `<name>.parts/*.parquet` into `<name>.parquet` (an empty table if there are none), in
    row groups of about JOINED_ROW_GROUP_ROWS rows."""
    parts_dir = folder / f"{name}.parts"
    target = folder / f"{name}.parquet"
    parts = sorted(parts_dir.glob("part-*.parquet")) if parts_dir.is_dir() else []
    # a new file renamed over the target (never written through a planted symlink); on failure
    # it is removed, and the parts are untouched and still read as the table
    with open_new(target) as file, pq.ParquetWriter(file, schema, compression="zstd") as writer:
        written, pending, pending_rows = 0, [], 0
        for part in parts:
            table = pq.read_table(part, schema=schema)
            if not table.num_rows:  # part-000000, the empty table a parts folder starts with
                continue
            pending.append(table)
            pending_rows += table.num_rows
            if pending_rows >= JOINED_ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending).combine_chunks())
                written, pending, pending_rows = written + pending_rows, [], 0
        if pending or not written:
            writer.write_table(pa.concat_tables(pending).combine_chunks() if pending else schema.empty_table())
    if parts_dir.is_dir():
        # out of the way in one step, then removed: interrupted while removing the parts one by
        # one, it left a folder of some of them, which the next join took for the whole table
        # (a second Ctrl-C kept 0 of 200 requests so)
        joined = folder / f"{name}.parts.joined"
        shutil.rmtree(joined, ignore_errors=True)
        parts_dir.rename(joined)
        shutil.rmtree(joined)
    return target


def _typical(data_type: pa.DataType) -> Any:
    if pa.types.is_integer(data_type):
        return 0
    if pa.types.is_floating(data_type):
        return 0.0
    if pa.types.is_boolean(data_type):
        return False
    if pa.types.is_binary(data_type):
        return b"x" * 64
    return "x" * 64


def _warm_conversion(schema: pa.Schema, rows: int) -> None:
    """Convert a throwaway table of `rows` typical rows: pyarrow's first conversion of Python
    lists costs 6-8 ms more than later ones (measured at 256 rows), and a writer's first part is
    converted inside the timed phase: in the writer thread, but holding the GIL, so the event loop
    and the pacer would wait for it once."""
    if all(not pa.types.is_dictionary(f.type) for f in schema):
        pa.table({f.name: [_typical(f.type)] * rows for f in schema}, schema=schema)


# Every writer not settled yet, so that an interrupt which skipped their close can settle them.
_OPEN: weakref.WeakSet[TableWriter] = weakref.WeakSet()


def settle_open_writers() -> None:
    """Settle every writer this process opened and never closed: a second Ctrl-C that lands while
    a timed phase ends skips their `close()`. What they buffered becomes a part, the parts in
    flight reach the disk before anyone joins the folder, and their threads end (one left idle
    kept `passport run` from ever exiting)."""
    for writer in list(_OPEN):
        writer.settle()


def piece_array(pieces: list[Any], data_type: pa.DataType, dictionary: pa.Array | None) -> pa.Array:
    """One column of a part from its pieces: numpy arrays, lists of values, or EventBodies."""
    if all(isinstance(p, np.ndarray) for p in pieces):
        values = np.concatenate(pieces) if pieces else np.zeros(0)
        if dictionary is not None:
            return pa.DictionaryArray.from_arrays(pa.array(values.astype(np.int8)), dictionary)
        return pa.array(values, data_type)
    if all(isinstance(p, EventBodies) for p in pieces):
        shift = np.cumsum([0] + [len(p.body) for p in pieces[:-1]], dtype=np.int64)
        offsets = np.concatenate([np.zeros(1, np.int64)]
                                 + [p.ends.astype(np.int64) + k for p, k in zip(pieces, shift, strict=True)])
        body = b"".join(p.body for p in pieces)
        raw = pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                    [None, pa.py_buffer(offsets), pa.py_buffer(body)])
        return pc.binary_slice(raw, 6, -2).cast(data_type)
    if all(isinstance(p, list) for p in pieces):
        return pa.array([v for p in pieces for v in p], data_type)
    return pa.concat_arrays([piece_array([p], data_type, dictionary) for p in pieces])


def _background_priority() -> None:
    """Run this thread at nice +10 (Linux: per thread): a part written while the run streams
    then waits for the event loop and the pacer instead of taking their core for milliseconds
    (measured: late sends every 2 s flush, at 2,000 requests/s on one core)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


class TableWriter:
    """Buffers rows (each row's dict as given, or each call's column pieces, untouched on the
    event loop: turning them into columns is the writer thread's work, in Arrow's C++ where it
    can) and flushes them as parts.

    Not thread-safe for writers: call `append*` from one thread (the event loop). `on_error(name,
    error)` is called once, from the writer thread, when a part cannot be written.
    """

    def __init__(
        self,
        folder: Path,
        name: str,
        schema: pa.Schema,
        flush_rows: int = 512,
        flush_s: float = 2.0,
        executor: ThreadPoolExecutor | None = None,
        on_error: Callable[[str, Exception], None] | None = None,
    ) -> None:
        self.folder = folder
        self.name = name
        self.schema = schema
        self._flush_rows = flush_rows
        self._flush_s = flush_s
        self._parts_dir = real_dir(folder / f"{name}.parts")
        # part 0 is the empty table: a parts folder always reads as a table, even when a full disk
        # or a kill came before the first flush (raises OSError where the folder takes no write)
        with open_new(self._parts_dir / "part-000000.parquet") as file:
            pq.write_table(schema.empty_table(), file, compression="none")
        self._rows: list[dict[str, Any]] = []
        self._calls: list[Mapping[str, Any]] = []
        self._buffered = 0
        self._n_parts = 1
        self._last_flush = time.monotonic()
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix=f"write-{name}",
                                                        initializer=_background_priority)
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()
        self._on_error = on_error
        self.error: Exception | None = None
        self.rows_written = 0
        _warm_conversion(schema, min(flush_rows, 256))
        _OPEN.add(self)

    def append_row(self, row: dict[str, Any]) -> None:
        """Buffer one row given as {column: value} (kept, not copied: the caller does not change
        it afterwards); missing columns are null, keys outside the schema ignored."""
        self._rows.append(row)
        self._buffered += 1
        self._maybe_flush()

    def append_columns(self, columns: Mapping[str, Any], rows: int) -> None:
        """Buffer `rows` rows given per column (every column of the schema) as a numpy array, a
        list of values or `EventBodies`; they become Arrow once per part, not once per call (an
        answer of one event cost ~100 us as its own batch). A dictionary column takes its indices
        into its values (`kind`: CHUNK_KINDS)."""
        self._calls.append(columns)
        self._buffered += rows
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self._buffered >= self._flush_rows or time.monotonic() - self._last_flush > self._flush_s:
            self.flush()

    def flush(self) -> None:
        """Hand what is buffered to the writer thread, which makes it one part file: the caller
        (the event loop) only swaps its buffers; the conversion to Arrow (10-20 ms for a part of
        thousands of rows, measured) runs in the writer thread, at a lower CPU priority."""
        self._last_flush = time.monotonic()
        if not self._buffered:
            return
        rows, calls = self._rows, self._calls
        self._rows, self._calls = [], []
        self.rows_written += self._buffered
        self._buffered = 0
        path = self._parts_dir / f"part-{self._n_parts:06d}.parquet"
        self._n_parts += 1
        self._pending.append(self._executor.submit(self._build_and_write, rows, calls, path))

    def _build_and_write(self, rows: list[dict[str, Any]], calls: list[Mapping[str, Any]], path: Path) -> None:
        """In the writer thread: the part's table from the buffers handed over, then the file."""
        tables = []
        try:
            if rows:
                tables.append(self._rows_table(rows))
            if calls:
                tables.append(pa.table([piece_array([c[f.name] for c in calls], f.type, _DICTIONARIES.get(f.name))
                                        for f in self.schema], schema=self.schema))
        except Exception as exc:  # recorded as a part that could not be written, never raised
            self._failed(exc)
            return
        self._write(pa.concat_tables(tables) if len(tables) > 1 else tables[0], path)

    def _rows_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        """Rows buffered as dicts, as a table. Total: a value its column cannot hold (an integer
        beyond 64 bits a server sent, a wrong type) becomes null, and where the table has an
        `error` column the row says which column lost what, so one hostile value never loses the
        part."""
        names = self.schema.names
        # the transposition in C (map, zip), a row a step; the Arrow conversion holds the GIL for
        # about 1 ms a part of 512 rows (Table.from_pylist: about 2 ms). Building parts during the
        # timed phase is what makes sends late at 2,000/s (docs/concepts/client-cost.md)
        buffered = dict(zip(names, map(list, zip(*[tuple(map(row.get, names)) for row in rows])), strict=True))
        try:
            return pa.table(buffered, schema=self.schema)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass
        columns: dict[str, list[Any]] = {}
        notes: list[list[str]] = [[] for _ in rows]
        for f in self.schema:
            values = buffered[f.name]
            try:
                pa.array(values, type=f.type)
                columns[f.name] = values
                continue
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                pass
            kept: list[Any] = []
            for i, value in enumerate(values):
                try:
                    pa.array([value], type=f.type)
                    kept.append(value)
                except (pa.ArrowException, OverflowError, TypeError, ValueError):
                    kept.append(None)
                    notes[i].append(f"{f.name} {str(value)[:40]!r} does not fit {f.type}")
            columns[f.name] = kept
        if "error" in columns:
            columns["error"] = [e if not n else "; ".join(([e] if e else []) + [f"unrecordable value: {x}" for x in n])
                                for e, n in zip(columns["error"], notes)]
        return pa.table(columns, schema=self.schema)

    def _write(self, table: pa.Table, path: Path) -> None:
        """In the writer thread: one part, whole or absent; a failure is recorded, not raised."""
        # Parts are uncompressed: compressing costs CPU while the run streams, and close()
        # rewrites them compressed once the timing is over.
        try:
            with open_new(path) as file:
                pq.write_table(table, file, compression="none")
        except Exception as exc:
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            first = self.error is None
            if first:
                self.error = exc
        if first and self._on_error is not None:
            self._on_error(self.name, exc)

    def sync(self) -> None:
        """Flush and wait until every part handed to the writer thread is on disk or failed
        (a failure is in `error`; nothing is raised)."""
        self.flush()
        for future in self._pending:
            future.result()
        self._pending.clear()

    def settle(self) -> None:
        """Flush, wait until every part is on disk (or failed), and end the writer thread; the
        parts stay as parts. An idle writer thread left running keeps the process from exiting."""
        self.sync()
        if self._own_executor:
            self._executor.shutdown(wait=True)
        _OPEN.discard(self)

    def close(self) -> Path | None:
        """Settle, then join the parts into `<name>.parquet`; None (the parts left as they are,
        the reason in `error`) when a part or the join failed."""
        self.settle()
        if self.error is not None:
            return None
        try:
            return join_parts(self.folder, self.name, self.schema)
        except OSError as exc:
            self.error = exc
            return None
