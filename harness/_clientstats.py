"""The harness watching itself: event-loop lag, process CPU share and the loop's wait for a CPU,
on the run clock.

A task wakes every `interval_s`; how late it wakes is the loop lag (any callback that hogs the
loop shows here, and so does a machine whose other processes keep the loop's thread off a CPU).
The process's CPU time over the interval (all threads: writer threads too) divided by wall time
is its CPU share of one core; the time the loop's thread spent runnable but waiting for a CPU
(Linux's /proc/thread-self/schedstat run delay) divided by wall time is `run_wait_share`: high
when other processes (an engine on the same cores, a build) take the CPUs, whatever this process
does. All go to `telemetry.parquet` as source `client`, names `loop_lag_ms`, `cpu_share` and
(where the kernel has schedstat) `run_wait_share`; the validity rule `client_not_bound` reads
them to say whether the client distorted timings, and why.
"""

from __future__ import annotations

import asyncio
import resource
import time

from harness._recorder import TableWriter

__all__ = ["ClientMonitor", "run_delay_ns"]

_now = time.perf_counter_ns


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_delay_ns() -> int | None:
    """Nanoseconds the calling thread has waited runnable for a CPU (None: no schedstat here)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


class ClientMonitor:
    """Samples loop lag and CPU share into `writer` until cancelled."""

    def __init__(self, writer: TableWriter, t0_ns: int, interval_s: float = 0.1) -> None:
        self._writer = writer
        self._t0 = t0_ns
        self._interval_s = interval_s

    async def run(self) -> None:
        interval_ns = int(self._interval_s * 1e9)
        last_t, last_cpu, last_wait = _now(), _cpu_s(), run_delay_ns()
        while True:
            expected = last_t + interval_ns
            await asyncio.sleep(self._interval_s)
            t, cpu, wait = _now(), _cpu_s(), run_delay_ns()
            rel = t - self._t0
            self._writer.append_row(
                {"t_ns": rel, "source": "client", "name": "loop_lag_ms", "value": max(0, t - expected) / 1e6}
            )
            self._writer.append_row(
                {"t_ns": rel, "source": "client", "name": "cpu_share", "value": (cpu - last_cpu) / ((t - last_t) / 1e9)}
            )
            if wait is not None and last_wait is not None:
                share = (wait - last_wait) / (t - last_t)
                self._writer.append_row({"t_ns": rel, "source": "client", "name": "run_wait_share", "value": share})
            last_t, last_cpu, last_wait = t, cpu, wait
