"""Arrival patterns and the materialized schedule of the offered load.

As in MLPerf LoadGen, the schedule is built before the first request: an Arrow table of
(seq, phase, intended_offset_ns, request_index), hashed. The runner only waits for deadlines.

Patterns:
- `closed`: `concurrency` users, each sending its next request when its last one ends; the
  intended time of a request is the moment its user became free (recorded at run time), so
  intended offsets are null in the schedule.
- `constant`: one arrival every 1/rate s.
- `poisson`: exponential gaps with mean 1/rate s (coefficient of variation 1).
- `gamma`: gamma gaps with mean 1/rate s and shape `burstiness`: CV = 1/sqrt(burstiness);
  burstiness < 1 is burstier than Poisson, > 1 smoother, 1 is Poisson.
- `trace`: the arrival times an imported log recorded (`workload.source` with timestamps),
  relative to its first, divided by `time_scale` (2 = twice as fast).

A rejection (HTTP 429 or 503) is recorded and, by default, never retried: the offered load stays
the schedule's. `on_reject` declares otherwise (`RejectPolicy`); a retry is sent outside the
schedule, by the slot or user that sent the first attempt.

The warm-up is the first `warmup.requests` requests. The measurement window then runs for
`measure.requests` requests or `measure.duration_s` seconds of intended arrivals (open loop) or
of sending (closed loop); requests still in flight at its end are drained, not cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness._errors import ScheduleError
from harness._loadspec import LoadSpec
from workloads import table_sha256

__all__ = ["Schedule", "build_schedule", "SCHEDULE_SCHEMA"]

SCHEDULE_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("phase", pa.string()),
        ("intended_offset_ns", pa.int64()),
        ("request_index", pa.int64()),
    ]
)

_CLOSED_POOL_DEFAULT = 512


@dataclass(frozen=True)
class Schedule:
    """The offered load in order. `table` follows SCHEDULE_SCHEMA; `pool_size` is the number of
    distinct requests needed from the workload (closed loops with a duration cycle through it)."""

    table: pa.Table
    sha256: str
    pool_size: int
    n_warmup: int
    window_ns: int | None


def _gaps_s(spec: LoadSpec, rng: np.random.Generator, n: int) -> np.ndarray:
    assert spec.rate_per_s is not None
    mean = 1.0 / spec.rate_per_s
    if spec.pattern == "constant":
        return np.full(n, mean)
    if spec.pattern == "poisson":
        return rng.exponential(mean, size=n)
    return rng.gamma(spec.burstiness, mean / spec.burstiness, size=n)


def _trace_offsets(spec: LoadSpec, timestamps_s: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(offsets in ns from the first arrival, request indexes) in time order, scaled."""
    if timestamps_s is None or not len(timestamps_s) or not np.isfinite(timestamps_s).all():
        raise ScheduleError("load.pattern: trace needs workload.source records that all carry a timestamp")
    order = np.argsort(timestamps_s, kind="stable")
    seconds = (timestamps_s[order] - timestamps_s[order[0]]) / spec.time_scale
    return np.rint(seconds * 1e9).astype(np.int64), order.astype(np.int64)


def build_schedule(spec: LoadSpec, pool_size: int | None = None,
                   timestamps_s: np.ndarray | None = None) -> Schedule:
    """Materialize the schedule of one repetition (every repetition replays it).

    `pool_size` (workload.requests) bounds the distinct requests; None sizes it to the schedule.
    `timestamps_s` (trace only): each workload request's recorded time, by request index.
    """

    n_warmup = spec.warmup.requests
    window_ns = None if spec.measure.duration_s is None else int(spec.measure.duration_s * 1e9)
    if spec.pattern == "trace":
        offsets_ns, indexes = _trace_offsets(spec, timestamps_s)
        if spec.measure.requests is not None:
            n = min(len(offsets_ns), n_warmup + spec.measure.requests)
        else:
            start = offsets_ns[n_warmup] if n_warmup < len(offsets_ns) else 0
            n = int(np.searchsorted(offsets_ns, start + (window_ns or 0), side="left"))
        if n <= n_warmup:
            raise ScheduleError("the trace has no arrival inside the measurement window; lengthen it")
        offsets_ns, indexes = offsets_ns[:n], indexes[:n]
        table = pa.table(
            {"seq": pa.array(np.arange(n, dtype=np.int64)),
             "phase": pa.array(["warmup"] * n_warmup + ["measure"] * (n - n_warmup), pa.string()),
             "intended_offset_ns": pa.array(offsets_ns), "request_index": pa.array(indexes)},
            schema=SCHEDULE_SCHEMA,
        )
        return Schedule(table, table_sha256(table), len(timestamps_s) if timestamps_s is not None else n,
                        n_warmup, window_ns)
    if spec.open_loop:
        rng = np.random.default_rng(np.random.SeedSequence([spec.seed, 1]))
        if spec.measure.requests is not None:
            n = n_warmup + spec.measure.requests
            gaps = _gaps_s(spec, rng, n)
        else:
            assert spec.rate_per_s is not None and spec.measure.duration_s is not None
            expected = n_warmup + spec.rate_per_s * spec.measure.duration_s
            n_draw = int(expected + 6 * math.sqrt(expected) + 16)
            gaps = _gaps_s(spec, rng, n_draw)
        gaps[0] = 0.0  # the first request goes at the start
        offsets_ns = np.rint(np.cumsum(gaps) * 1e9).astype(np.int64)
        if window_ns is not None:
            start = offsets_ns[n_warmup] if n_warmup < len(offsets_ns) else 0
            n = int(np.searchsorted(offsets_ns, start + window_ns, side="left"))
            if n <= n_warmup:
                raise ScheduleError(
                    "load.measure.duration_s is too short for one arrival at load.rate_per_s; "
                    "lengthen the window or raise the rate"
                )
            offsets_ns = offsets_ns[:n]
        n = len(offsets_ns)
        intended = pa.array(offsets_ns)
    else:
        n = n_warmup + (spec.measure.requests or 0)
        if spec.measure.requests is None:
            n = pool_size or _CLOSED_POOL_DEFAULT
        intended = pa.nulls(n, pa.int64())
    pool = min(n, pool_size) if pool_size else n
    phases = ["warmup"] * min(n_warmup, n) + ["measure"] * max(0, n - n_warmup)
    table = pa.table(
        {
            "seq": pa.array(np.arange(n, dtype=np.int64)),
            "phase": pa.array(phases, pa.string()),
            "intended_offset_ns": intended,
            "request_index": pa.array(np.arange(n, dtype=np.int64) % pool),
        },
        schema=SCHEDULE_SCHEMA,
    )
    return Schedule(table, table_sha256(table), pool, n_warmup, window_ns)
