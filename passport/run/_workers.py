"""The timed phase sent by several worker processes on this host (`load.workers` > 1).

One process is one core: past what one event loop holds (`benchmarks/overhead.py`, the
`client_not_bound` rule), the load is dealt to N processes forked from this one right before
timing, each with its own uvloop, connections and recorder shard (`workers/w<k>/`):
- open loop: worker k sends scheduled requests k, k+N, k+2N, ... at their absolute deadlines on
  the machine's one monotonic clock, so together they send the one schedule; an in-flight cap is
  split between them;
- closed loop: worker k runs users k, k+N, ... and takes sequence numbers k, k+N, ...; a session
  stays on the worker that started it;
- every repetition starts when every worker is ready for it (a barrier, whose release stamps one
  start time `START_LEAD_NS` ahead: an open loop's deadlines are that start plus the schedule's
  offsets in every worker, so a slow wake-up on a busy machine shows as dispatch lag, never as a
  shifted schedule);
- request ids interleave (id x N + k), so they stay unique; each worker samples its own CPU
  share and loop lag.
This process stays the coordinator: engine watch, server telemetry, canaries under load and the
progress line (counts only: requests done, in flight, errors). Ctrl-C reaches every process of
the terminal's group; a stop from here (the engine died, SIGTERM to this process) is passed to
the workers through a shared event. A worker that dies stops the others; what every worker
recorded is kept and the run is INCOMPLETE with the worker, its exit code and when.

Afterwards the shards are merged into the run folder's usual files (requests, chunks, telemetry;
same schemas, rows tagged with their `worker`) and removed, so verify, compare and every reader
see one run. Linux only (fork): the workers inherit the prepared requests instead of pickling
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import shutil
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness import (
    RAW_TABLES,
    START_LEAD_NS,
    TELEMETRY_SCHEMA,
    ClientMonitor,
    ProgressSink,
    RepetitionResult,
    Runner,
    TableWriter,
    TelemetrySampler,
    WorkerShare,
    open_new,
)
from passport._errors import OutputFolderError
from passport.run._recover import join_leftover_parts

__all__ = ["run_with_workers", "worker_phase", "merge_shards", "resolve_workers", "combine_reports", "coordinate",
           "Fleet", "Report", "WORKERS_DIR"]

WORKERS_DIR = "workers"
_CONTEXT = multiprocessing.get_context("fork")


@dataclass
class _Shared:
    """What the processes share: a stop flag, the repetition barrier, the repetition's start time
    (set by the barrier's action as it releases everyone), each worker's progress counters (done,
    in flight, errors) and the workers' reports."""

    stop: Any  # multiprocessing.Event
    barrier: Any  # multiprocessing.Barrier
    start_ns: Synchronized[int]
    counters: SynchronizedArray[int]
    reports: Any  # multiprocessing.Queue of (worker, repetitions, stop reason)


class _Counts:
    """A worker's progress sink: three integers in shared memory, no call into another process."""

    def __init__(self, counters: SynchronizedArray[int], worker: int) -> None:
        self._counters, self._base = counters, 3 * worker

    def update(self, done: int, in_flight: int, errors: int, row: Mapping[str, object]) -> None:
        self._counters[self._base:self._base + 3] = [done, in_flight, errors]


async def worker_phase(inputs: Any, client: Any, share: WorkerShare, folder: Path,
                       stopped: Callable[[], Awaitable[bool]],
                       progress: ProgressSink | None) -> tuple[list[RepetitionResult], str | None]:
    """One worker's part of the timed phase, on this process's event loop: `inputs` has the
    spec, schedule, pool, entries, t0_ns and tokenizer of the run; `stopped` says whether the
    coordinator asked every worker to stop. Writes its shard into `folder`."""
    from passport.run._timed import _quiet_interpreter, stopping

    spec = inputs.spec
    loop = asyncio.get_running_loop()
    halt = stopping()
    stop = halt.stop
    shard = halt.writers(folder)
    writers = {w.name: w for w in shard}

    async def follow_stop() -> None:
        while not stop.is_set():
            if await stopped():
                stop.set()
            await asyncio.sleep(0.02)

    count = inputs.tokenizer.tokenizer.encode if inputs.tokenizer is not None and inputs.tokenizer.exact else None
    runner = Runner(client, spec.endpoint.api, spec.load, inputs.schedule, inputs.pool, writers["requests"],
                    writers["chunks"], inputs.t0_ns, stop, record_text=spec.record_text,
                    count_tokens=(lambda s: len(count(s))) if count else None,
                    progress=progress, entries=inputs.entries, share=share)
    background = [loop.create_task(ClientMonitor(writers["telemetry"], inputs.t0_ns).run()),
                  loop.create_task(follow_stop())]
    try:
        with _quiet_interpreter():
            await client.start()
            await client.preconnect(min(share.part(spec.load.concurrency or 64), 64))
            results = await runner.run()
        if runner.abort_reason:
            halt.reasons.append(runner.abort_reason)
    finally:
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await client.aclose()
        for sig in halt.installed:
            loop.remove_signal_handler(sig)
        halt.close(shard)
    return results, halt.reason


def _follow_parent(parent_pid: int) -> None:
    """Ask Linux to send this process SIGTERM when the coordinator dies (even by SIGKILL), so a
    worker stops and closes its shard instead of sending on as an orphan."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _worker_main(inputs: Any, worker: int, workers: int, shared: _Shared, parent_pid: int) -> None:
    """A forked worker: its part of the load on a fresh event loop, then its report; exits
    without running the parent's exit handlers (they belong to the coordinator)."""
    code = 0
    _follow_parent(parent_pid)
    try:
        folder = Path(inputs.folder) / WORKERS_DIR / f"w{worker}"
        folder.mkdir(parents=True, exist_ok=True)

        async def start(rep: int) -> int | None:
            try:
                await asyncio.to_thread(shared.barrier.wait)
            except threading.BrokenBarrierError:
                shared.stop.set()  # another worker stopped before the repetition started
                return None
            return int(shared.start_ns.value)

        async def stopped() -> bool:
            return bool(shared.stop.is_set())

        phase = worker_phase(inputs, inputs.client, WorkerShare(worker, workers, start), folder, stopped,
                             _Counts(shared.counters, worker))
        try:
            import uvloop
            results, reason = uvloop.run(phase)
        except ImportError:
            results, reason = asyncio.run(phase)
        if reason is not None:
            shared.stop.set()  # the endpoint is gone, a file cannot be written, a signal: everyone stops
            shared.barrier.abort()
        if os.getppid() == parent_pid:  # an orphan has nobody to report to; its shard says it all
            shared.reports.put((worker, [(r.repetition, r.sent, r.pool_cycles) for r in results], reason))
            shared.reports.close()
            shared.reports.join_thread()
    except BaseException:  # noqa: BLE001 - the coordinator sees the exit code and says which worker
        code = 3
        with contextlib.suppress(Exception):
            shared.stop.set()
            shared.barrier.abort()
    os._exit(code)


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


class _Forked:
    """Workers forked on this host (see the module docstring)."""

    def __init__(self, processes: list[Any], shared: _Shared) -> None:
        self.processes, self.shared = processes, shared
        self.reports: dict[int, Report] = {}

    def poll(self, reasons: list[str], elapsed_s: float) -> bool:
        shared = self.shared
        while not shared.reports.empty():
            worker, results, reason = shared.reports.get()
            self.reports[worker] = (results, reason)
        for k, p in enumerate(self.processes):
            if p.exitcode is not None and p.exitcode != 0 and k not in self.reports and not shared.stop.is_set():
                reasons.insert(0, f"worker {k} (pid {p.pid}) died with exit code {p.exitcode} {elapsed_s:.1f} s into "
                                  "the timed phase; every worker's records so far are kept")
                self.stop()
        return any(p.exitcode is None for p in self.processes) or not shared.reports.empty()

    def stop(self) -> None:
        self.shared.stop.set()
        self.shared.barrier.abort()

    def counts(self) -> tuple[int, int, int] | None:
        c = self.shared.counters[:]
        return sum(c[0::3]), sum(c[1::3]), sum(c[2::3])

    def finish(self, reasons: list[str]) -> None:
        for p in self.processes:
            p.join(timeout=30)
            if p.exitcode is None:
                p.kill()
                p.join()
        for k, p in enumerate(self.processes):
            if k not in self.reports and not any(r.startswith(f"worker {k} ") for r in reasons):
                reasons.append(f"worker {k} (pid {p.pid}) ended without reporting (exit code {p.exitcode}); every "
                               "worker's records so far are kept")


async def coordinate(inputs: Any, fleet: Fleet) -> tuple[list[RepetitionResult], str | None]:
    """This process while the workers send: the engine watch, server telemetry, canaries under
    load and the progress line, as in a one-process run; a stop here (a signal, the engine died)
    stops every worker, a worker that dies stops the others."""
    from passport.run._timed import _EngineWatch, stopping, wind_down

    spec, folder, t0_ns = inputs.spec, inputs.folder, inputs.t0_ns
    loop = asyncio.get_running_loop()
    halt = stopping()
    try:
        telemetry_w = TableWriter(folder, "telemetry", TELEMETRY_SCHEMA, flush_rows=1024, flush_s=5.0)
    except OSError as exc:
        raise OutputFolderError(f"cannot write the raw logs in {folder} ({exc})") from None
    watch = (_EngineWatch(inputs.launcher, telemetry_w, t0_ns, inputs.run_start_ns, halt.stop, halt.reasons)
             if inputs.launcher is not None else None)
    background: list[asyncio.Task[None]] = []
    if inputs.telemetry_sources:
        background.append(loop.create_task(TelemetrySampler(inputs.telemetry_sources, telemetry_w, t0_ns,
                                                            spec.telemetry.interval_s).run()))
    if watch is not None:
        background.append(loop.create_task(watch.watch()))
    sink = inputs.under_load if inputs.under_load is not None else inputs.progress
    canaries_done = asyncio.Event()
    under_load = loop.create_task(inputs.under_load.run(canaries_done)) if inputs.under_load is not None else None
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
        await wind_down(canaries_done, under_load, background, watch, halt.installed)
        telemetry_w.close()
    return combine_reports(fleet.reports, halt.reasons)


Report = tuple[list[tuple[int, int, int]], str | None]  # a worker's (repetition, sent, pool cycles), stop reason


def combine_reports(reports: dict[int, Report], reasons: list[str]) -> tuple[list[RepetitionResult], str | None]:
    """The workers' repetitions summed (sent) and maxed (pool cycles), and the first stop reason:
    the coordinator's `reasons` first, then each worker's own."""
    reasons = reasons + [f"worker {k}: {reports[k][1]}" for k in sorted(reports) if reports[k][1]]
    by_rep: dict[int, RepetitionResult] = {}
    for results, _ in reports.values():
        for rep, sent, cycles in results:
            total = by_rep.setdefault(rep, RepetitionResult(rep))
            total.sent += sent
            total.pool_cycles = max(total.pool_cycles, cycles)
    return [by_rep[r] for r in sorted(by_rep)], reasons[0] if reasons else None


def run_with_workers(inputs: Any, workers: int) -> tuple[list[RepetitionResult], str | None]:
    """Fork the workers, coordinate them on this process's event loop, merge their shards."""
    start_ns = _CONTEXT.Value("q", 0, lock=False)

    def stamp_start() -> None:  # run by one worker as the barrier releases them all; every host clock is one here
        start_ns.value = time.perf_counter_ns() + START_LEAD_NS

    shared = _Shared(stop=_CONTEXT.Event(), barrier=_CONTEXT.Barrier(workers, action=stamp_start), start_ns=start_ns,
                     counters=_CONTEXT.Array("q", 3 * workers, lock=False), reports=_CONTEXT.Queue())
    (Path(inputs.folder) / WORKERS_DIR).mkdir(exist_ok=True)
    processes = []
    for k in range(workers):
        process = _CONTEXT.Process(target=_worker_main, args=(inputs, k, workers, shared, os.getpid()),
                                   name=f"passport-w{k}", daemon=True)
        process.start()
        processes.append(process)
    fleet = _Forked(processes, shared)
    try:
        import uvloop
        outcome = uvloop.run(coordinate(inputs, fleet))
    except ImportError:
        outcome = asyncio.run(coordinate(inputs, fleet))
    merge_shards(Path(inputs.folder), workers)
    return outcome


# One worker's budget: half a core for the receive path. benchmarks/overhead.py put passport at
# 1 ms added p99 lag near 25,600 chunks/s at 18 us of CPU per chunk, i.e. about half a core;
# past that the lag grows with the load.
_CPU_BUDGET = 0.5
# A closed loop's streams are assumed to decode at most this fast (chunks/s each) when the offered
# rate is not known before the run: a fast GPU server's single stream.
_CLOSED_LOOP_CHUNKS_PER_S = 100.0


def _calibrate(streams: int = 32, tokens: int = 400) -> dict[str, float]:
    """CPU microseconds per streamed chunk of this process's receive path, measured against the
    simulated engine sending back to back (about a second)."""
    from harness import Endpoint, HttpClient, Timeouts
    from harness.simulator import spawn

    server, url = spawn("--ttft-ms", "0", "--itl-ms", "0")
    try:
        async def measure() -> tuple[float, int]:
            client = HttpClient(Endpoint.parse(url), Timeouts(), max_idle=streams)
            body = (b'{"model":"sim-model","prompt":"calibration","max_tokens":%d,"stream":true,'
                    b'"ignore_eos":true}' % tokens)
            request = client.request_bytes("/completions", body)
            await client.start()
            try:
                await client.preconnect(streams)
                await asyncio.gather(*(client.exchange(request) for _ in range(streams)))  # warm
                cpu0 = time.process_time()
                done = await asyncio.gather(*(client.exchange(request) for _ in range(streams)))
                return time.process_time() - cpu0, sum(len(ex.sse) for ex in done)
            finally:
                await client.aclose()

        cpu_s, chunks = asyncio.run(measure())
    finally:
        server.terminate()
        server.wait(5)
    per_chunk_us = cpu_s / max(chunks, 1) * 1e6
    return {"cpu_us_per_chunk": per_chunk_us, "chunks": float(chunks),
            "chunks_per_s_per_worker": _CPU_BUDGET / (per_chunk_us / 1e6)}


def resolve_workers(spec: Any, say: Any) -> dict[str, Any] | None:
    """load.workers as a count with how it was chosen (None: one process). `auto`: the chunks/s
    the load will offer (open loop: rate x mean output tokens; closed loop: concurrency x
    100/s, a fast server's stream) over what one process holds within half a core here."""
    declared = spec.load.workers
    if spec.load.backend == "ray":
        from passport.run._ray import alive_nodes

        nodes = alive_nodes()
        count = nodes if declared == "auto" else int(declared)
        say(f"load.workers: {count} Ray actor(s) over {nodes} node(s)")
        return {"count": count, "how": "one per node" if declared == "auto" else "declared", "backend": "ray",
                "address": spec.load.ray_address or "auto", "nodes": nodes}
    if declared == 1:
        return None
    if declared != "auto":
        return {"count": int(declared), "how": "declared"}
    load = spec.load
    calibration = _calibrate()
    if load.open_loop and load.rate_per_s is not None:
        mean_tokens = float(spec.workload.output_tokens.sample(np.random.default_rng(0), 4096).mean())
        offered = load.rate_per_s * mean_tokens
        basis = f"rate {load.rate_per_s:g}/s x {mean_tokens:g} output tokens (mean)"
    else:
        offered = (load.concurrency or 1) * _CLOSED_LOOP_CHUNKS_PER_S
        basis = f"{load.concurrency or 1} streams x {_CLOSED_LOOP_CHUNKS_PER_S:g} chunks/s"
    cores = max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1)
    wanted = max(1, -(-int(offered) // max(1, int(calibration["chunks_per_s_per_worker"]))))
    count = max(1, min(wanted, cores, load.concurrency or 64, 64))
    say(f"load.workers auto: {count} (offered ~{offered:,.0f} chunks/s from {basis}; one worker holds "
        f"~{calibration['chunks_per_s_per_worker']:,.0f} here at {calibration['cpu_us_per_chunk']:.1f} us per chunk; "
        f"{cores} core(s) for workers)")
    return {"count": count, "how": "calibrated", "offered_chunks_per_s": offered, "offered_basis": basis,
            "cores": cores, **calibration}
