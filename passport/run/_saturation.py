"""The saturation watch (`load.stop_when_saturated`): an open loop's level stopped within seconds
once the server plainly cannot serve the offered rate, instead of queueing for the rest of its
window and reporting latencies that measure only the queue.

It sits between the runner and the progress sink (it sees every recorded row and the requests in
flight as they change) and, at most every `CHECK_EVERY_NS`, judges what the measured window has
recorded so far by two signs a server that keeps up does not show together:

- **the pace**: successful completions against the schedule, read as `achieved_rate` reads it
  (`passport.audit._counts.pace_from` of a slope kept as running sums: the slope of completion
  time on intended time, with its 95 % interval), with the interval's upper end below
  `validity.min_achieved_rate_fraction`: the same judgment the finished run would FAIL on, so
  the stop never calls saturated what verify would not;
- **the backlog**: requests in flight rising, the slope of their count over time (since the
  first measured request was due) with its 95 % interval above zero.

guidellm's over-saturation detector (0.4) watches concurrency and TTFT slopes after 30 s; this
one asks the completions' pace instead of TTFT (a server that batches everything it is sent slows
every token, not the first one) and needs no minimum duration beyond `MIN_COMPLETED` successful
measured requests and `MIN_WINDOW_NS` of the window. Both signs must hold at `CONFIRMATIONS`
checks in a row. The TTFT trend is said as evidence. The run then stops as a Ctrl-C stops it:
what is in flight is recorded as interrupted, and the reason, which starts with
`passport.audit.SATURATED_PREFIX`, makes the verdict SATURATED.

Limits: each worker process watches its own share of the load (the server's saturation shows in
every share); a closed loop cannot over-saturate (its users wait for their answers), so the spec
refuses the flag there.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable, Mapping

import numpy as np

from harness import ProgressSink
from passport.audit import SATURATED_PREFIX, SUCCESS_OUTCOMES
from passport.audit._counts import pace_from
from passport.audit._trend import RunningSlope, slope

__all__ = ["SaturationWatch", "CHECK_EVERY_NS", "MIN_COMPLETED", "MIN_WINDOW_NS", "CONFIRMATIONS"]

CHECK_EVERY_NS = 250_000_000
SAMPLE_EVERY_NS = 10_000_000  # requests in flight, sampled at most this often
MIN_COMPLETED = 30  # successful measured requests before the pace is judged
MIN_WINDOW_NS = 2_000_000_000  # of the measured window's schedule, since its first request was due
# Checks in a row (three seconds): a queue near capacity wanders up for a second or two and back
# (two slots at 94 % of their capacity: 8 of 30 simulated windows stopped on three checks, 1 on twelve)
CONFIRMATIONS = 12


class SaturationWatch:
    """A ProgressSink that passes every update on to `inner` and, when the server is saturated
    (see the module docstring), adds the reason to `reasons` and sets `stop` (the phase's stop
    path). `t0_ns`: the run clock's origin on `clock` (rows carry times relative to it)."""

    def __init__(self, inner: ProgressSink | None, reasons: list[str], stop: asyncio.Event, limit_fraction: float,
                 t0_ns: int, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self._inner, self._reasons, self._stop, self._limit, self._t0 = inner, reasons, stop, limit_fraction, t0_ns
        self._clock = clock
        # successful measured requests: end time on intended time, and TTFT on intended time (of
        # those with a first token), seconds on the run clock, kept as running sums
        self._pace, self._ttft = RunningSlope(), RunningSlope()
        self._measured = 0
        self._first_due_ns: int | None = None  # the first measured request's intended time, run clock
        self._flight_t, self._flight_n = array("d"), array("d")  # requests in flight, sampled
        self._next_sample_ns = 0
        self._next_check_ns = 0
        self._held = 0
        self.reason: str | None = None

    def update(self, done: int, in_flight: int, errors: int, row: Mapping[str, object]) -> None:
        if self._inner is not None:
            self._inner.update(done, in_flight, errors, row)
        if self.reason is not None:
            return
        now = self._clock() - self._t0
        if now >= self._next_sample_ns:  # at most a sample every SAMPLE_EVERY_NS: memory stays small
            self._next_sample_ns = now + SAMPLE_EVERY_NS
            self._flight_t.append(now / 1e9)
            self._flight_n.append(float(in_flight))
        if row.get("phase") == "measure":
            self._measure(row)
        if now >= self._next_check_ns:
            self._next_check_ns = now + CHECK_EVERY_NS
            self._check(now)

    def _measure(self, row: Mapping[str, object]) -> None:
        intended, end, sent, first = (row.get(k) for k in ("intended_ns", "end_ns", "sent_ns", "first_token_ns"))
        if not isinstance(intended, int):
            return
        self._measured += 1
        if self._first_due_ns is None or intended < self._first_due_ns:
            self._first_due_ns = intended
        if row.get("outcome") in SUCCESS_OUTCOMES and isinstance(end, int):
            self._pace.add(intended / 1e9, end / 1e9)
            if isinstance(sent, int) and isinstance(first, int):
                self._ttft.add(intended / 1e9, (first - sent) / 1e9)

    def _check(self, now_ns: int) -> None:
        """One look at the window so far; stops the phase on the CONFIRMATIONS-th saturated look."""
        evidence = self._evidence(now_ns)
        self._held = self._held + 1 if evidence is not None else 0
        if evidence is not None and self._held >= CONFIRMATIONS:
            self.reason = SATURATED_PREFIX + evidence
            self._reasons.append(self.reason)
            self._stop.set()

    def _evidence(self, now_ns: int) -> str | None:
        """What says the server is saturated now, or None while it does not (both signs, see the
        module docstring)."""
        first = self._first_due_ns
        if first is None or self._pace.n < MIN_COMPLETED or now_ns - first < MIN_WINDOW_NS:
            return None
        pace = pace_from(self._pace.slope(), self._measured)
        if pace is None or pace.high >= self._limit:
            return None
        t, n = np.array(self._flight_t), np.array(self._flight_n)
        since = t >= first / 1e9
        backlog = slope([t[since]], [n[since]])
        if backlog is None or backlog.low <= 0:
            return None
        elapsed_s = (now_ns - first) / 1e9
        flight = n[since]
        said = (f"{elapsed_s:.1f} s into the measured window, successful completions kept {pace.fraction:.2f} "
                f"[{pace.low:.2f}, {pace.high:.2f}] of the schedule's pace ({pace.succeeded} of {pace.measured} "
                f"measured requests; validity.min_achieved_rate_fraction {self._limit:g}) and requests in flight "
                f"rose from {int(flight[0])} to {int(flight[-1])} ({backlog.value:+.1f}/s "
                f"[{backlog.low:+.1f}, {backlog.high:+.1f}])")
        ttft = self._ttft.slope()
        if ttft is not None:
            said += f"; TTFT rose {ttft.value:+.3f} s per second of schedule [{ttft.low:+.3f}, {ttft.high:+.3f}]"
        return said
