"""What every way through the timed phase shares: its inputs and outcome, the `Backend` protocol
the three ways implement (`_inprocess`, `_workers`, `_ray`), and the parts they are built of:
the quiet interpreter, the raw writers and the stop path, the engine watch and what else runs
beside the sending (started and wound down as one), the runner and the event loop a phase runs on.

How a phase stops: Ctrl-C and SIGTERM end issuing at once; what is in flight is recorded as
interrupted and the phase returns normally with the reason, so the caller writes a passport
marked INCOMPLETE. So does a raw log that cannot be written (a full disk): measuring on without
recording would lose what the passport is for. The writers are closed on every path, so every
record written so far stays readable.
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
from typing import Any, Protocol, TypeVar

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
    WorkerShare,
)
from passport._errors import OutputFolderError
from passport.model import RunSpec
from passport.run._sampler import LoadSampler
from passport.run._saturation import SaturationWatch
from workloads import LoadedTokenizer

__all__ = ["Part", "TimedInputs", "TimedOutcome", "Backend", "Stopping", "stopping", "EngineWatch", "Beside",
           "start_beside", "quiet_interpreter", "new_runner", "open_connections", "run_loop", "raw_writers",
           "record_pacer", "MAX_PRECONNECT"]

_SWITCH_INTERVAL_S = 0.0005  # while timing: a worker thread yields the GIL to the loop within 0.5 ms
MAX_PRECONNECT = 64  # connections opened before the first send, at most (more open as the load needs them)
_T = TypeVar("_T")


@dataclass(frozen=True)
class Part:
    """What a sender of the load needs (one process's or one worker's part of it): the spec, the
    schedule, the prepared requests, the schedulable entries, the run's t0 on this host's clock
    and the tokenizer. Picklable: it travels to forked workers and Ray actors."""

    spec: RunSpec
    schedule: Schedule
    pool: list[PreparedRequest]
    entries: list[int]
    t0_ns: int
    tokenizer: LoadedTokenizer | None


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
    samplers: tuple[LoadSampler, ...] = ()  # canaries and accuracy items under load, each wrapping the next's sink
    telemetry_sources: list[Any] = field(default_factory=list)
    workers: int = 1  # load.workers resolved (auto: by calibration)
    base_url: str | None = None  # where Ray workers send (load.backend: ray)

    @property
    def part(self) -> Part:
        return Part(self.spec, self.schedule, self.pool, self.entries, self.t0_ns, self.tokenizer)

    @property
    def sink(self) -> ProgressSink | None:
        """Where progress goes: through the samplers under load (which count it), else the bar."""
        return self.samplers[0] if self.samplers else self.progress


@dataclass(frozen=True)
class TimedOutcome:
    repetitions: list[RepetitionResult]
    stop_reason: str | None
    workers: dict[str, Any] | None = None  # what only the run learns about its workers (Ray: clocks)


class Backend(Protocol):
    """One way to send the timed phase: in this process, by forked workers, by Ray actors. Each
    writes the run folder's raw tables (requests, chunks, telemetry) and returns the outcome."""

    def run(self, inputs: TimedInputs) -> TimedOutcome:
        ...


def run_loop(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run `coroutine` on a fresh event loop: uvloop's where installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


@contextlib.contextmanager
def quiet_interpreter() -> Iterator[None]:
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


@dataclass
class Stopping:
    """How a timed phase (or a worker's part of one) stops: the event every task watches, the
    reasons in the order they came, the signals handled, the writers whose failure was reported."""

    stop: asyncio.Event
    reasons: list[str]
    installed: list[signal.Signals]
    reported: set[str] = field(default_factory=set)

    def writers(self, folder: Path) -> tuple[TableWriter, TableWriter, TableWriter]:
        """The raw writers of `folder`, a failure of any ending the phase (called from the
        writer's thread: the reason goes first in line, then the stop is set on the loop)."""
        loop = asyncio.get_running_loop()

        def failed(name: str, error: Exception) -> None:
            self.reported.add(name)
            self.reasons.append(f"{_write_failure(name, error)}; the run stopped at once")
            with contextlib.suppress(RuntimeError):  # the loop may be closing already
                loop.call_soon_threadsafe(self.stop.set)

        return raw_writers(folder, failed)

    def close(self, writers: tuple[TableWriter, ...]) -> None:
        """Close the writers; a join that fails is a reason too (the parts stay)."""
        for writer in writers:
            if writer.close() is None and writer.error is not None and writer.name not in self.reported:
                self.reasons.append(_write_failure(writer.name, writer.error))

    def release(self) -> None:
        """Give SIGINT and SIGTERM back to whoever had them."""
        loop = asyncio.get_running_loop()
        for sig in self.installed:
            loop.remove_signal_handler(sig)

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None


def stopping() -> Stopping:
    """A fresh Stopping on the running loop: SIGINT and SIGTERM end issuing (the phase then
    returns normally)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    reasons: list[str] = []

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
    return Stopping(stop, reasons, installed)


class EngineWatch:
    """The launched engine during the phase: its RSS samples and its exit, recorded once as the
    first reason the run stopped."""

    def __init__(self, launcher: EngineLauncher, telemetry: TableWriter, t0_ns: int, run_start_ns: int,
                 halt: Stopping) -> None:
        self.launcher, self.telemetry, self.t0_ns, self.run_start_ns = launcher, telemetry, t0_ns, run_start_ns
        self.halt = halt
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
        self.halt.reasons.insert(0, f"the launched engine exited (code {code}); see engine.log")
        self.halt.stop.set()

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


@dataclass
class Beside:
    """What runs beside the sending, on the loop that coordinates it: server telemetry, the
    engine watch, canaries under load (and, where this process sends, its own client monitor)."""

    halt: Stopping
    watch: EngineWatch | None
    background: list[asyncio.Task[None]]
    samplers_done: asyncio.Event
    samplers: list[asyncio.Task[None]]

    async def end(self) -> None:
        """End it all: the samplers under load (a request in flight may finish, within 30 s), the
        background tasks, the engine watch's last look, the signal handlers."""
        self.samplers_done.set()
        if self.samplers:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.gather(*self.samplers), timeout=30)
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        if self.watch is not None:
            self.watch.finish()
        self.halt.release()


def start_beside(inputs: TimedInputs, telemetry: TableWriter, halt: Stopping, client_monitor: bool) -> Beside:
    """Start what runs beside the sending (see Beside), writing into `telemetry`."""
    loop = asyncio.get_running_loop()
    t0_ns = inputs.t0_ns
    background: list[asyncio.Task[None]] = []
    if client_monitor:
        background.append(loop.create_task(ClientMonitor(telemetry, t0_ns).run()))
    if inputs.telemetry_sources:
        background.append(loop.create_task(TelemetrySampler(inputs.telemetry_sources, telemetry, t0_ns,
                                                            inputs.spec.telemetry.interval_s).run()))
    watch = None
    if inputs.launcher is not None:
        watch = EngineWatch(inputs.launcher, telemetry, t0_ns, inputs.run_start_ns, halt)
        background.append(loop.create_task(watch.watch()))
    samplers_done = asyncio.Event()
    samplers = [loop.create_task(s.run(samplers_done)) for s in inputs.samplers]
    return Beside(halt, watch, background, samplers_done, samplers)


def record_pacer(client: Transport, telemetry: TableWriter, t0_ns: int) -> None:
    """The pacer's own account of the phase (sends it wrote, sends handed to the loop, withdrawn,
    armed late, its thread's CPU seconds, whether that thread was C and real-time) as telemetry
    rows of source `client`, once the client is closed (its pacer stopped); nothing for a transport without a pacer."""
    pacer = getattr(client, "pacer", None)
    if pacer is None:
        return
    stats = pacer.stats
    t_ns = time.perf_counter_ns() - t0_ns
    for name, value in (("pacer_sends_raw", stats.raw), ("pacer_sends_via_loop", stats.via_loop),
                        ("pacer_withdrawn", stats.withdrawn), ("pacer_armed_late", stats.armed_late),
                        ("pacer_cpu_s", stats.cpu_s), ("pacer_native", stats.native),
                        ("pacer_realtime", stats.realtime)):
        telemetry.append_row({"t_ns": t_ns, "source": "client", "name": name, "value": float(value)})


def new_runner(part: Part, client: Transport, requests: TableWriter, chunks: TableWriter, halt: Stopping,
               progress: ProgressSink | None, share: WorkerShare | None = None) -> Runner:
    """The runner of `part` (with `share`, one worker's share of it), counting output tokens with
    the run's tokenizer where it is the model's own; with load.stop_when_saturated, watched by
    the saturation watch, which stops it through `halt`."""
    spec = part.spec
    tokenizer = part.tokenizer
    encode = tokenizer.tokenizer.encode if tokenizer is not None and tokenizer.exact else None
    if spec.load.stop_when_saturated and spec.load.open_loop:
        progress = SaturationWatch(progress, halt.reasons, halt.stop, spec.validity.min_achieved_rate_fraction,
                                   part.t0_ns)
    return Runner(client, spec.endpoint.api, spec.load, part.schedule, part.pool, requests, chunks, part.t0_ns,
                  halt.stop,
                  record_text=spec.record_text, count_tokens=(lambda s: len(encode(s))) if encode else None,
                  progress=progress, entries=part.entries, share=share)


async def open_connections(client: Transport, wanted: int) -> None:
    """Start `client` and open up to `wanted` connections (at most MAX_PRECONNECT) before the
    first send; an endpoint that refuses them is an EndpointError naming it."""
    await client.start()
    try:
        await client.preconnect(min(wanted, MAX_PRECONNECT))
    except (OSError, TimeoutError) as exc:
        endpoint = client.endpoint
        raise EndpointError(f"cannot open connections to {endpoint.host}:{endpoint.port}: {exc}") from exc
