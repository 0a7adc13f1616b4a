"""Requests sent beside the timed load, at chosen completion counts: canary cases and accuracy
items under load.

A sampler wraps the run's progress sink (it counts completions and requests in flight as they
are reported, then passes each report on), and its `run` task, beside the sending, sends its
next request once the timed phase has completed as many requests as the next position says.
It sends on a connection of its own, so its requests never take a slot of the declared load;
the load's figures stay those of the load as declared.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator, Mapping

from harness import HttpClient, ProgressSink

__all__ = ["LoadSampler", "every_nth", "seeded_positions"]

_POLL_S = 0.02


def every_nth(share: float) -> Iterator[int]:
    """Completion counts 1/share, 2/share, ... (rounded; at least every completion)."""
    every = max(1, round(1.0 / share))
    return itertools.count(every, every)


def seeded_positions(share: float, total: int | None, seed: int) -> Iterator[int]:
    """round(share x total) completion counts drawn without replacement from 1..total (seeded),
    in order; without a known total (a window of time), one in each stretch of 1/share
    completions at a seeded place in it."""
    rng = random.Random(f"accuracy-positions:{seed}")
    every = max(1, round(1.0 / share))
    if total is not None and total > 0:
        k = min(total, max(1, round(share * total)))
        return iter(sorted(rng.sample(range(1, total + 1), k)))
    return (start + rng.randrange(every) for start in itertools.count(1, every))


class LoadSampler:
    """The common part: counting, waiting for positions, the connection. A subclass's `send`
    sends the k-th request (k from 0) and `settle` waits for what is still in flight."""

    def __init__(self, client: HttpClient, inner: ProgressSink | None, positions: Iterator[int]) -> None:
        self.client, self.inner, self.positions = client, inner, positions
        self.done = 0
        self.in_flight = 0

    def update(self, done: int, in_flight: int, errors: int, row: Mapping[str, object]) -> None:
        self.done, self.in_flight = done, in_flight
        if self.inner is not None:
            self.inner.update(done, in_flight, errors, row)

    async def send(self, k: int) -> None:
        raise NotImplementedError

    async def settle(self) -> None:
        return None

    async def run(self, stop: asyncio.Event) -> None:
        """Send at each position until `stop` is set (then let what is in flight finish)."""
        await self.client.start()
        try:
            for k, at in enumerate(self.positions):
                while self.done < at and not stop.is_set():
                    await asyncio.sleep(_POLL_S)
                if stop.is_set():
                    break
                await self.send(k)
            await self.settle()
        finally:
            await self.client.aclose()
