"""The load, timeout and limit sections of a run spec: HOW and WHEN requests are sent
(`LoadSpec`: arrival pattern, concurrency, warm-up, window, repetitions, rejections, workers),
how long one may take (`TimeoutSpec`) and how much one answer may send (`LimitsSpec`). Pydantic
only: `passport.model` validates a spec with these without loading the runner, the HTTP stack
or numpy. Each default has its home here; `Timeouts` and `Limits` (the transport's own, frozen
dataclasses) are built from them.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["LoadSpec", "WarmupSpec", "MeasureSpec", "RejectPolicy", "TimeoutSpec", "LimitsSpec", "Timeouts",
           "Limits", "CONTROL_BYTES", "MAX_SCHEDULED", "DEFAULT_STREAMS", "Pattern"]

Pattern = Literal["closed", "constant", "poisson", "gamma", "trace"]
DEFAULT_STREAMS = 64  # connections kept open by an open loop without an in-flight cap
CONTROL_BYTES = 16 << 20  # the most one control-plane answer (probe, /metrics, /tokenize) may send


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


@dataclass(frozen=True)
class Timeouts:
    """Per-request limits in seconds; None means no limit. `first_byte_s` runs from the send to
    the first byte of the response *body* (headers alone come at once from most engines);
    `stall_s` is the longest silence after that; `total_s` the whole exchange. The defaults are
    the spec's (TimeoutSpec)."""

    connect_s: float | None = 10.0
    first_byte_s: float | None = 300.0
    stall_s: float | None = 60.0
    total_s: float | None = 900.0


@dataclass(frozen=True)
class Limits:
    """How much one response may send before it is cut off (the request then ends as a stream
    error naming the limit): body bytes, bytes of one event (since the last blank line), events,
    and header bytes. Checked once per read with C-level searches, not per byte."""

    bytes_per_response: int = 128 << 20
    bytes_per_event: int = 8 << 20
    events_per_response: int = 2_000_000
    header_bytes: int = 64 << 10


# The most requests one schedule holds: it and the request pool are built in memory before the
# first request (about 2 KiB each with an 8-token prompt, more with longer ones).
MAX_SCHEDULED = 10_000_000


class WarmupSpec(_Strict):
    """Requests sent before the measurement window and excluded from the results."""

    requests: int = Field(0, ge=0, le=1_000_000, description="Number of warm-up requests.")
    barrier: bool = Field(
        False, description="Wait for every warm-up request to finish before the first measured one is sent, so "
                           "no measured request shares the engine with warm-up; an open loop's measured "
                           "schedule then starts when the last warm-up answer is in (false: warm-up runs "
                           "into the window, as its schedule says). A closed loop's default is true.")


class MeasureSpec(_Strict):
    """The measurement window: a request count or a duration (exactly one)."""

    duration_s: float | None = Field(None, gt=0, le=7 * 86400, description="Window length in seconds (a week at most).")
    requests: int | None = Field(None, ge=1, le=MAX_SCHEDULED, description="Number of measured requests.")

    @model_validator(mode="after")
    def _one_of(self) -> Self:
        if (self.duration_s is None) == (self.requests is None):
            raise ValueError("set exactly one of measure.duration_s or measure.requests")
        return self


class RejectPolicy(_Strict):
    """What a rejection (HTTP 429 or 503) leads to. `none`: it is recorded and the request is not
    sent again. `honour_retry_after`: the same request is sent again once the wait the server
    asked for in Retry-After (seconds, or an HTTP date) has passed, or 1 s doubling per attempt
    where it asked for none, never more than `max_wait_s`; at most `max_retries` times. Every
    attempt is its own row of requests.parquet (`attempt`, `retry_of`: the first attempt's id)."""

    retry: Literal["none", "honour_retry_after"] = Field(
        "none",
        description="none: a rejected request is counted as rejected; honour_retry_after: sent again after the "
                    "server's Retry-After.",
    )
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


class LoadSpec(_Strict):
    """HOW and WHEN requests are sent: arrival pattern, concurrency, window, repetitions."""

    pattern: Pattern = Field(description="closed | constant | poisson | gamma | trace.")
    rate_per_s: float | None = Field(None, gt=0, le=1_000_000, description="Open loop: mean arrivals per second.")
    concurrency: int | None = Field(
        None, ge=1, le=100_000, description="Closed loop: users. Open loop: optional cap on requests in flight."
    )
    burstiness: float = Field(1.0, gt=0, description="gamma: shape of the gaps (CV = 1/sqrt).")
    time_scale: float = Field(1.0, gt=0, description="trace: replay speed (2 = the log's gaps halved).")
    warmup: WarmupSpec = Field(
        default_factory=WarmupSpec,
        description="Requests sent before the measured window, never counted (with barrier: all answered before "
                    "it opens).",
    )
    measure: MeasureSpec = Field(
        default_factory=lambda: MeasureSpec(duration_s=60.0),
        description="The measured window: a request count or a duration in seconds.",
    )
    repetitions: int = Field(1, ge=1, le=1000, description="Times the schedule is replayed.")
    seed: int = Field(0, description="Seed of the arrival process (and default workload seed).")
    on_reject: RejectPolicy = Field(default_factory=RejectPolicy, description="Whether a 429/503 is sent again.")
    stop_when_saturated: bool = Field(
        False, description="Open loop: stop the run within seconds when the server plainly cannot serve the offered "
                           "rate (completions fall behind the schedule beyond validity.min_achieved_rate_fraction "
                           "and requests in flight keep rising); the verdict is then SATURATED. On by default in "
                           "a sweep's rate levels.")
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
    def _closed_warmup_ends_first(self) -> Self:
        """A closed loop's warm-up finishes before its window opens unless the spec says otherwise
        (warmup.barrier: false): without the barrier, warm-up answers still streaming when the first
        measured requests start share the engine with them uncounted, and the window's throughput
        reads low (4 users, 2 warm-up requests: 9.6 % under the steady state the simulator's script
        gives, 0.4 % with the barrier)."""
        if self.pattern == "closed" and self.warmup.requests and "barrier" not in self.warmup.model_fields_set:
            self.warmup = WarmupSpec(requests=self.warmup.requests, barrier=True)
        return self

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
            if self.stop_when_saturated:
                raise ValueError("load.stop_when_saturated is for open loops: a closed loop's users wait for their "
                                 "answers, so its queue cannot grow; drop it or set load.rate_per_s")
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


class TimeoutSpec(_Strict):
    """Per-request limits in seconds (null: none)."""

    connect_s: float | None = Field(
        Timeouts.connect_s, gt=0, le=86400,
        description="Seconds to open a connection (TCP and TLS); none: no bound.",
    )
    first_byte_s: float | None = Field(
        Timeouts.first_byte_s, gt=0, le=86400,
        description="Seconds from the send to the response's first byte; none: no bound.",
    )
    stall_s: float | None = Field(
        Timeouts.stall_s, gt=0, le=86400,
        description="Seconds of silence allowed between two events of a stream; none: no bound.",
    )
    total_s: float | None = Field(
        Timeouts.total_s, gt=0, le=86400,
        description="Seconds a request may take in all; none: no bound.",
    )
    control_s: float = Field(10.0, gt=0, le=600, description="Whole-answer limit of each control-plane call "
                                                             "(probes, /metrics, /tokenize, cache resets).")

    def timeouts(self) -> Timeouts:
        """The transport's per-request limits."""
        return Timeouts(self.connect_s, self.first_byte_s, self.stall_s, self.total_s)


class LimitsSpec(_Strict):
    """How much one answer may send before it is cut off (`stream_error`), so a hostile endpoint
    cannot exhaust the harness's memory (at worst concurrency x bytes_per_response); the defaults
    are harness.Limits', far above what an engine sends (a 100,000-token answer is 25-60 MB of
    events, by engine)."""

    bytes_per_response: int = Field(
        Limits.bytes_per_response, ge=1 << 10, le=1 << 34,
        description="The most bytes one response may send (a larger one is cut and failed).",
    )
    bytes_per_event: int = Field(
        Limits.bytes_per_event, ge=1 << 10, le=1 << 32,
        description="The most bytes one streamed event may have.",
    )
    events_per_response: int = Field(
        Limits.events_per_response, ge=10, le=1 << 32,
        description="The most events one streamed response may send.",
    )
    header_bytes: int = Field(
        Limits.header_bytes, ge=1 << 10, le=1 << 26,
        description="The most bytes a response's headers may have.",
    )
    control_bytes: int = Field(CONTROL_BYTES, ge=1 << 10, le=1 << 32, description="Per control-plane answer.")

    def limits(self) -> Limits:
        """The transport's per-answer limits."""
        return Limits(self.bytes_per_response, self.bytes_per_event, self.events_per_response, self.header_bytes)
