"""An in-memory transport for unit tests: each request is answered from a script, on the event
loop's clock, without sockets (as httpx's MockTransport serves its tests).

`FakeTransport(answer)` calls `answer(body, attempt)` for each request (`body`: the JSON body
sent, `attempt`: 0, 1, ... in send order) and plays the `FakeAnswer` back: the status, then each
event `offset_s` after the send, fed to the exchange's SSE parser as a real connection would,
then the end. An answer may instead fail (`error`, with `timeout_kind` for a timeout) after
`fail_after_s`. Cancelling an exchange (the run stopping) marks it interrupted, as HttpClient
does. What was sent is kept in `sent`, in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from harness._http import Endpoint, Exchange

__all__ = ["FakeAnswer", "FakeTransport", "sse_events"]

_now = time.perf_counter_ns


def sse_events(payloads: list[bytes | str], gap_s: float, first_s: float = 0.0) -> tuple[tuple[float, bytes], ...]:
    """`data:` events at `first_s`, then every `gap_s` seconds, ending with `data: [DONE]`."""
    texts = [p if isinstance(p, bytes) else p.encode() for p in payloads] + [b"[DONE]"]
    return tuple((first_s + i * gap_s, b"data: " + t + b"\n\n") for i, t in enumerate(texts))


@dataclass(frozen=True)
class FakeAnswer:
    """One scripted response: `status`, SSE `events` as (seconds after the send, bytes), or a
    failure (`error`, `timeout_kind`) `fail_after_s` after the send; `body` for a non-200."""

    status: int = 200
    events: tuple[tuple[float, bytes], ...] = ()
    body: bytes = b""
    retry_after: str | None = None
    error: str | None = None
    timeout_kind: str | None = None
    fail_after_s: float = 0.0
    new_connection: bool = False
    connect_s: float = 0.0


@dataclass
class FakeTransport:
    """A `Transport` answering from `answer(body, attempt)`; see the module docstring."""

    answer: Callable[[dict[str, object], int], FakeAnswer]
    endpoint: Endpoint = field(default_factory=lambda: Endpoint("http", "fake", 80, "/v1"))
    sent: list[dict[str, object]] = field(default_factory=list)
    started: bool = False
    closed: bool = False
    _in_flight: int = 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def start(self) -> None:
        self.started = True

    async def preconnect(self, n: int) -> None:
        return None

    async def aclose(self) -> None:
        self.closed = True

    def request_bytes(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        return f"POST {self.endpoint.base_path}{path}\n".encode() + body

    async def exchange(self, request: bytes, send_at_ns: int | None = None) -> Exchange:
        body = orjson.loads(request.split(b"\n", 1)[1])
        attempt = len(self.sent)
        self.sent.append(body)
        script = self.answer(body, attempt)
        ex = Exchange()
        ex.done = asyncio.get_running_loop().create_future()
        ex.new_connection = script.new_connection
        ex.connect_ns = int(script.connect_s * 1e9)
        self._in_flight += 1
        try:
            await asyncio.sleep(script.connect_s)
            if send_at_ns is not None:
                await self._wait_until(send_at_ns, 0.0)  # a loop timer: the fake keeps no finer time
            ex.sent_ns = _now()
            await self._play(ex, script)
        except asyncio.CancelledError:
            ex.interrupted = True
            ex.fail("run interrupted")
        finally:
            self._in_flight -= 1
        return ex

    async def _play(self, ex: Exchange, script: FakeAnswer) -> None:
        if script.error is not None:
            await self._wait_until(ex.sent_ns, script.fail_after_s)
            ex.fail(script.error, script.timeout_kind)
            return
        ex.status = script.status
        ex.retry_after = script.retry_after
        if script.status != 200:
            ex.first_byte_ns = ex.last_byte_ns = _now()
            ex.error_body += script.body
        for offset_s, data in script.events:
            await self._wait_until(ex.sent_ns, offset_s)
            t_ns = _now()
            ex.first_byte_ns = ex.first_byte_ns or t_ns
            ex.last_byte_ns = t_ns
            ex.sse.feed(data, t_ns)
        ex.end_ns = _now()
        assert ex.done is not None
        ex.done.set_result(None)

    @staticmethod
    async def _wait_until(start_ns: int, offset_s: float) -> None:
        delay_s = (start_ns + offset_s * 1e9 - _now()) / 1e9
        if delay_s > 0:
            await asyncio.sleep(delay_s)
