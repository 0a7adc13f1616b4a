"""verify's raw-table checks on hand-built tables: each kind of disagreement between
requests.parquet and chunks.parquet is found and names its requests, and what a run may
legitimately hold (a request cut off by the harness, one that streamed no token) is not."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from harness import CHUNKS_SCHEMA, REQUESTS_SCHEMA
from passport.audit._verify import _chunk_problems


def _requests(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=REQUESTS_SCHEMA)


def _request(rid: int, n_chunks: int | None, first: int | None, last: int | None, outcome: str = "ok",
             status: int = 200) -> dict[str, Any]:
    return {"request_id": rid, "n_chunks": n_chunks, "first_token_ns": first, "last_token_ns": last,
            "outcome": outcome, "http_status": status}


def _chunks(rows: list[tuple[int, int, bool]]) -> pa.Table:
    """(request_id, recv_ns, token_bearing) each."""
    return pa.Table.from_pylist([{"request_id": r, "seq": k, "recv_ns": t, "token_bearing": b}
                                 for k, (r, t, b) in enumerate(rows)], schema=CHUNKS_SCHEMA)


# request 1: a role chunk, tokens at 10 and 20, a closing chunk; request 2: tokens at 30 and 40
CHUNKS = [(1, 5, False), (1, 10, True), (1, 20, True), (1, 25, False), (2, 30, True), (2, 40, True)]


def test_tables_that_agree_have_no_problem() -> None:
    requests = _requests([_request(1, 4, 10, 20), _request(2, 2, 30, 40),
                          _request(3, 0, None, None, outcome="http_error", status=500),  # no stream at all
                          _request(4, 3, None, None, outcome="interrupted")])  # cut off: its chunks not kept
    assert _chunk_problems(requests, _chunks(CHUNKS)) == []


def test_an_edited_first_or_last_token_time_is_named() -> None:
    requests = _requests([_request(1, 4, 9, 20), _request(2, 2, 30, 41)])
    problems = _chunk_problems(requests, _chunks(CHUNKS))
    assert problems == ["requests.parquet: 2 requests' first or last token time is not their first or last "
                        "token-bearing chunk's arrival in chunks.parquet (request_id [1, 2]): a time was edited"]


def test_a_token_time_without_token_bearing_chunks_and_the_reverse_are_named() -> None:
    chunks = _chunks([*CHUNKS, (3, 50, False)])
    requests = _requests([_request(1, 4, None, None), _request(2, 2, 30, 40), _request(3, 1, 50, 50)])
    problems = _chunk_problems(requests, chunks)
    assert len(problems) == 1 and "2 requests' first or last token time" in problems[0] and "[1, 3]" in problems[0]


def test_orphan_chunks_and_miscounted_requests_are_named() -> None:
    chunks = _chunks([*CHUNKS, (7, 60, True), (7, 61, True), (8, 70, True)])
    requests = _requests([_request(1, 5, 10, 20), _request(2, 2, 30, 40)])
    problems = _chunk_problems(requests, chunks)
    assert problems[0] == ("chunks.parquet: 2 requests' chunks have no row in requests.parquet "
                           "(request_id [7, 8])")
    # request 1 counts five chunks, chunks.parquet holds four; its token times are not judged twice
    assert problems[1:] == ["requests.parquet: 1 requests say they had more or fewer chunks than chunks.parquet "
                            "holds (request_id [1])"]
