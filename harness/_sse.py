"""Server-Sent Events for the timed path: record on receive, split once at the end.

`SSEParser.feed(body_bytes, t_ns)` runs inside `data_received`, so it does only what a bare
timestamping reader does: append the bytes to one bytearray and note, per read, the receive
time and the offset where the read ended (two `array('q')` appends; lists of per-chunk objects
caused 17-54 ms GC pauses). Events are split when first asked for, after the stream ends, and
in the common case without a Python step per event: numpy finds the blank lines, one
`replace` turns the body into a JSON array for the decoder, and Arrow slices the payloads out
of the body without copying. Each event is timed at the read that delivered its last byte
(`numpy.searchsorted` over the read ends): exactly the time an incremental parser would give.

Handles: LF or CRLF line ends (a CRLF stream, which no engine we know sends, is replayed read
by read through an incremental splitter, so a CRLF split across reads is fine), events split
anywhere across reads (inside a UTF-8 character too: bytes are never decoded here), multi-line
`data:` (joined with LF, as the SSE spec says), comment lines (`: keep-alive`) and events
without data, which are dropped, and an optional `event:` name. A lone CR as a line end
(allowed by the spec, sent by no engine we know) is not supported.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["SSEParser", "EventBodies"]

_SMALL_BODY_BYTES = 4096  # up to this, events are found with bytes.find (a few calls), beyond with numpy


@dataclass(frozen=True)
class EventBodies:
    """The payloads of an answer whose every event is one `data: ` line, as slices of its body:
    event k is `body[ends[k-1] + 6 : ends[k] - 2]` (`ends[-1]` the body's length). Kept as is
    until a part is made, where all of a part's bodies become one binary column at once."""

    body: bytes
    ends: np.ndarray


class SSEParser:
    """Collect a streamed body; split it into SSE events on demand (see the module docstring).

    After splitting: `times_ns[i]` is event i's receive time, `payloads[i]` its data,
    `event_names` maps the few events that had an `event:` field to it, and `done`
    says whether `[DONE]` was seen.
    """

    __slots__ = ("_body", "_read_ends", "_read_times", "_split", "_frozen", "times_ns", "_payloads", "_ends",
                 "event_names", "_done", "_leftover", "_n")

    def __init__(self) -> None:
        self._body = bytearray()
        self._read_ends = array("q")
        self._read_times = array("q")
        self._split = False

    def feed(self, chunk: bytes, t_ns: int) -> None:
        """Consume body bytes received at `t_ns` (one read; repeated times extend that read)."""
        self._body += chunk
        if self._read_times and self._read_times[-1] == t_ns:
            self._read_ends[-1] = len(self._body)
        else:
            self._read_times.append(t_ns)
            self._read_ends.append(len(self._body))
        self._split = False

    def receive_buffers(self) -> tuple[bytearray, array[int], array[int]]:
        """(body, read ends, read times): what the transport appends to directly, per chunk and
        per read (each read's time is distinct, so it appends one entry to each array)."""
        self._split = False
        return self._body, self._read_ends, self._read_times

    def _ensure_split(self) -> None:
        if self._split:
            return
        self._split = True
        self.event_names: dict[int, str] = {}
        body = self._frozen = bytes(self._body)
        self._ends: np.ndarray | None
        self._payloads: list[bytes] | None
        single = _single_line_event_ends(body)
        if single is not None:
            ends = single  # the common case: no per-event Python work at all
            self._ends = ends
            self._payloads = None
            self._leftover = b""
            n = self._n = len(ends)
            self._done = n > 0 and body.endswith(b"data: [DONE]\n\n")
        else:
            if b"\r" in body:
                payloads, ends_list, names, leftover = _split_incremental(body, self._read_ends)
            else:
                payloads, ends_list, names, leftover = _split_lf(body)
            self._ends = None
            self._payloads = payloads
            self.event_names = names
            self._leftover = leftover
            self._done = b"[DONE]" in payloads[-2:]
            self._n = len(payloads)
            ends = np.array(ends_list, dtype=np.int64)
        if len(self._read_times) == 1:  # one read held the whole answer (most short ones)
            self.times_ns = np.full(len(ends), self._read_times[0], dtype=np.int64)
        elif len(ends):
            idx = np.searchsorted(np.frombuffer(self._read_ends, dtype=np.int64), ends, side="left")
            self.times_ns = np.frombuffer(self._read_times, dtype=np.int64)[idx]
        else:
            self.times_ns = np.zeros(0, dtype=np.int64)

    @property
    def done(self) -> bool:
        """Whether the stream carried the `[DONE]` sentinel."""
        self._ensure_split()
        return self._done

    @property
    def payloads(self) -> list[bytes]:
        """Each event's data payload."""
        self._ensure_split()
        if self._payloads is None:
            assert self._ends is not None
            starts = np.concatenate(([0], self._ends[:-1])) + 6
            body = self._frozen
            self._payloads = [body[a:b] for a, b in zip(starts.tolist(), (self._ends - 2).tolist())]
        return self._payloads

    def json_array(self) -> bytes | None:
        """All payloads as one JSON array, `[DONE]` written as the string "[DONE]"; None when the
        stream is not the common single-line shape (then use `payloads`)."""
        self._ensure_split()
        if self._ends is None or not len(self._ends):
            return None
        joined = self._frozen[6:-2].replace(b"\n\ndata: ", b",")
        if joined.endswith(b",[DONE]") or joined == b"[DONE]":
            joined = joined[:-6] + b'"[DONE]"'
        return b"[" + joined + b"]"

    def data_piece(self, scrub: Callable[[bytes], bytes] | None = None) -> EventBodies | list[bytes]:
        """The payloads for a recorder's column (`harness._recorder.piece_array`): the body and
        its event ends when every event is one line (no copy now), else each payload; with
        `scrub`, each payload passed through it (one Python step per event: the caller applies
        it only to a stream that may hold a secret)."""
        self._ensure_split()
        if scrub is not None:
            return [scrub(p) for p in self.payloads]
        if self._ends is None:
            return self.payloads
        return EventBodies(self._frozen, self._ends)

    def __len__(self) -> int:
        if not self._split:
            self._ensure_split()
        return self._n

    def data(self, index: int) -> bytes:
        """The data payload of event `index`."""
        return self.payloads[index]

    def body(self) -> bytes:
        """The whole body as received."""
        self._ensure_split()
        return self._frozen

    def leftover(self) -> bytes:
        """Bytes after the last complete event (non-empty means a cut-off event)."""
        self._ensure_split()
        return self._leftover

    @property
    def received_bytes(self) -> int:
        return len(self._body)


def _small_single_line_event_ends(body: bytes) -> list[int] | None:
    """`_single_line_event_ends` for a short body, with `bytes.find` (no numpy call)."""
    if body[:6] != b"data: " or body[-2:] != b"\n\n":
        return None
    ends = []
    find = body.find
    at = find(b"\n\n")
    while at >= 0:
        ends.append(at + 2)
        at = find(b"\n\n", at + 2)
    n = len(ends)
    if body.count(b"\n\ndata: ") != n - 1 or body.count(b"\n") != 2 * n:
        return None
    return ends


def _single_line_event_ends(body: bytes) -> np.ndarray | None:
    """End offsets of the events when every event is exactly one `data: ` line and nothing is
    left over, else None. Checked in C: the body starts with `data: ` and ends with a blank
    line, every separator is followed by `data: `, and the only newlines are the separators'.
    A short body's events are found with `bytes.find` (a few calls beat numpy's)."""
    if len(body) <= _SMALL_BODY_BYTES:
        small = _small_single_line_event_ends(body)
        return None if small is None else np.array(small, dtype=np.int64)
    n = body.count(b"\n\n")
    if not n or body[:6] != b"data: " or body[-2:] != b"\n\n":
        return None
    if body.count(b"\n\ndata: ") != n - 1 or body.count(b"\n") != 2 * n:
        return None
    nl = np.frombuffer(body, dtype=np.uint8) == 10
    return np.flatnonzero(nl[:-1] & nl[1:]) + 2


def _parse_block(block: bytes) -> tuple[bytes | None, str | None]:
    """(data, event name) of one event block; data None when it has no data lines."""
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
    return (b"\n".join(data_lines) if data_lines else None), name


def _split_lf(body: bytes) -> tuple[list[bytes], list[int], dict[int, str], bytes]:
    blocks = body.split(b"\n\n")
    leftover = blocks.pop()
    payloads: list[bytes] = []
    ends: list[int] = []
    names: dict[int, str] = {}
    position = 0
    for block in blocks:
        position += len(block) + 2
        if block[:6] == b"data: " and b"\n" not in block:
            payloads.append(block[6:])
            ends.append(position)
        elif block:
            data, name = _parse_block(block)
            if data is not None:
                if name is not None:
                    names[len(payloads)] = name
                payloads.append(data)
                ends.append(position)
    return payloads, ends, names, leftover


def _split_incremental(body: bytes, read_ends: array[int]) -> tuple[list[bytes], list[int], dict[int, str], bytes]:
    """Replay the reads through a CRLF-tolerant splitter; `ends` are in original offsets."""
    payloads: list[bytes] = []
    ends: list[int] = []
    names: dict[int, str] = {}
    pending = b""
    start_of_read = 0
    for end_of_read in read_ends:
        buf = (pending + body[start_of_read:end_of_read]).replace(b"\r\n", b"\n")
        start = 0
        while (end := buf.find(b"\n\n", start)) >= 0:
            data, name = _parse_block(buf[start:end])
            start = end + 2
            if data is not None:
                if name is not None:
                    names[len(payloads)] = name
                payloads.append(data)
                ends.append(end_of_read)
        pending = buf[start:]
        start_of_read = end_of_read
    return payloads, ends, names, pending
