from __future__ import annotations

import pytest

from harness import SSEParser

EVENTS = [b'{"a": 1}', '{"text": "h\u00e9llo \u4e16\u754c \U0001f600"}'.encode(), b"[DONE]"]


def _stream(sep: bytes) -> bytes:
    return b"".join(b"data: " + e + sep + sep for e in EVENTS)


def _feed_all(pieces: list[bytes]) -> SSEParser:
    parser = SSEParser()
    for t, piece in enumerate(pieces):
        parser.feed(piece, t + 1)
    return parser


@pytest.mark.parametrize("sep", [b"\n", b"\r\n"])
def test_events_split_at_every_byte_boundary_parse_the_same(sep: bytes) -> None:
    raw = _stream(sep)
    for cut in range(1, len(raw)):
        parser = _feed_all([raw[:cut], raw[cut:]])
        assert [parser.data(i) for i in range(len(parser))] == EVENTS, cut
        assert parser.done and parser.leftover() == b""


def test_byte_at_a_time_keeps_utf8_intact_and_times_each_event_at_its_last_byte() -> None:
    raw = _stream(b"\n")
    parser = _feed_all([raw[i : i + 1] for i in range(len(raw))])
    assert [parser.data(i) for i in range(len(parser))] == EVENTS
    ends = [raw.index(b"\n\n", raw.index(e)) + 2 for e in EVENTS]  # 1-based time of the last byte
    assert list(parser.times_ns) == ends


def test_comments_keepalives_and_dataless_events_are_ignored() -> None:
    parser = _feed_all([b": keepalive 1/10\n\n", b"event: ping\n\n", b": x\ndata: 1\n\n", b"retry: 5\n\n"])
    assert len(parser) == 1 and parser.data(0) == b"1"


def test_multiline_data_is_joined_with_newline_and_event_name_kept() -> None:
    parser = _feed_all([b"event: error\ndata: {\"a\":\ndata: 2}\n\n"])
    assert parser.data(0) == b'{"a":\n2}'
    assert parser.event_names == {0: "error"}


def test_crlf_split_between_cr_and_lf_across_reads() -> None:
    parser = _feed_all([b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n"])
    assert [parser.data(0), parser.data(1)] == [b"1", b"2"]


def test_data_without_space_after_colon() -> None:
    parser = _feed_all([b"data:[DONE]\n\n"])
    assert parser.data(0) == b"[DONE]" and parser.done


def test_cut_off_event_is_left_over() -> None:
    parser = _feed_all([b"data: 1\n\ndata: {\"trunc"])
    assert len(parser) == 1 and parser.leftover() == b'data: {"trunc'
