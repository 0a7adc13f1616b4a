"""The transport role (MLPerf LoadGen's system under test, httpx's transport): one prepared
request in, its `Exchange` out. The runner and the pool builder see only this protocol;
`HttpClient` meets it on the wire, `FakeTransport` in memory for unit tests."""

from __future__ import annotations

from typing import Protocol

from harness._http import Endpoint, Exchange

__all__ = ["Transport"]


class Transport(Protocol):
    """What a runner needs of a client. `exchange` never raises for I/O: failures, timeouts and
    interruptions are recorded on the returned Exchange (`error`, `timeout_kind`,
    `interrupted`)."""

    endpoint: Endpoint

    @property
    def in_flight(self) -> int:
        """Exchanges sent and not yet finished."""

    async def start(self) -> None:
        """Start whatever runs beside the exchanges (HttpClient: its timeout watchdog)."""

    async def preconnect(self, n: int) -> None:
        """Open up to `n` connections ahead of time."""

    async def aclose(self) -> None:
        """Fail whatever is in flight and release every connection."""

    def request_bytes(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        """The whole request for `path` (relative to the endpoint's base path) with `body` of
        `content_type`."""

    async def exchange(self, request: bytes, send_at_ns: int | None = None) -> Exchange:
        """Send one prepared request (at `send_at_ns`, perf_counter_ns, when given) and wait for
        its full response."""
