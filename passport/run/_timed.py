"""The timed phase: the runner sends the schedule while telemetry, the client monitor, the
launched engine's watcher and (with `canary_share`) canaries under load run beside it.

Ctrl-C and SIGTERM end issuing at once; what is in flight is recorded as interrupted and the
phase returns normally with the reason, so the caller writes a passport marked INCOMPLETE. So
does a raw log that cannot be written (a full disk): measuring on without recording would lose
what the passport is for. The writers are closed on every path, so every record written so far
stays readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness import (
    CHUNKS_SCHEMA,
    REQUESTS_SCHEMA,
    TELEMETRY_SCHEMA,
    ClientMonitor,
    EndpointError,
    EngineLauncher,
    PreparedRequest,
    ProgressSink,
    RepetitionResult,
    Runner,
    Schedule,
    TableWriter,
    TelemetrySampler,
    Transport,
    close_sources,
    read_counters,
    write_new,
)
from passport._errors import OutputFolderError
from passport.model import RunSpec
from passport.run._canaries import UnderLoad
from workloads import LoadedTokenizer

__all__ = ["TimedInputs", "TimedOutcome", "run_timed_phase"]

_SWITCH_INTERVAL_S = 0.0005  # while timing: a worker thread yields the GIL to the loop within 0.5 ms


@dataclass(frozen=True)
class TimedInputs:
    """Everything the timed phase needs, prepared before it starts."""

    spec: RunSpec
    client: Transport
    schedule: Schedule
    pool: list[PreparedRequest]
    entries: list[int]
    folder: Path
    t0_ns: int
    run_start_ns: int
    tokenizer: LoadedTokenizer
    launcher: EngineLauncher | None = None
    progress: ProgressSink | None = None
    under_load: UnderLoad | None = None
    telemetry_sources: list[Any] = field(default_factory=list)
    workers: int = 1  # load.workers resolved (auto: by calibration)
    base_url: str | None = None  # where Ray workers send (load.backend: ray)


@dataclass(frozen=True)
class TimedOutcome:
    repetitions: list[RepetitionResult]
    stop_reason: str | None
    workers: dict[str, Any] | None = None  # what only the run learns about its workers (Ray: clocks)


@contextlib.contextmanager
def _quiet_interpreter() -> Iterator[None]:
    """No full garbage collection and a short GIL switch interval while timing.

    A full (oldest-generation) collection walks every object the run holds and stalls the loop
    for tens of ms (measured: 58-73 ms at 50 req/s, delaying sends by as much;
    benchmarks/trace_replay.py): young generations are still collected, what existed before is
    frozen out of every collection. Worker threads (Parquet parts, telemetry scrapes) hold the
    GIL up to the switch interval (5 ms by default), a send delayed as much. Both restored after.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], 1_000_000)
    switch_interval_s = sys.getswitchinterval()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        sys.setswitchinterval(switch_interval_s)


class _EngineWatch:
    """The launched engine during the phase: its RSS samples and its exit, recorded once as the
    first reason the run stopped."""

    def __init__(self, launcher: EngineLauncher, telemetry: TableWriter, t0_ns: int, run_start_ns: int,
                 stop: asyncio.Event, reasons: list[str]) -> None:
        self.launcher, self.telemetry, self.t0_ns, self.run_start_ns = launcher, telemetry, t0_ns, run_start_ns
        self.stop, self.reasons = stop, reasons
        self.exit_seen = False

    def _row(self, name: str, value: float, t_ns: int | None = None) -> None:
        at = time.perf_counter_ns() if t_ns is None else t_ns
        self.telemetry.append_row({"t_ns": at - self.t0_ns, "source": "engine", "name": name, "value": value})

    def note_exit(self) -> None:
        if self.exit_seen:
            return
        self.exit_seen = True
        code = self.launcher.exit_code if self.launcher.exit_code is not None else self.launcher.returncode
        self._row("exit", float(code if code is not None else -1))
        self.reasons.insert(0, f"the launched engine exited (code {code}); see engine.log")
        self.stop.set()

    def record_rss(self) -> None:
        for t_ns, rss in self.launcher.drain_samples():
            if t_ns >= self.run_start_ns:  # a shared (sweep) engine was also sampled before this run
                self._row("rss_bytes", rss, t_ns)

    async def watch(self) -> None:
        self._row("launched", 1.0)
        while True:
            self.record_rss()
            if not self.launcher.alive():
                self.note_exit()
                return
            await asyncio.sleep(0.5)

    async def settle(self, wait_s: float = 1.0) -> None:
        """Give a dying engine up to `wait_s` to be seen exiting (its sockets close a moment before
        its exit status is there), so its exit, the cause, is the reason named first."""
        deadline = time.monotonic() + wait_s
        while self.launcher.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if not self.launcher.alive():
            self.note_exit()

    def finish(self) -> None:
        if not self.launcher.alive():
            self.note_exit()
        self.record_rss()


def _on_signals(stop: asyncio.Event, reasons: list[str]) -> list[signal.Signals]:
    """SIGINT and SIGTERM end issuing (the phase then returns normally); the signals installed."""
    loop = asyncio.get_running_loop()

    def interrupt(name: str) -> None:
        reasons.append(f"interrupted by {name}")
        stop.set()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, interrupt, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return installed


def _on_write_error(stop: asyncio.Event, reasons: list[str],
                    reported: set[str]) -> Callable[[str, Exception], None]:
    """A writer's failure (called from its thread) ends issuing, with the reason first in line;
    the writer's name goes into `reported`."""
    loop = asyncio.get_running_loop()

    def failed(name: str, error: Exception) -> None:
        reported.add(name)
        reasons.append(f"{_write_failure(name, error)}; the run stopped at once")
        with contextlib.suppress(RuntimeError):  # the loop may be closing already
            loop.call_soon_threadsafe(stop.set)

    return failed


def _write_failure(name: str, error: Exception) -> str:
    return f"writing {name} failed ({error}); every part written before is kept in {name}.parts/"


def raw_writers(folder: Path, failed: Callable[[str, Exception], None]) -> tuple[TableWriter, TableWriter,
                                                                                 TableWriter]:
    """The requests, chunks and telemetry writers of a run folder (or a worker's shard)."""
    try:
        return (TableWriter(folder, "requests", REQUESTS_SCHEMA, flush_rows=256, on_error=failed),
                TableWriter(folder, "chunks", CHUNKS_SCHEMA, flush_rows=8192, on_error=failed),
                TableWriter(folder, "telemetry", TELEMETRY_SCHEMA, flush_rows=1024, flush_s=5.0, on_error=failed))
    except OSError as exc:
        raise OutputFolderError(f"cannot write the raw logs in {folder} ({exc}); nothing was timed: free space "
                                "or pass --out elsewhere") from None


async def wind_down(canaries_done: asyncio.Event, under_load: asyncio.Task[None] | None,
                    background: list[asyncio.Task[None]], watch: _EngineWatch | None,
                    installed: list[signal.Signals]) -> None:
    """End what ran beside the sending: canaries under load (a case in flight may finish, within
    30 s), the background tasks, the engine watch's last look, the signal handlers."""
    canaries_done.set()
    if under_load is not None:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(under_load, timeout=30)
    for task in background:
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    if watch is not None:
        watch.finish()
    loop = asyncio.get_running_loop()
    for sig in installed:
        loop.remove_signal_handler(sig)


async def _send(inputs: TimedInputs, runner: Runner) -> list[RepetitionResult]:
    client = inputs.client
    await client.start()
    try:
        await client.preconnect(min(inputs.spec.load.concurrency or 64, 64))
    except (OSError, TimeoutError) as exc:
        endpoint = client.endpoint
        raise EndpointError(f"cannot open connections to {endpoint.host}:{endpoint.port}: {exc}") from exc
    return await runner.run()


@dataclass
class Stopping:
    """How a timed phase (or a worker's part of one) stops: the event every task watches, the
    reasons in the order they came, the signals handled, the writers whose failure was reported."""

    stop: asyncio.Event
    reasons: list[str]
    installed: list[signal.Signals]
    reported: set[str] = field(default_factory=set)

    def writers(self, folder: Path) -> tuple[TableWriter, TableWriter, TableWriter]:
        """The raw writers of `folder`, a failure of any ending the phase."""
        return raw_writers(folder, _on_write_error(self.stop, self.reasons, self.reported))

    def close(self, writers: tuple[TableWriter, ...]) -> None:
        """Close the writers; a join that fails is a reason too (the parts stay)."""
        for writer in writers:
            if writer.close() is None and writer.error is not None and writer.name not in self.reported:
                self.reasons.append(_write_failure(writer.name, writer.error))

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None


def stopping() -> Stopping:
    """A fresh Stopping on the running loop, SIGINT and SIGTERM handled."""
    stop = asyncio.Event()
    reasons: list[str] = []
    return Stopping(stop, reasons, _on_signals(stop, reasons))


async def _timed(inputs: TimedInputs) -> TimedOutcome:
    spec, folder, t0_ns = inputs.spec, inputs.folder, inputs.t0_ns
    loop = asyncio.get_running_loop()
    halt = stopping()
    stop, reasons = halt.stop, halt.reasons
    writers = requests_w, chunks_w, telemetry_w = halt.writers(folder)
    count = inputs.tokenizer.tokenizer.encode if inputs.tokenizer.exact else None
    runner = Runner(inputs.client, spec.endpoint.api, spec.load, inputs.schedule, inputs.pool, requests_w, chunks_w,
                    t0_ns, stop, record_text=spec.record_text,
                    count_tokens=(lambda s: len(count(s))) if count else None,
                    progress=inputs.under_load if inputs.under_load is not None else inputs.progress,
                    entries=inputs.entries)
    watch = (_EngineWatch(inputs.launcher, telemetry_w, t0_ns, inputs.run_start_ns, stop, reasons)
             if inputs.launcher is not None else None)
    background: list[asyncio.Task[None]] = [loop.create_task(ClientMonitor(telemetry_w, t0_ns).run())]
    if inputs.telemetry_sources:
        sampler: Coroutine[Any, Any, None] = TelemetrySampler(inputs.telemetry_sources, telemetry_w, t0_ns,
                                                               spec.telemetry.interval_s).run()
        background.append(loop.create_task(sampler))
    if watch is not None:
        background.append(loop.create_task(watch.watch()))
    canaries_done = asyncio.Event()
    under_load = loop.create_task(inputs.under_load.run(canaries_done)) if inputs.under_load is not None else None
    try:
        with _quiet_interpreter():
            results = await _send(inputs, runner)
        if runner.abort_reason:
            if watch is not None:  # refused connections are how an engine's death is often heard first
                await watch.settle()
            reasons.append(runner.abort_reason)
    finally:
        await wind_down(canaries_done, under_load, background, watch, halt.installed)
        await inputs.client.aclose()
        halt.close(writers)
    return TimedOutcome(results, halt.reason)


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


def run_timed_phase(inputs: TimedInputs) -> TimedOutcome:
    """Run the timed phase on its own event loop (uvloop where installed), or dealt to worker
    processes (`load.workers` > 1, passport.run._workers).

    The engine's own counters are read right before the first send and right after the last
    answer (letting them settle for up to 1.5 s) and kept in telemetry.parquet as sources
    `counters:before` and `counters:after`: verify holds the client's totals against them."""
    sources = inputs.telemetry_sources
    try:
        before = _bracket_rows(sources, "counters:before", inputs.t0_ns)
        outcome = _dispatch(inputs)
        after = _bracket_rows(sources, "counters:after", inputs.t0_ns, settle_s=1.5) if before else []
        if after:
            with contextlib.suppress(OSError):  # a full disk or a vanished folder: no bracket, the run stands
                _append_telemetry(inputs.folder, before + after)
        return outcome
    finally:
        close_sources(sources)


def _dispatch(inputs: TimedInputs) -> TimedOutcome:
    if inputs.spec.load.backend == "ray":
        from passport.run._ray import run_with_ray

        assert inputs.base_url is not None
        return TimedOutcome(*run_with_ray(inputs, inputs.workers, inputs.base_url))
    if inputs.workers > 1:
        from passport.run._workers import run_with_workers

        return TimedOutcome(*run_with_workers(inputs, inputs.workers))
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_timed(inputs))
    return uvloop.run(_timed(inputs))
