"""A minimal HTTP/1.1 streaming client for the timed path.

An asyncio `Protocol` per connection, responses parsed by `httptools` (llhttp), keep-alive
connections pooled and reused, TLS through asyncio's `ssl`. `data_received` takes the receive
timestamp (`time.perf_counter_ns`, CLOCK_MONOTONIC on Linux) before any parsing; a 200
response's body goes straight into an `SSEParser`; any other body is kept (up to 4 KiB) for the
error record.

Timeouts are enforced by one watchdog task per client that scans the in-flight exchanges when
the earliest deadline among them is due, or a shortest timeout after the last scan, whichever is
sooner (no deadline set since can fall before that: a new exchange's, or one whose first byte
came since, is at least a shortest timeout away), and wakes every `tick_s` (default 100 ms) to
take the pacer's reports: the per-chunk cost stays one attribute store rather than a timer
re-arm, a deadline of any size is honoured to within a tick and the event loop's own lag (a 50 ms
total limit cuts a 100 ms stream at about 50 ms), and an idle stream costs nothing between scans
(a scan every tick held 10,000 streams at a tenth of a core).

Measured on this project's 2-core machines (docs/concepts/design.md, Transport): a bare Protocol with uvloop
adds ~0.4 ms p99 at 25.6k chunks/s where aiohttp adds 4-7 ms; that is why this exists.
It is not a general HTTP client: one request at a time per connection, no redirects, no
compression, no proxies, no HTTP/2.
"""

from __future__ import annotations

import asyncio
import os
import select
import ssl
import time
from array import array
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

from harness._errors import EndpointError
from harness._loadspec import Limits, Timeouts
from harness._pacer import PacedSend, Pacer
from harness._sse import SSEParser

__all__ = ["Exchange", "HttpClient", "Timeouts", "Endpoint", "Limits", "header_lines", "with_headers",
           "without_headers"]

_ERROR_BODY_LIMIT_BYTES = 4096
_PARTIAL_EVENT_KEPT_BYTES = 64 << 10  # of an event cut off at a limit
_NEVER_NS = 1 << 62  # a scan time no clock reaches: no timeout is set
_now = time.perf_counter_ns


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: scheme, host, port and the path prefix (e.g. `/v1`)."""

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, base_url: str) -> Endpoint:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointError(
                f"endpoint.base_url must look like http://HOST:PORT/v1 (got {base_url!r})"
            )
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"


class Exchange:
    """One request and its response as seen on the wire; times are perf_counter_ns.

    Filled by the connection; read after `done` is set. `timeout_kind` is one of connect,
    first_byte, stall, total; `error` says why a response is incomplete.
    """

    __slots__ = (
        "sent_ns", "first_byte_ns", "last_byte_ns", "end_ns", "status", "retry_after",
        "content_type", "sse", "error_body", "error", "timeout_kind", "connect_ns",
        "new_connection", "interrupted", "resent", "withdrawn", "done", "_conn",
    )

    def __init__(self) -> None:
        self.sent_ns = 0
        self.first_byte_ns = 0
        self.last_byte_ns = 0
        self.end_ns = 0
        self.status = 0
        self.retry_after: str | None = None
        self.content_type: str | None = None
        self.sse = SSEParser()
        self.error_body = bytearray()
        self.error: str | None = None
        self.timeout_kind: str | None = None
        self.connect_ns = 0
        self.new_connection = False
        self.interrupted = False
        self.resent = False
        self.withdrawn = False  # armed for a paced send and taken back before it went: never sent
        self.done: asyncio.Future[None] | None = None
        self._conn: _Connection | None = None

    def fail(self, error: str, timeout_kind: str | None = None) -> None:
        """Mark the exchange failed (first failure wins) and wake its waiter."""
        if self.done is None or self.done.done():
            return
        self.error = error
        self.timeout_kind = timeout_kind
        self.end_ns = _now()
        self.done.set_result(None)
        if self._conn is not None:
            self._conn.abort()


class _Connection(asyncio.Protocol):
    __slots__ = ("_pool", "_parser", "_transport", "exchange", "closed", "_t_ns", "_headers_done",
                 "_chunked_or_length", "_sink", "_ok", "_read_ends", "_read_times", "_limits", "_head_bytes",
                 "_event_start", "_events", "_fd", "_whole")

    def __init__(self, pool: HttpClient) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self._t_ns = 0
        self._headers_done = False
        self._chunked_or_length = False
        self._limits = pool.limits
        self._head_bytes = 0
        self._event_start = 0  # sink offset after the last event boundary seen
        self._events = 0
        self._sink = bytearray()  # where on_body appends: the SSE buffer of a 200 response
        self._ok = False
        self._whole = False  # a 200 answer in one JSON body (embeddings, rerank): no event limits
        self._read_ends: array[int] = array("q")
        self._read_times: array[int] = array("q")
        self._fd = -1  # the socket, for the pacer's own writes (-1 for TLS: only its transport writes)

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._fd = sock.fileno()

    def data_received(self, data: bytes) -> None:
        t_ns = _now()
        ex = self.exchange
        if ex is None:  # bytes with no request outstanding: the stream is out of sync
            self.abort()
            return
        if not ex.first_byte_ns:
            ex.first_byte_ns = t_ns
        ex.last_byte_ns = t_ns
        self._t_ns = t_ns
        heading = not self._headers_done
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            ex.fail(f"malformed HTTP response: {exc}")
            return
        if heading and not self._headers_done:  # the parser buffers an unfinished header block
            self._head_bytes += len(data)
            if self._head_bytes > self._limits.header_bytes:
                ex.fail(f"the response headers exceeded {self._limits.header_bytes} bytes")
                return
        if self._ok:  # the SSE parser's per-read record, appended without a Python call
            self._read_times.append(t_ns)
            self._read_ends.append(len(self._sink))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        if ex is None or ex.done is None or ex.done.done():
            return
        if self._headers_done and not self._chunked_or_length and ex.status == 200:
            # A close-delimited body (no Content-Length, not chunked) ends at EOF.
            self._finish(ex, _now())
            return
        events = len(ex.sse)
        where = f"after {events} events" if self._headers_done else "before the response headers"
        reason = f": {exc}" if exc else ""
        ex.fail(f"server closed the connection {where}{reason}")

    # -- httptools callbacks ----------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        ex = self.exchange
        assert ex is not None
        if lowered == b"retry-after":
            ex.retry_after = value.decode("latin-1")
        elif lowered == b"content-type":
            ex.content_type = value.decode("latin-1")
        elif lowered in (b"content-length", b"transfer-encoding"):
            self._chunked_or_length = True

    def on_headers_complete(self) -> None:
        ex = self.exchange
        assert ex is not None
        self._headers_done = True
        ex.status = self._parser.get_status_code()
        self._ok = ex.status == 200
        self._whole = self._ok and ex.content_type is not None and "json" in ex.content_type.lower()
        if self._ok:
            self._sink, self._read_ends, self._read_times = ex.sse.receive_buffers()
        else:
            self._sink = ex.error_body

    def on_body(self, body: bytes) -> None:
        # Once per SSE event: one append and the limits. Read times are noted once per read, in
        # data_received.
        if self._ok:
            sink = self._sink
            sink += body
            size = len(sink)
            limits = self._limits
            cut = body.rfind(b"\n\n")
            if cut >= 0:
                self._event_start = size - len(body) + cut + 2
                self._events += body.count(b"\n\n")
            elif (crlf := body.rfind(b"\r\n\r\n")) >= 0:
                self._event_start = size - len(body) + crlf + 4
                self._events += body.count(b"\r\n\r\n")
            if size > limits.bytes_per_response:
                self._cut_off(f"the response exceeded {limits.bytes_per_response} bytes")
            elif size - self._event_start > limits.bytes_per_event and not self._whole:
                self._cut_off(f"an event exceeded {limits.bytes_per_event} bytes")
            elif self._events > limits.events_per_response and not self._whole:
                self._cut_off(f"the response exceeded {limits.events_per_response} events")
        elif len(self._sink) < _ERROR_BODY_LIMIT_BYTES:
            self._sink += body[: _ERROR_BODY_LIMIT_BYTES - len(self._sink)]

    def on_message_complete(self) -> None:
        ex = self.exchange
        assert ex is not None
        self._finish(ex, self._t_ns)

    # -- helpers ----------------------------------------------------------------------------
    def _cut_off(self, reason: str) -> None:
        """End the exchange at a limit: what was received is kept, the connection dropped."""
        ex = self.exchange
        if ex is not None:
            if self._ok:  # the read that crossed the limit, so its events are timed
                # the unfinished event past the limit is kept only as a head, for the record
                del self._sink[self._event_start + _PARTIAL_EVENT_KEPT_BYTES:]
                self._read_times.append(self._t_ns)
                self._read_ends.append(len(self._sink))
            self._ok = False
            self._sink = bytearray()  # the rest of this read is dropped, not appended past the last read
            ex.fail(reason)

    def _finish(self, ex: Exchange, t_ns: int) -> None:
        ex.end_ns = t_ns
        keep = self._parser.should_keep_alive() and not self.closed
        if self._ok:  # the read that completed the message (data_received sees _ok reset)
            self._read_times.append(t_ns)
            self._read_ends.append(len(self._sink))
        self.exchange = None
        ex._conn = None
        self._headers_done = False
        self._chunked_or_length = False
        self._ok = self._whole = False
        self._head_bytes = self._event_start = self._events = 0
        assert ex.done is not None
        if not ex.done.done():
            ex.done.set_result(None)
        if keep:
            self._pool._release(self)
        else:
            self.abort()

    def send(self, ex: Exchange, request: bytes) -> None:
        assert self._transport is not None
        self.exchange = ex
        ex._conn = self
        ex.sent_ns = _now()
        self._transport.write(request)

    def arm(self, ex: Exchange, request: bytes, deadline_ns: int) -> PacedSend:
        """Make this connection wait for `ex`'s answer now, its request written by the pacer at
        `deadline_ns` (on a duplicate of the socket's descriptor, which the send owns)."""
        self.exchange = ex
        ex._conn = self

        def stamp(t_ns: int) -> None:
            ex.sent_ns = t_ns

        return PacedSend(deadline_ns, request, os.dup(self._fd) if self._fd >= 0 else -1, stamp, self._write)

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self.closed:
            self._transport.write(data)

    def abort(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.abort()

    def looks_dead(self) -> bool:
        """True if this idle connection cannot be reused: closed, or its socket is readable
        (an idle keep-alive socket only becomes readable at EOF), as curl checks before reuse."""
        if self.closed or self._transport is None or self._transport.is_closing():
            return True
        sock = self._transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)


def header_lines(headers: Mapping[str, str]) -> bytes:
    """`headers` as the lines of an HTTP/1.1 head, each ending CRLF."""
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")


def without_headers(request: bytes, headers: Mapping[str, str]) -> bytes:
    """`request` (as `HttpClient.request_bytes` made it) with these header lines taken out of its
    head: a request that travels to another host without the credentials it carried here.
    ValueError if one of them is not there as one whole line."""
    end = request.index(b"\r\n\r\n") + 2
    head = request[:end]
    for k, v in headers.items():
        line = b"\r\n" + header_lines({k: v})
        if line not in head:
            raise ValueError(f"the request has no {k} header line to take out")
        head = head.replace(line, b"\r\n", 1)
    return head + request[end:]


def with_headers(request: bytes, headers: Mapping[str, str]) -> bytes:
    """`request` with these header lines put in right after its request line (a host's own
    credentials on a request that came without them; where a header goes in the head does not matter)."""
    cut = request.index(b"\r\n") + 2
    return request[:cut] + header_lines(headers) + request[cut:]


class HttpClient:
    """Keep-alive connections to one endpoint, one streamed exchange per connection at a time.

    **Parameters:** `endpoint`; `timeouts`; `max_idle` (idle connections kept, sized to the
    declared concurrency); `tick_s` (watchdog period); `extra_headers` (sent on every request,
    e.g. Authorization; held in memory only); `ca_file` (PEM bundle of CAs to trust for https,
    on top of none: None means the system's); `limits` (how much one response may send).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        timeouts: Timeouts,
        max_idle: int,
        tick_s: float = 0.1,
        extra_headers: dict[str, str] | None = None,
        ca_file: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.pacer = Pacer()  # started on the first paced send
        self.endpoint = endpoint
        self.timeouts = timeouts
        self.limits = limits or Limits()
        self._max_idle = max(1, max_idle)
        self._tick_s = tick_s
        self._idle: deque[_Connection] = deque()
        # Set once a reused connection dies before any response byte: the server closes
        # connections it advertised as keep-alive (llama-server does after each stream), so
        # every later request gets a fresh connection rather than racing the close.
        self.reuse_disabled = False
        self._in_flight: set[Exchange] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._ssl: ssl.SSLContext | None = (
            ssl.create_default_context(cafile=ca_file) if endpoint.scheme == "https" else None
        )
        headers = {
            "Host": endpoint.host_header,
            "Accept": "text/event-stream",
            "User-Agent": "passport",
        }
        headers.update(extra_headers or {})
        self._header_block = header_lines(headers)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def start(self) -> None:
        """Start the timeout watchdog."""
        if self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def preconnect(self, n: int) -> None:
        """Open up to `n` idle connections ahead of time (a connect costs ~43 us of CPU)."""
        n = min(n, self._max_idle) - len(self._idle)
        if n <= 0:
            return
        conns = await asyncio.gather(*(self._connect() for _ in range(n)))
        self._idle.extend(conns)

    async def aclose(self) -> None:
        if self.pacer.running:
            self.pacer.stop()  # nothing armed is written once its connection may be closed
        if self._watchdog is not None:
            self._watchdog.cancel()
            try:
                await self._watchdog
            except asyncio.CancelledError:
                pass
            self._watchdog = None
        for ex in list(self._in_flight):
            ex.fail("client closed before the response completed")
        while self._idle:
            self._idle.popleft().abort()

    def _release(self, conn: _Connection) -> None:
        if not self.reuse_disabled and len(self._idle) < self._max_idle and not conn.closed:
            self._idle.append(conn)
        else:
            conn.abort()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        ep = self.endpoint
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: _Connection(self),
                ep.host,
                ep.port,
                ssl=self._ssl,
                server_hostname=ep.host if self._ssl else None,
            ),
            self.timeouts.connect_s,
        )
        return conn

    def request_bytes(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        """The full HTTP/1.1 POST for `path` (relative to the base path) with `body`."""
        return (
            f"POST {self.endpoint.base_path}{path} HTTP/1.1\r\n".encode("latin-1")
            + self._header_block
            + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode("latin-1")
            + body
        )

    async def exchange(self, request: bytes, send_at_ns: int | None = None) -> Exchange:
        """Send one prepared request and wait for its full response; never raises for I/O.

        `send_at_ns` (perf_counter_ns): the request is armed now and written by the pacer thread
        at that time (`harness._pacer`), whatever the loop is doing then; None sends at once.

        Connection failures and timeouts are recorded on the returned Exchange. A request sent
        on a reused keep-alive connection that the server closed without sending a single byte
        never reached a handler (the server was closing it: llama-server does after every
        stream, sometimes faster than the check before reuse can see); it is sent once more on
        a fresh connection, `resent` is set, and connections are no longer reused.
        """
        ex = await self._attempt(request, not self.reuse_disabled, send_at_ns)
        if (not ex.new_connection and not ex.first_byte_ns and ex.error is not None and not ex.interrupted
                and ex.timeout_kind is None):
            self.reuse_disabled = True
            while self._idle:
                self._idle.popleft().abort()
            # a paced request whose connection died before its deadline keeps its deadline
            ex = await self._attempt(request, False, send_at_ns if send_at_ns is not None and send_at_ns > _now()
                                     else None)
            ex.resent = True
        return ex

    async def _attempt(self, request: bytes, reuse: bool, send_at_ns: int | None = None) -> Exchange:
        ex = Exchange()
        loop = asyncio.get_running_loop()
        ex.done = loop.create_future()
        conn: _Connection | None = None
        while reuse and self._idle:
            candidate = self._idle.pop()
            if candidate.looks_dead():
                candidate.abort()
            else:
                conn = candidate
                break
        if conn is None:
            t0 = _now()
            ex.new_connection = True
            try:
                conn = await self._connect()
            except TimeoutError:
                ex.connect_ns = _now() - t0
                ex.fail(f"connect timed out after {self.timeouts.connect_s} s", "connect")
                return ex
            except OSError as exc:
                ex.connect_ns = _now() - t0
                ex.fail(f"cannot connect to {self.endpoint.host}:{self.endpoint.port}: {exc}")
                return ex
            ex.connect_ns = _now() - t0
        self._in_flight.add(ex)
        paced: PacedSend | None = None
        try:
            if send_at_ns is None:
                conn.send(ex, request)
            else:
                paced = conn.arm(ex, request, send_at_ns)
                if not self.pacer.running:
                    self.pacer.start()
                self.pacer.submit(paced)
            await ex.done
            # failed before its deadline (the connection closed): never written; or written, and
            # its time read here when the answer came before the pacer thread could stamp it
            if paced is not None and not self.pacer.withdraw(paced) and not ex.sent_ns:
                ex.sent_ns = self.pacer.went_at(paced)
        except asyncio.CancelledError:
            # The run is stopping: abort the connection and return what was received, so the
            # request is still recorded (as interrupted) with its timings; one armed and not yet
            # written is withdrawn, and was never sent.
            ex.withdrawn = paced is not None and self.pacer.withdraw(paced)
            ex.interrupted = True
            ex.fail("run interrupted")
        finally:
            self._in_flight.discard(ex)
        return ex

    async def _watch(self) -> None:
        t = self.timeouts
        first_ns = None if t.first_byte_s is None else int(t.first_byte_s * 1e9)
        stall_ns = None if t.stall_s is None else int(t.stall_s * 1e9)
        total_ns = None if t.total_s is None else int(t.total_s * 1e9)
        limits = [n for n in (first_ns, stall_ns, total_ns) if n is not None]
        shortest_ns = min(limits) if limits else _NEVER_NS
        tick_ns = int(self._tick_s * 1e9)
        scan_ns = 0
        while True:
            self.pacer.drain()  # paced sends reported since the last send: their exchanges stamped
            now = _now()
            if now < scan_ns:
                await asyncio.sleep(min(tick_ns, scan_ns - now) / 1e9 + 0.0002)
                continue
            earliest = now + shortest_ns
            for ex in list(self._in_flight):
                if not ex.sent_ns:
                    continue  # armed for the pacer, not yet written
                deadlines = []
                if total_ns is not None:
                    deadlines.append(ex.sent_ns + total_ns)
                if not ex.sse.received_bytes and not ex.error_body:
                    # Engines send the status line at once; progress is the first body byte.
                    if first_ns is not None:
                        deadlines.append(ex.sent_ns + first_ns)
                elif stall_ns is not None:
                    deadlines.append(ex.last_byte_ns + stall_ns)
                if not deadlines:
                    continue
                due = min(deadlines)
                if now < due:
                    earliest = min(earliest, due)
                elif total_ns is not None and now - ex.sent_ns >= total_ns:
                    ex.fail(f"no complete response within {t.total_s} s", "total")
                elif not ex.sse.received_bytes and not ex.error_body:
                    ex.fail(f"no response body within {t.first_byte_s} s", "first_byte")
                else:
                    ex.fail(f"stream stalled for more than {t.stall_s} s", "stall")
            scan_ns = earliest
            await asyncio.sleep(min(tick_ns, max(0, earliest - now)) / 1e9 + 0.0002)
