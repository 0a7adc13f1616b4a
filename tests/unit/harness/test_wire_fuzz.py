"""Property-based tests of everything that parses bytes from an endpoint.

Two kinds of property: hostile bytes (anything at all, cut anywhere) never raise out of the
parser and leave the exchange ended with a result or an error, within the declared limits; and
well-formed streams of random events, cut into random reads, with LF or CRLF line ends, parse
back to exactly the events that were sent, each timed at the read that completed it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Endpoint, Limits, SSEParser, Timeouts, _sse
from harness._http import Exchange, HttpClient, _Connection
from harness._recorder import piece_array

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# An event's data: any text without line ends (an SSE data line cannot hold one), not starting
# with a space (the one space after `data:` is the separator), non-empty.
payload = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), min_size=1, max_size=60
                  ).filter(lambda s: not s.startswith(" ")).map(str.encode)


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in zip(edges, edges[1:]) if b > a]


@FUZZ
@given(events=st.lists(payload, min_size=1, max_size=30), crlf=st.booleans(), done=st.booleans(),
       points=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20), small=st.booleans())
def test_well_formed_streams_parse_back_to_their_events_however_they_are_cut(
    events: list[bytes], crlf: bool, done: bool, points: list[int], small: bool
) -> None:
    sep = b"\r\n" if crlf else b"\n"
    sent = [*events, b"[DONE]"] if done else events
    raw = b"".join(b"data: " + e + sep + sep for e in sent)
    reads = _cuts(raw, points)
    parser = SSEParser()
    for t, piece in enumerate(reads, start=1):
        parser.feed(piece, t)
    # the short-body path (bytes.find) and the numpy one give the same events and times
    threshold = _sse._SMALL_BODY_BYTES
    _sse._SMALL_BODY_BYTES = 1 << 20 if small else 0
    try:
        len(parser)
    finally:
        _sse._SMALL_BODY_BYTES = threshold
    assert [parser.data(i) for i in range(len(parser))] == sent
    assert parser.done == done and parser.leftover() == b""
    # each event is timed at the read holding its last byte
    ends = [sum(map(len, reads[:k + 1])) for k in range(len(reads))]
    offset, expected = 0, []
    for e in sent:
        offset += len(b"data: " + e + sep + sep)
        expected.append(next(k for k, end in enumerate(ends, start=1) if end >= offset))
    assert list(parser.times_ns) == expected
    assert _column([parser]) == sent


def _column(parsers: list[SSEParser]) -> list[Any]:
    """The data column a part of chunks.parquet holds for these answers, in order."""
    return list(piece_array([p.data_piece() for p in parsers], pa.binary(), None).to_pylist())


_LINE = st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b)


@FUZZ
@given(answers=st.lists(st.lists(_LINE, max_size=5), max_size=6), cut=st.booleans())
def test_a_parts_data_column_is_every_answers_payloads_in_order(answers: list[list[bytes]], cut: bool) -> None:
    parsers = []
    for events in answers:
        parser = SSEParser()
        body = b"".join(b"data: " + e + b"\n\n" for e in events)
        parser.feed(body + (b"data: cut" if cut else b""), 1)  # a cut-off tail: payloads kept one by one
        parsers.append(parser)
    assert _column(parsers) == [e for events in answers for e in events]


@FUZZ
@given(reads=st.lists(st.binary(max_size=200), max_size=12))
def test_any_bytes_at_all_split_without_raising(reads: list[bytes]) -> None:
    parser = SSEParser()
    for t, piece in enumerate(reads, start=1):
        parser.feed(piece, t)
    n = len(parser)
    assert len(parser.times_ns) == n and len(parser.payloads) == n
    assert _column([parser]) == parser.payloads
    assert parser.received_bytes == sum(map(len, reads))
    assert all(1 <= t <= len(reads) for t in parser.times_ns)


# -- the HTTP response parser, fed directly --------------------------------------------------------


class _Transport:
    """Just enough of an asyncio transport for a _Connection: records writes and aborts."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written += data

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted

    def get_extra_info(self, name: str) -> Any:
        return None


SMALL_LIMITS = Limits(bytes_per_response=4096, bytes_per_event=512, events_per_response=40, header_bytes=1024)

status_line = st.sampled_from([b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 429 Too Many Requests\r\n", b"HTTP/1.1 500 X\r\n",
                               b"HTTP/1.0 200 OK\r\n", b"HTP/1.1 200\r\n", b""])
header = st.one_of(
    st.sampled_from([b"Content-Type: text/event-stream\r\n", b"Transfer-Encoding: chunked\r\n",
                     b"Content-Length: 5\r\n", b"Retry-After: 1\r\n", b"Connection: close\r\n"]),
    st.binary(max_size=80).map(lambda b: b"X-" + b.replace(b"\r\n", b"") + b": v\r\n"),
    st.binary(max_size=2000),
)
body = st.one_of(
    st.lists(payload, max_size=80).map(lambda es: b"".join(b"data: " + e + b"\n\n" for e in es)),
    st.binary(max_size=6000),
)


async def _exchange(reads: list[bytes], close: bool) -> Exchange:
    client = HttpClient(Endpoint.parse("http://127.0.0.1:9/v1"), Timeouts(), max_idle=1, limits=SMALL_LIMITS)
    conn = _Connection(client)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    ex = Exchange()
    ex.done = asyncio.get_running_loop().create_future()
    conn.send(ex, b"POST /v1/completions HTTP/1.1\r\n\r\n")
    for piece in reads:
        if transport.aborted:
            break
        conn.data_received(piece)
    if close or not ex.done.done():
        conn.connection_lost(None)
    return ex


@FUZZ
@given(status=status_line, headers=st.lists(header, max_size=6), chunked=st.booleans(), payload_bytes=body,
       points=st.lists(st.integers(min_value=0, max_value=20_000), max_size=10), close=st.booleans())
def test_any_response_ends_the_exchange_with_a_result_or_a_reason_within_the_limits(
    status: bytes, headers: list[bytes], chunked: bool, payload_bytes: bytes, points: list[int], close: bool
) -> None:
    if chunked:
        framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in _cuts(payload_bytes, points)) + b"0\r\n\r\n"
        head = b"Transfer-Encoding: chunked\r\n"
    else:
        framed, head = payload_bytes, b""
    raw = status + b"".join(headers) + head + b"\r\n" + framed
    ex = asyncio.run(_exchange(_cuts(raw, points), close))
    assert ex.done is not None and ex.done.done()
    assert ex.error is None or isinstance(ex.error, str) and ex.error
    # what was kept is bounded by the limit plus the one read that crossed it
    longest_read = max(map(len, _cuts(raw, points)), default=0)
    assert ex.sse.received_bytes <= SMALL_LIMITS.bytes_per_response + longest_read
    assert len(ex.error_body) <= 64 << 10
    # and the recorded events split cleanly, each timed
    n_events = len(ex.sse)
    assert len(ex.sse.times_ns) == n_events and len(_column([ex.sse])) == n_events


@pytest.mark.parametrize("limit, raw, said", [
    ("header", b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 2000 + b"\r\n", "the response headers exceeded 1024 bytes"),
    ("event", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"400\r\n" + b"x" * 1024 + b"\r\n",
     "an event exceeded 512 bytes"),
])
def test_each_limit_names_itself(limit: str, raw: bytes, said: str) -> None:
    ex = asyncio.run(_exchange([raw], close=False))
    assert ex.error == said, limit


def test_a_limit_crossed_mid_read_keeps_the_rest_of_that_read_out_of_the_events() -> None:
    # one read holding 50 chunks of one event each: the 41st crosses events_per_response, and
    # httptools still hands over the chunks after it within the same read
    events = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in (b"data: %d\n\n" % k for k in range(50)))
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + events
    ex = asyncio.run(_exchange([raw], close=False))
    assert ex.error == "the response exceeded 40 events"
    assert len(ex.sse) == 41 and ex.sse.data(40) == b"40"
    assert len(set(ex.sse.times_ns.tolist())) == 1  # all from the one read
