"""A server's numbers are checked before they are stored (issue 22): counts out of range,
negative or impossible become the request's own `stream_error` naming the count; JSON nested
past any limit is a malformed event; events after [DONE] are ignored and said; and no value an
endpoint sends makes the recorder raise (property-based)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import ACCOUNTING_ERROR, REQUESTS_SCHEMA, Exchange, TableWriter, judge
from passport.audit import ACCOUNTING_PREFIX
from tests.faults import fault


def _exchange(*events: bytes) -> Exchange:
    ex = Exchange()
    ex.status, ex.content_type = 200, "text/event-stream"
    for t, data in enumerate(events, start=1):
        ex.sse.feed(b"data: " + data + b"\n\n", t * 1000)
    return ex


def _text(n: int) -> list[bytes]:
    return [orjson.dumps({"choices": [{"index": 0, "text": f"w{i} ", "finish_reason": None}]}) for i in range(n)]


def _finish(usage: Any) -> bytes:  # json, not orjson: a server may send integers past 64 bits
    return json.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": usage}).encode()


def _judged(usage: Any, n_tokens: int = 8, max_tokens: int = 8, after: bytes | None = None) -> tuple[str, str | None]:
    events = [*_text(n_tokens), _finish(usage), b"[DONE]"] + ([after] if after else [])
    summary, outcome, error = judge(_exchange(*events), "completions", True, max_tokens)
    return outcome, error


@fault("usage counts a server cannot mean: 10**30, -1000000, 10**15, floats, strings, more than max_tokens or the "
       "stream carried", "the request is a `stream_error` naming the count (\"server accounting: ...\"), its figures "
       "left out; rule `server_accounting` fails the run (rules version 3)")
def test_possible_counts_pass_and_impossible_ones_are_stream_errors_naming_the_count() -> None:
    assert _judged({"prompt_tokens": 12, "completion_tokens": 8}) == ("ok", None)
    for usage, said in [
        ({"prompt_tokens": 10**30, "completion_tokens": 8}, "usage prompt_tokens is 1000000000000000000000000000000"),
        ({"prompt_tokens": 12, "completion_tokens": -1_000_000}, "usage completion_tokens is -1000000, not a token"),
        ({"prompt_tokens": 12, "completion_tokens": 8.5}, "usage completion_tokens is 8.5"),
        ({"prompt_tokens": 12, "completion_tokens": True}, "usage completion_tokens is True"),
        ({"prompt_tokens": "12", "completion_tokens": 8}, "usage prompt_tokens is 12, not a token count"),
        ({"prompt_tokens": 12, "completion_tokens": 10**15}, "usage completion_tokens is 1000000000000000"),
        ({"prompt_tokens": 12, "completion_tokens": 40}, "is more than max_tokens 8 allows"),
    ]:
        outcome, error = _judged(usage)
        assert outcome == "stream_error" and error is not None, usage
        assert error.startswith(f"{ACCOUNTING_ERROR}: ") and said in error, (usage, error)
    # more tokens than the stream could carry, within the budget
    outcome, error = _judged({"prompt_tokens": 1, "completion_tokens": 5000}, n_tokens=2, max_tokens=10_000)
    assert outcome == "stream_error" and "more than the stream carried" in str(error)
    assert ACCOUNTING_ERROR == ACCOUNTING_PREFIX  # the auditor counts what the harness writes
    from harness import OUTCOMES
    from harness._runner import INTERRUPTED
    from passport.audit import OUTCOME_CLASSES
    from passport.audit._counts import INTERRUPTED_ERROR

    assert INTERRUPTED == INTERRUPTED_ERROR and OUTCOMES == OUTCOME_CLASSES


@fault("a JSON event nested 100,000 deep", "a malformed event (`stream_error`), the chunks before it kept")
def test_json_nested_past_any_limit_is_a_malformed_event_not_a_crash() -> None:
    deep = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    summary, outcome, error = judge(_exchange(*_text(2), deep, b"[DONE]"), "completions", True, 8)
    assert outcome == "stream_error" and "malformed event 2" in str(error)
    assert summary is not None and summary.n_token_chunks == 2  # the chunks before it are kept


@fault("events after [DONE]", "ignored (no tokens, no text) and said: `stream_error` \"N events after [DONE]\"")
def test_text_after_done_is_ignored_and_said() -> None:
    outcome, error = _judged({"prompt_tokens": 12, "completion_tokens": 8}, after=_text(1)[0])
    assert (outcome, error) == ("stream_error", "1 events after [DONE] (ignored)")
    summary, _, _ = judge(_exchange(*_text(8), _finish({"completion_tokens": 8}), b"[DONE]", *_text(3)),
                          "completions", True, 8)
    assert summary is not None and summary.n_token_chunks == 8 and summary.content.count("w") == 8


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)
FIELDS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "prompt_tokens_details",
          "completion_tokens_details")


@settings(max_examples=150, deadline=None)
@given(usage=st.dictionaries(st.sampled_from(FIELDS), JSON | st.integers(min_value=-2**200, max_value=2**200)),
       delta=st.dictionaries(st.sampled_from(("content", "reasoning_content", "tool_calls", "role")), JSON),
       finish=JSON, extra=JSON)
@pytest.mark.slow
def test_no_value_from_an_endpoint_makes_the_parser_or_the_recorder_raise(
        tmp_path_factory: Any, usage: dict[str, Any], delta: dict[str, Any], finish: Any, extra: Any) -> None:
    events = [json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage,
                          "extra": extra}).encode(), b"[DONE]"]
    summary, outcome, error = judge(_exchange(*events), "chat", False, 16)
    assert outcome in ("ok", "truncated", "stream_error")
    row = {"request_id": 1, "phase": "measure", "outcome": outcome, "error": error}
    if summary is not None:  # what the runner stores from the summary, whatever it holds
        row.update(prompt_tokens=summary.prompt_tokens, completion_tokens=summary.completion_tokens,
                   reasoning_tokens=summary.reasoning_tokens, cached_tokens=summary.cached_tokens)
    folder: Path = tmp_path_factory.mktemp("rec")
    writer = TableWriter(folder, "requests", REQUESTS_SCHEMA, flush_rows=1)
    writer.append_row(row)
    writer.close()
    assert pq.read_table(folder / "requests.parquet").num_rows == 1


@fault("a value no column can hold reaching the recorder", "stored as null, the row's `error` naming the column and "
       "value; the part and every other row written (the write path is total, property-tested)")
def test_a_value_no_column_can_hold_is_stored_as_null_with_the_row_saying_so(tmp_path: Path) -> None:
    # what crashed the flush (OverflowError) and lost every answered request: one huge integer
    writer = TableWriter(tmp_path, "requests", REQUESTS_SCHEMA, flush_rows=10)
    writer.append_row({"request_id": 1, "outcome": "ok", "prompt_tokens": 10**30})
    writer.append_row({"request_id": 2, "outcome": "ok", "prompt_tokens": 12})
    writer.close()
    rows = pq.read_table(tmp_path / "requests.parquet").to_pylist()
    assert [r["request_id"] for r in rows] == [1, 2] and [r["prompt_tokens"] for r in rows] == [None, 12]
    assert rows[0]["error"].startswith("unrecordable value: prompt_tokens '1000000000000000000000000000000' does not "
                                       "fit int64") and rows[1]["error"] is None
