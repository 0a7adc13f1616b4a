"""The harness watching itself: event-loop lag and process CPU share, on the run clock.

A task wakes every `interval_s`; how late it wakes is the loop lag (any callback that hogs the
loop shows here), and the process's CPU time over the interval (all threads: writer threads
too) divided by wall time is its CPU share of one core. Both go to `telemetry.parquet` as
source `client`, names `loop_lag_ms` and `cpu_share`. A client near a full core is the
bottleneck; the validity rule `client_not_bound` reads these rows.
"""

from __future__ import annotations

import asyncio
import resource
import time

from harness._recorder import TableWriter

__all__ = ["ClientMonitor"]

_now = time.perf_counter_ns


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ClientMonitor:
    """Samples loop lag and CPU share into `writer` until cancelled."""

    def __init__(self, writer: TableWriter, t0_ns: int, interval_s: float = 0.1) -> None:
        self._writer = writer
        self._t0 = t0_ns
        self._interval_s = interval_s

    async def run(self) -> None:
        interval_ns = int(self._interval_s * 1e9)
        last_t, last_cpu = _now(), _cpu_s()
        while True:
            expected = last_t + interval_ns
            await asyncio.sleep(self._interval_s)
            t, cpu = _now(), _cpu_s()
            rel = t - self._t0
            self._writer.append_row(
                {"t_ns": rel, "source": "client", "name": "loop_lag_ms", "value": max(0, t - expected) / 1e6}
            )
            self._writer.append_row(
                {"t_ns": rel, "source": "client", "name": "cpu_share", "value": (cpu - last_cpu) / ((t - last_t) / 1e9)}
            )
            last_t, last_cpu = t, cpu
