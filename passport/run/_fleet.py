"""The timed phase sent by workers, whatever runs them (processes forked here, `_workers`; Ray
actors, `_ray`): a worker's own part (`worker_phase`), the workers as the coordinator sees them
(`Fleet`), and the coordinator's loop beside them (`coordinate`).

The coordinator keeps what a one-process run does beside the sending: the engine watch, server
telemetry, canaries under load and the progress line (counts only, where the workers say). A
stop here (a signal, the engine died) stops every worker; a worker that dies stops the others.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from harness import (
    TELEMETRY_SCHEMA,
    ClientMonitor,
    ProgressSink,
    RepetitionResult,
    TableWriter,
    Transport,
    WorkerShare,
)
from passport._errors import OutputFolderError
from passport.audit import SATURATED_PREFIX
from passport.run._phase import (
    Beside,
    Part,
    TimedInputs,
    new_runner,
    open_connections,
    quiet_interpreter,
    record_pacer,
    start_beside,
    stopping,
)

__all__ = ["Report", "Fleet", "worker_phase", "coordinate", "combine_reports", "report_of"]

Report = tuple[list[tuple[int, int, int]], str | None]  # a worker's (repetition, sent, pool cycles), stop reason


def report_of(results: list[RepetitionResult], reason: str | None) -> Report:
    """A worker's outcome as it travels to the coordinator (plain tuples, picklable)."""
    return [(r.repetition, r.sent, r.pool_cycles) for r in results], reason


async def worker_phase(part: Part, client: Transport, share: WorkerShare, folder: Path,
                       stopped: Callable[[], Awaitable[bool]],
                       progress: ProgressSink | None) -> tuple[list[RepetitionResult], str | None]:
    """One worker's part of the timed phase, on this process's event loop: `stopped` says whether
    the coordinator asked every worker to stop. Writes its shard into `folder`."""
    loop = asyncio.get_running_loop()
    halt = stopping()
    shard = requests_w, chunks_w, telemetry_w = halt.writers(folder)

    async def follow_stop() -> None:
        while not halt.stop.is_set():
            if await stopped():
                halt.stop.set()
            await asyncio.sleep(0.02)

    runner = new_runner(part, client, requests_w, chunks_w, halt, progress, share)
    beside = Beside(halt, None, [loop.create_task(ClientMonitor(telemetry_w, part.t0_ns).run()),
                                 loop.create_task(follow_stop())], asyncio.Event(), [])  # no watch, no samplers
    try:
        with quiet_interpreter():
            await open_connections(client, share.part(part.spec.load.streams))
            results = await runner.run()
        if runner.abort_reason:
            halt.reasons.append(runner.abort_reason)
    finally:
        await beside.end()
        await client.aclose()
        record_pacer(client, telemetry_w, part.t0_ns)
        halt.close(shard)
    return results, halt.reason


class Fleet(Protocol):
    """The workers as the coordinator sees them, however they run (forked here, Ray actors)."""

    reports: dict[int, Report]

    def poll(self, reasons: list[str], elapsed_s: float) -> bool:
        """Collect what finished (a worker that died: a reason, first in line, and every worker
        stopped); False once every worker is done."""

    def stop(self) -> None:
        """Ask every worker to stop (they record what is in flight as interrupted)."""

    def counts(self) -> tuple[int, int, int] | None:
        """Requests done, in flight and failed over all workers, if the workers say."""

    def finish(self, reasons: list[str]) -> None:
        """Wait for every worker to end (within reason); a reason for any that never reported."""


async def coordinate(inputs: TimedInputs, fleet: Fleet) -> tuple[list[RepetitionResult], str | None]:
    """This process while the workers send (see the module docstring)."""
    folder = inputs.folder
    halt = stopping()
    try:
        telemetry_w = TableWriter(folder, "telemetry", TELEMETRY_SCHEMA, flush_rows=1024, flush_s=5.0)
    except OSError as exc:
        raise OutputFolderError(f"cannot write the raw logs in {folder} ({exc})") from None
    beside = start_beside(inputs, telemetry_w, halt, client_monitor=False)  # each worker monitors itself
    sink = inputs.sink
    started_ns, stopped = time.perf_counter_ns(), False
    try:
        while fleet.poll(halt.reasons, (time.perf_counter_ns() - started_ns) / 1e9):
            if halt.stop.is_set() and not stopped:
                fleet.stop()
                stopped = True
            counts = fleet.counts()
            if sink is not None and counts is not None:
                sink.update(*counts, {})
            await asyncio.sleep(0.05)
    finally:
        fleet.finish(halt.reasons)
        await beside.end()
        telemetry_w.close()
    return combine_reports(fleet.reports, halt.reasons)


def combine_reports(reports: dict[int, Report], reasons: list[str]) -> tuple[list[RepetitionResult], str | None]:
    """The workers' repetitions summed (sent) and maxed (pool cycles), and the first stop reason:
    the coordinator's `reasons` first, then each worker's own (a saturation stop keeps its
    prefix, so the run's verdict is SATURATED)."""
    def named(k: int, reason: str) -> str:
        if reason.startswith(SATURATED_PREFIX):
            return f"{SATURATED_PREFIX}worker {k}: {reason.removeprefix(SATURATED_PREFIX)}"
        return f"worker {k}: {reason}"

    reasons = reasons + [named(k, reason) for k in sorted(reports) if (reason := reports[k][1])]
    by_rep: dict[int, RepetitionResult] = {}
    for results, _ in reports.values():
        for rep, sent, cycles in results:
            total = by_rep.setdefault(rep, RepetitionResult(rep))
            total.sent += sent
            total.pool_cycles = max(total.pool_cycles, cycles)
    return [by_rep[r] for r in sorted(by_rep)], reasons[0] if reasons else None
