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

import email.utils
import math
import time
from dataclasses import dataclass
from typing import Literal, Self

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness._errors import ScheduleError
from workloads import table_sha256

__all__ = ["LoadSpec", "WarmupSpec", "MeasureSpec", "RejectPolicy", "Schedule", "build_schedule",
           "SCHEDULE_SCHEMA"]

Pattern = Literal["closed", "constant", "poisson", "gamma", "trace"]

SCHEDULE_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("phase", pa.string()),
        ("intended_offset_ns", pa.int64()),
        ("request_index", pa.int64()),
    ]
)

_CLOSED_POOL_DEFAULT = 512
DEFAULT_STREAMS = 64  # connections kept open by an open loop without an in-flight cap


# The most requests one schedule holds: it and the request pool are built in memory before the
# first request (about 2 KiB each with an 8-token prompt, more with longer ones).
MAX_SCHEDULED = 10_000_000


class WarmupSpec(BaseModel):
    """Requests sent before the measurement window and excluded from the results."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    requests: int = Field(0, ge=0, le=1_000_000, description="Number of warm-up requests.")
    barrier: bool = Field(
        False, description="Wait for every warm-up request to finish before the first measured one is sent, so "
                           "no measured request shares the engine with warm-up; an open loop's measured "
                           "schedule then starts when the last warm-up answer is in (false: warm-up runs "
                           "into the window, as its schedule says).")


class MeasureSpec(BaseModel):
    """The measurement window: a request count or a duration (exactly one)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    duration_s: float | None = Field(None, gt=0, le=7 * 86400, description="Window length in seconds (a week at most).")
    requests: int | None = Field(None, ge=1, le=MAX_SCHEDULED, description="Number of measured requests.")

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.duration_s is None) == (self.requests is None):
            raise ValueError("set exactly one of measure.duration_s or measure.requests")
        return self


class RejectPolicy(BaseModel):
    """What a rejection (HTTP 429 or 503) leads to. `none`: it is recorded and the request is not
    sent again. `honour_retry_after`: the same request is sent again once the wait the server
    asked for in Retry-After (seconds, or an HTTP date) has passed, or 1 s doubling per attempt
    where it asked for none, never more than `max_wait_s`; at most `max_retries` times. Every
    attempt is its own row of requests.parquet (`attempt`, `retry_of`: the first attempt's id)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    retry: Literal["none", "honour_retry_after"] = "none"
    max_retries: int = Field(3, ge=1, le=100, description="Attempts after the first, at most.")
    max_wait_s: float = Field(60.0, gt=0, le=3600, description="The longest wait before a retry.")

    def wait_s(self, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before attempt `attempt + 1` after a rejection; None: no retry."""
        if self.retry == "none" or attempt >= self.max_retries:
            return None
        asked_s = _retry_after_s(retry_after)
        return min(self.max_wait_s, float(2**attempt) if asked_s is None else asked_s)


def _retry_after_s(value: str | None) -> float | None:
    """A Retry-After header in seconds from now (RFC 9110: delay-seconds or an HTTP date)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


class LoadSpec(BaseModel):
    """HOW and WHEN requests are sent: arrival pattern, concurrency, window, repetitions."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    pattern: Pattern = Field(description="closed | constant | poisson | gamma | trace.")
    rate_per_s: float | None = Field(None, gt=0, le=1_000_000, description="Open loop: mean arrivals per second.")
    concurrency: int | None = Field(
        None, ge=1, le=100_000, description="Closed loop: users. Open loop: optional cap on requests in flight."
    )
    burstiness: float = Field(1.0, gt=0, description="gamma: shape of the gaps (CV = 1/sqrt).")
    time_scale: float = Field(1.0, gt=0, description="trace: replay speed (2 = the log's gaps halved).")
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    measure: MeasureSpec = Field(default_factory=lambda: MeasureSpec(duration_s=60.0))
    repetitions: int = Field(1, ge=1, le=1000, description="Times the schedule is replayed.")
    seed: int = Field(0, description="Seed of the arrival process (and default workload seed).")
    on_reject: RejectPolicy = Field(default_factory=RejectPolicy, description="Whether a 429/503 is sent again.")
    workers: int | Literal["auto"] = Field(
        1, description="Processes that send the load, each with its own event loop, connections and recorder "
                       "shard (merged into one run folder): an integer from 1 to 64, or auto (picked from a short "
                       "calibration of what one process holds on this machine).")

    backend: Literal["local", "ray"] = Field(
        "local", description="local: workers are processes forked on this host; ray: Ray actors across the hosts "
                             "of the cluster at ray_address.")
    ray_address: str | None = Field(None, description="ray: the cluster, HOST:PORT, ray://HOST:PORT or auto.")

    @field_validator("workers")
    @classmethod
    def _workers(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= 64:
            raise ValueError("must be from 1 to 64 processes, or auto")
        return value

    @model_validator(mode="after")
    def _size(self) -> Self:
        if self.rate_per_s is not None and self.measure.duration_s is not None:
            arrivals = self.rate_per_s * self.measure.duration_s
            if arrivals > MAX_SCHEDULED:
                raise ValueError(
                    f"load.rate_per_s x load.measure.duration_s schedules {arrivals:,.0f} requests, built in memory "
                    f"before the first is sent (about {arrivals * 2048 / 2**30:,.0f} GiB); at most "
                    f"{MAX_SCHEDULED:,}: shorten the window or split the run")
        return self

    @model_validator(mode="after")
    def _backend(self) -> Self:
        if self.ray_address is not None and self.backend != "ray":
            raise ValueError("load.ray_address is set but load.backend is local; set load.backend: ray")
        return self

    @model_validator(mode="after")
    def _needs(self) -> Self:
        if isinstance(self.workers, int) and self.workers > 1 and self.concurrency is not None \
                and self.concurrency < self.workers:
            raise ValueError(f"load.workers {self.workers} is more than load.concurrency {self.concurrency}: each "
                             "worker needs at least one user (closed loop) or one in-flight slot (open loop)")
        if self.pattern == "closed":
            if self.concurrency is None:
                raise ValueError("load.pattern: closed needs load.concurrency (number of users)")
        elif self.pattern == "trace":
            if self.rate_per_s is not None:
                raise ValueError("load.pattern: trace replays the log's own times; drop load.rate_per_s "
                                 "(use load.time_scale to speed it up or slow it down)")
        elif self.rate_per_s is None:
            raise ValueError(
                f"load.pattern: {self.pattern} needs load.rate_per_s > 0; "
                "for a fixed number of users set load.pattern: closed"
            )
        return self

    @property
    def open_loop(self) -> bool:
        return self.pattern != "closed"

    @property
    def streams(self) -> int:
        """Connections the load keeps open at most: its users (closed loop) or its in-flight cap,
        else DEFAULT_STREAMS."""
        return self.concurrency or DEFAULT_STREAMS

    def __str__(self) -> str:
        if self.pattern == "closed":
            return f"closed@{self.concurrency}"
        if self.pattern == "trace":
            return f"trace x{self.time_scale:g}"
        return f"{self.pattern}@{self.rate_per_s:.2f}/s"


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
