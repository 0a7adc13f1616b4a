"""Incremental Server-Sent Events parser for the timed path.

`SSEParser.feed(body_bytes, t_ns)` splits a response body into events as bytes arrive and
records, per event, the receive time of the read that completed it and its `data` payload.
Nothing is decoded or parsed here: payloads go into one bytearray with an offsets array, times
into an `array('q')`, so the per-chunk cost is a few slices and appends, with no per-event
Python objects beyond the payload slice (lists of per-chunk objects caused 17-54 ms GC pauses).

Handles: LF or CRLF line ends (also a CRLF split across reads), events split anywhere across
reads (inside a UTF-8 character too: bytes are never decoded here), multi-line `data:` (joined
with LF, as the SSE spec says), comment lines (`: keep-alive`) and events without data, which
are dropped, and an optional `event:` name (kept for the rare event that has one). A lone CR as
a line end (allowed by the spec, sent by no engine we know) is not supported.
"""

from __future__ import annotations

from array import array

__all__ = ["SSEParser"]


class SSEParser:
    """Split a byte stream into SSE events; see the module docstring."""

    __slots__ = ("_pending", "times_ns", "offsets", "payload", "event_names", "done")

    def __init__(self) -> None:
        self._pending = b""
        self.times_ns = array("q")
        # offsets[i]..offsets[i+1] delimit event i's data in payload; offsets[0] == 0.
        self.offsets = array("q", [0])
        self.payload = bytearray()
        self.event_names: dict[int, str] = {}
        self.done = False

    def __len__(self) -> int:
        return len(self.times_ns)

    def data(self, index: int) -> bytes:
        """The data payload of event `index`."""
        return bytes(self.payload[self.offsets[index] : self.offsets[index + 1]])

    def leftover(self) -> bytes:
        """Bytes received after the last complete event (non-empty means a cut-off event)."""
        return self._pending

    def feed(self, chunk: bytes, t_ns: int) -> None:
        """Consume body bytes received at `t_ns`; complete events are recorded at `t_ns`."""
        buf = self._pending + chunk if self._pending else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            block = buf[start:end]
            start = end + 2
            if block[:6] == b"data: " and b"\n" not in block:
                self._emit(block[6:], t_ns, None)
            elif block:
                self._parse_block(block, t_ns)
        self._pending = buf[start:]

    def _emit(self, data: bytes, t_ns: int, name: str | None) -> None:
        if data == b"[DONE]":
            self.done = True
        if name is not None:
            self.event_names[len(self.times_ns)] = name
        self.times_ns.append(t_ns)
        self.payload += data
        self.offsets.append(len(self.payload))

    def _parse_block(self, block: bytes, t_ns: int) -> None:
        data_lines: list[bytes] = []
        name: str | None = None
        for line in block.split(b"\n"):
            if not line or line[:1] == b":":
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data_lines.append(value)
            elif field == b"event":
                name = value.decode("utf-8", "replace")
        if data_lines:
            self._emit(b"\n".join(data_lines), t_ns, name)
