"""The timed phase: one way through it, whatever sends the load. `run_timed_phase` brackets the
phase with the engine's own counters and hands it to the backend the spec asks for: this process
(`_inprocess`), processes forked here (`_workers`, `load.workers` > 1) or Ray actors (`_ray`,
`load.backend: ray`). What they share lives in `_phase`, the workers' coordination in `_fleet`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness import TELEMETRY_SCHEMA, close_sources, read_counters, write_new
from passport.run._inprocess import InProcess
from passport.run._phase import Backend, TimedInputs, TimedOutcome
from passport.run._ray import RayActors
from passport.run._workers import Forked

__all__ = ["run_timed_phase", "backend_for"]


def backend_for(inputs: TimedInputs) -> Backend:
    """The backend that sends `inputs`: Ray actors, forked workers or this process."""
    if inputs.spec.load.backend == "ray":
        assert inputs.base_url is not None
        return RayActors(inputs.workers, inputs.base_url)
    if inputs.workers > 1:
        return Forked(inputs.workers)
    return InProcess()


def run_timed_phase(inputs: TimedInputs) -> TimedOutcome:
    """Run the timed phase on its backend (`backend_for`).

    The engine's own counters are read right before the first send and right after the last
    answer (letting them settle for up to 1.5 s) and kept in telemetry.parquet as sources
    `counters:before` and `counters:after`: verify holds the client's totals against them."""
    sources = inputs.telemetry_sources
    try:
        before = _bracket_rows(sources, "counters:before", inputs.t0_ns)
        outcome = backend_for(inputs).run(inputs)
        after = _bracket_rows(sources, "counters:after", inputs.t0_ns, settle_s=1.5) if before else []
        if after:
            with contextlib.suppress(OSError):  # a full disk or a vanished folder: no bracket, the run stands
                _append_telemetry(inputs.folder, before + after)
        return outcome
    finally:
        close_sources(sources)


def _bracket_rows(sources: list[Any], source: str, t0_ns: int, settle_s: float = 0.0) -> list[dict[str, Any]]:
    """The engine's own counters (BRACKET_COUNTERS) read now, as telemetry rows of `source`."""
    found = read_counters(sources, settle_s)
    t_ns = time.perf_counter_ns() - t0_ns
    return [{"t_ns": t_ns, "source": source, "name": name, "value": value, "worker": None}
            for _, name, value in found]


def _append_telemetry(folder: Path, rows: list[dict[str, Any]]) -> None:
    """Add `rows` to the closed telemetry.parquet (a folder without one, as after a disk that
    filled, keeps what it has)."""
    path = folder / "telemetry.parquet"
    if not rows or not path.is_file():
        return
    table = pa.concat_tables([pq.read_table(path), pa.Table.from_pylist(rows, schema=TELEMETRY_SCHEMA)])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_new(path, sink.getvalue().to_pybytes())
