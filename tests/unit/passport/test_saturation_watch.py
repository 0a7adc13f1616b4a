"""The saturation watch fed event by event from simulated open loops whose truth is known: servers
that keep up (A/A: the right answer is never to stop), one near its capacity, and one that cannot
serve the offered rate (it must stop within seconds, with the evidence)."""

from __future__ import annotations

import asyncio
import heapq

import numpy as np

from passport.audit import SATURATED_PREFIX
from passport.run._saturation import SaturationWatch


class _Clock:
    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        return self.now_ns


def _feed(seed: int, rate_per_s: float, duration_s: float, *, latency_s: tuple[float, float] | None = None,
          slots: int = 0, service_s: float = 0.0) -> tuple[SaturationWatch, float | None]:
    """An open Poisson loop fed to a watch: each send (an empty row, in flight up by one) and
    each end (the request's row) at its own time. The server either answers every request
    after a latency drawn from a gamma (mean, sd) with no limit on how many it serves at once,
    or serves `slots` at a time for `service_s` each, queueing the rest. Returns the watch and
    when it stopped (seconds into the window), or None."""
    rng = np.random.default_rng(seed)
    intended = np.cumsum(rng.exponential(1 / rate_per_s, int(rate_per_s * duration_s * 1.5)))
    intended = intended[intended < duration_s]
    if latency_s is not None:
        mean, sd = latency_s
        shape = (mean / sd) ** 2
        end = intended + rng.gamma(shape, mean / shape, len(intended))
    else:
        free = [0.0] * slots
        end = np.empty(len(intended))
        for i, t in enumerate(intended):
            start = max(t, heapq.heappop(free))
            end[i] = start + service_s
            heapq.heappush(free, end[i])
    clock, reasons, stop = _Clock(), [], asyncio.Event()
    watch = SaturationWatch(None, reasons, stop, 0.9, 0, clock)
    events = sorted([(t, 1, i) for i, t in enumerate(intended)] + [(t, 0, i) for i, t in enumerate(end)])
    in_flight = done = 0
    for t, is_send, i in events:
        clock.now_ns = int(t * 1e9)
        if is_send:
            in_flight += 1
            watch.update(done, in_flight, 0, {})
        else:
            in_flight -= 1
            done += 1
            row = {"phase": "measure", "intended_ns": int(intended[i] * 1e9), "sent_ns": int(intended[i] * 1e9),
                   "first_token_ns": int((intended[i] + (end[i] - intended[i]) / 3) * 1e9),
                   "end_ns": int(end[i] * 1e9), "outcome": "ok"}
            watch.update(done, in_flight, 0, row)
        if stop.is_set():
            assert reasons == [watch.reason]
            return watch, t
    return watch, None


def test_servers_that_keep_up_are_never_stopped_a_a() -> None:
    stopped = [seed for seed in range(60)
               if _feed(seed, 40.0, 15.0, latency_s=(0.4, 0.15))[1] is not None]
    assert stopped == []
    # short answers at a high rate, and long answers with a wide spread
    assert all(_feed(seed, 200.0, 5.0, latency_s=(0.05, 0.03))[1] is None for seed in range(20))
    assert all(_feed(seed, 5.0, 30.0, latency_s=(3.0, 2.0))[1] is None for seed in range(20))


def test_a_server_near_its_capacity_that_keeps_up_is_not_stopped() -> None:
    # two slots of 150 ms serve 13.3/s; offered 11/s (83 %): queues come and go, but do not grow
    stopped = [seed for seed in range(30)
               if _feed(seed, 11.0, 30.0, slots=2, service_s=0.150)[1] is not None]
    assert stopped == []


def test_a_server_that_cannot_serve_the_rate_is_stopped_within_seconds_with_the_evidence() -> None:
    for seed in range(10):
        watch, at = _feed(seed, 25.0, 60.0, slots=2, service_s=0.150)  # 13.3/s served of 25/s offered
        assert at is not None and at < 8.0, (seed, at)  # of a 60 s window: the rest is never sent
        assert watch.reason is not None and watch.reason.startswith(SATURATED_PREFIX)
        assert "of the schedule's pace" in watch.reason and "requests in flight rose" in watch.reason
        assert "TTFT rose" in watch.reason
