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
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from typing import Any

from harness import START_LEAD_NS, WorkerShare
from passport.run._fleet import Report, coordinate, report_of, worker_phase
from passport.run._phase import TimedInputs, TimedOutcome, run_loop
from passport.run._shards import WORKERS_DIR, merge_shards

__all__ = ["Forked"]

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


def _follow_parent(parent_pid: int) -> None:
    """Ask Linux to send this process SIGTERM when the coordinator dies (even by SIGKILL), so a
    worker stops and closes its shard instead of sending on as an orphan."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _worker_main(inputs: TimedInputs, worker: int, workers: int, shared: _Shared, parent_pid: int) -> None:
    """A forked worker: its part of the load on a fresh event loop, then its report; exits
    without running the parent's exit handlers (they belong to the coordinator)."""
    code = 0
    _follow_parent(parent_pid)
    try:
        folder = inputs.folder / WORKERS_DIR / f"w{worker}"
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

        results, reason = run_loop(worker_phase(inputs.part, inputs.client, WorkerShare(worker, workers, start),
                                                folder, stopped, _Counts(shared.counters, worker)))
        if reason is not None:
            shared.stop.set()  # the endpoint is gone, a file cannot be written, a signal: everyone stops
            shared.barrier.abort()
        if os.getppid() == parent_pid:  # an orphan has nobody to report to; its shard says it all
            shared.reports.put((worker, *report_of(results, reason)))
            shared.reports.close()
            shared.reports.join_thread()
    except BaseException:  # noqa: BLE001 - the coordinator sees the exit code and says which worker
        code = 3
        with contextlib.suppress(Exception):
            shared.stop.set()
            shared.barrier.abort()
    os._exit(code)


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


class Forked:
    """The Backend of a run sent by `workers` processes forked on this host (see the module
    docstring): fork them, coordinate them on this process's event loop, merge their shards."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, inputs: TimedInputs) -> TimedOutcome:
        workers = self.workers
        start_ns = _CONTEXT.Value("q", 0, lock=False)

        def stamp_start() -> None:  # run by one worker as the barrier releases them all; one host, one clock
            start_ns.value = time.perf_counter_ns() + START_LEAD_NS

        shared = _Shared(stop=_CONTEXT.Event(), barrier=_CONTEXT.Barrier(workers, action=stamp_start),
                         start_ns=start_ns, counters=_CONTEXT.Array("q", 3 * workers, lock=False),
                         reports=_CONTEXT.Queue())
        (inputs.folder / WORKERS_DIR).mkdir(exist_ok=True)
        processes = []
        for k in range(workers):
            process = _CONTEXT.Process(target=_worker_main, args=(inputs, k, workers, shared, os.getpid()),
                                       name=f"passport-w{k}", daemon=True)
            process.start()
            processes.append(process)
        outcome = run_loop(coordinate(inputs, _Forked(processes, shared)))
        merge_shards(inputs.folder, workers)
        return TimedOutcome(*outcome)
