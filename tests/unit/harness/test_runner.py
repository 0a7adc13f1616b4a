"""The runner through the Transport protocol, with the in-memory FakeTransport: what it sends,
when, and what it records, against scripted answers (no sockets, no simulator process).
Ground truth is the script: each answer's events come at known offsets after its send."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import (
    CHUNKS_SCHEMA,
    REQUESTS_SCHEMA,
    Endpoint,
    Exchange,
    FakeAnswer,
    FakeTransport,
    HttpClient,
    LoadSpec,
    PreparedRequest,
    Runner,
    SessionTurn,
    TableWriter,
    Timeouts,
    build_body,
    build_schedule,
    sse_events,
)


def _chunk(text: str) -> bytes:
    return orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


def _answer(n_tokens: int = 3, ttft_s: float = 0.002, itl_s: float = 0.001) -> FakeAnswer:
    usage = orjson.dumps({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n_tokens}})
    return FakeAnswer(events=sse_events([_chunk(f"t{i} ") for i in range(n_tokens)] + [usage], itl_s, ttft_s))


def _pool(fake: FakeTransport, n: int, max_tokens: int = 3) -> list[PreparedRequest]:
    return [PreparedRequest(request=fake.request_bytes("/chat/completions", build_body(
        "chat", "m", f"prompt {i}", max_tokens, {}, None)), prompt=f"prompt {i}", max_tokens=max_tokens,
        max_tokens_is_target=False, input_tokens_target=4, input_tokens_client=None,
        output_tokens_target=max_tokens) for i in range(n)]


def _run(tmp_path: Path, fake: FakeTransport, load: LoadSpec, pool: list[PreparedRequest],
         stop_after_s: float | None = None, progress: Any = None) -> tuple[pa.Table, pa.Table, Runner]:
    schedule = build_schedule(load, len(pool))

    async def go() -> Runner:
        stop = asyncio.Event()
        requests_w = TableWriter(tmp_path, "requests", REQUESTS_SCHEMA, flush_rows=256)
        chunks_w = TableWriter(tmp_path, "chunks", CHUNKS_SCHEMA, flush_rows=256)
        runner = Runner(fake, "chat", load, schedule, pool, requests_w, chunks_w, 0, stop, progress=progress)
        if stop_after_s is not None:
            asyncio.get_running_loop().call_later(stop_after_s, stop.set)
        try:
            await runner.run()
        finally:
            requests_w.close()
            chunks_w.close()
        return runner

    runner = asyncio.run(go())
    return pq.read_table(tmp_path / "requests.parquet"), pq.read_table(tmp_path / "chunks.parquet"), runner


def test_open_loop_sends_in_schedule_order_at_the_deadlines(tmp_path: Path) -> None:
    fake = FakeTransport(lambda body, attempt: _answer())
    load = LoadSpec(pattern="constant", rate_per_s=100, measure={"requests": 6})
    requests, chunks, _ = _run(tmp_path, fake, load, _pool(fake, 6))
    rows = sorted(requests.to_pylist(), key=lambda r: r["seq"])
    assert [r["seq"] for r in rows] == list(range(6))
    # sent in schedule order (the fake saw prompts 0..5 in turn), 10 ms apart as declared
    assert [b["messages"][0]["content"] for b in fake.sent] == [f"prompt {i}" for i in range(6)]
    intended = [r["intended_ns"] for r in rows]
    assert [b - a for a, b in zip(intended, intended[1:])] == [10_000_000] * 5
    late_ns = [r["sent_ns"] - r["intended_ns"] for r in rows]
    # never before its deadline; how soon after is the benchmarks' question (benchmarks/trace_replay.py):
    # a busy machine delays a wake-up now and then, while a runner that waited for the wrong deadline
    # would send every request a whole 10 ms gap or more late
    assert min(late_ns) >= 0 and sorted(late_ns)[len(late_ns) // 2] < 10_000_000, late_ns
    for r in rows:
        assert r["outcome"] == "ok" and r["completion_tokens"] == 3 and r["n_token_chunks"] == 3
        # the script's first token comes 2 ms after the send: TTFT is at least that
        assert r["first_token_ns"] - r["sent_ns"] >= 2_000_000
    assert chunks.num_rows == 6 * 5  # 3 tokens, usage, [DONE]


def test_closed_loop_counts_warmup_and_measured_and_never_exceeds_its_users(tmp_path: Path) -> None:
    seen_in_flight: list[int] = []
    fake: FakeTransport

    def answer(body: dict[str, Any], attempt: int) -> FakeAnswer:
        seen_in_flight.append(fake.in_flight)
        return _answer(itl_s=0.002)

    fake = FakeTransport(answer)
    load = LoadSpec(pattern="closed", concurrency=2, warmup={"requests": 2}, measure={"requests": 6})
    requests, _, _ = _run(tmp_path, fake, load, _pool(fake, 3))
    phases = requests.column("phase").to_pylist()
    assert phases.count("warmup") == 2 and phases.count("measure") == 6
    assert set(requests.column("user").to_pylist()) == {0, 1}
    assert max(seen_in_flight) <= 2  # counted before the new one joins: at most one other in flight
    # a pool of 3 distinct requests cycles: request_index wraps around
    assert sorted(set(requests.column("request_index").to_pylist())) == [0, 1, 2]


def test_progress_sees_every_user_in_flight_not_only_the_count_left_when_one_ends(tmp_path: Path) -> None:
    # the live line of a closed@2 run never showed 2 in flight: it heard only of requests ending,
    # when the one that ended had left and its user's next had not yet been sent
    seen: list[tuple[int, bool]] = []

    class Sink:
        def update(self, done: int, in_flight: int, errors: int, row: Any) -> None:
            seen.append((in_flight, bool(row)))

    fake = FakeTransport(lambda body, attempt: _answer(itl_s=0.002))
    load = LoadSpec(pattern="closed", concurrency=2, measure={"requests": 6})
    _run(tmp_path, fake, load, _pool(fake, 3), progress=Sink())
    sending = [n for n, row in seen if not row]
    ending = [n for n, row in seen if row]
    assert len(sending) == 6 and len(ending) == 6
    assert max(sending) == 2  # as each is sent, both users are in flight


def test_a_timeout_is_recorded_with_its_kind_and_the_run_goes_on(tmp_path: Path) -> None:
    def answer(body: dict[str, Any], attempt: int) -> FakeAnswer:
        if attempt == 1:
            return FakeAnswer(error="no response body within 0.01 s", timeout_kind="first_byte", fail_after_s=0.01)
        return _answer()

    fake = FakeTransport(answer)
    load = LoadSpec(pattern="closed", concurrency=1, measure={"requests": 3})
    requests, _, _ = _run(tmp_path, fake, load, _pool(fake, 3))
    rows = sorted(requests.to_pylist(), key=lambda r: r["request_id"])
    assert [r["outcome"] for r in rows] == ["ok", "timeout", "ok"]
    assert rows[1]["timeout_kind"] == "first_byte" and "0.01 s" in rows[1]["error"]
    assert rows[1]["end_ns"] - rows[1]["sent_ns"] >= 10_000_000


def test_rejections_keep_their_status_and_retry_after(tmp_path: Path) -> None:
    fake = FakeTransport(lambda body, attempt: FakeAnswer(status=429, body=b'{"error": "busy"}', retry_after="2"))
    load = LoadSpec(pattern="closed", concurrency=1, measure={"requests": 2})
    requests, _, _ = _run(tmp_path, fake, load, _pool(fake, 2))
    assert requests.column("outcome").to_pylist() == ["rejected", "rejected"]
    assert requests.column("http_status").to_pylist() == [429, 429]
    assert requests.column("retry_after").to_pylist() == ["2", "2"]


def test_stopping_records_what_was_in_flight_as_interrupted_and_returns(tmp_path: Path) -> None:
    fake = FakeTransport(lambda body, attempt: _answer(n_tokens=50, itl_s=0.01))  # 0.5 s per answer
    load = LoadSpec(pattern="closed", concurrency=2, measure={"requests": 10})
    requests, _, runner = _run(tmp_path, fake, load, _pool(fake, 10, max_tokens=50), stop_after_s=0.1)
    assert requests.num_rows == 2  # both users' first requests, cut short; nothing more was sent
    assert set(requests.column("outcome").to_pylist()) == {"interrupted"}  # cut by the stop: nobody's failure
    assert set(requests.column("error").to_pylist()) == {"run interrupted"}
    assert runner.abort_reason is None


def test_a_session_carries_the_engines_real_answer_into_its_next_turn(tmp_path: Path) -> None:
    fake = FakeTransport(lambda body, attempt: _answer(n_tokens=2))
    first = {"role": "user", "content": "first"}
    second = {"role": "user", "content": "second"}

    def build(message: dict[str, Any]) -> Any:
        return lambda history, client: client.request_bytes("/chat/completions", build_body(
            "chat", "m", "", 2, {}, {"messages": history + [message]}))

    turns = [SessionTurn(0, 0, 2, 1, 0, first, build(first)), SessionTurn(0, 1, 2, -1, 5_000_000, second,
                                                                         build(second))]
    pool = [PreparedRequest(request=build(first)([], fake) if t.turn == 0 else b"", prompt=t.message["content"],
                            max_tokens=2, max_tokens_is_target=False, input_tokens_target=1, input_tokens_client=1,
                            output_tokens_target=2, turn=t) for t in turns]
    load = LoadSpec(pattern="closed", concurrency=1, measure={"requests": 1})
    requests, _, _ = _run(tmp_path, fake, load, pool)
    assert fake.sent[1]["messages"] == [first, {"role": "assistant", "content": "t0 t1 "}, second]
    rows = sorted(requests.to_pylist(), key=lambda r: r["turn"])
    assert [r["turn"] for r in rows] == [0, 1] and rows[1]["intended_ns"] - rows[0]["end_ns"] == 5_000_000


class _ScriptedClient(HttpClient):
    """HttpClient with its wire replaced by a script of attempts: the resend policy is what
    remains under test."""

    def __init__(self, attempts: list[Exchange]) -> None:
        super().__init__(Endpoint("http", "engine", 80, "/v1"), Timeouts(), max_idle=4)
        self.attempts = attempts
        self.reuse: list[bool] = []

    async def _attempt(self, request: bytes, reuse: bool, send_at_ns: int | None = None) -> Exchange:
        self.reuse.append(reuse)
        return self.attempts.pop(0)


def _exchange(new_connection: bool, error: str | None = None, first_byte_ns: int = 0) -> Exchange:
    ex = Exchange()
    ex.new_connection, ex.error, ex.first_byte_ns = new_connection, error, first_byte_ns
    return ex


def test_a_request_dropped_unanswered_on_a_reused_connection_is_sent_once_more_on_a_new_one() -> None:
    stale = _exchange(new_connection=False, error="server closed the connection before the response headers")
    client = _ScriptedClient([stale, _exchange(new_connection=True, first_byte_ns=1)])
    ex = asyncio.run(client.exchange(b"req"))
    assert ex.resent and ex.new_connection and client.reuse == [True, False] and client.reuse_disabled


def test_a_failure_after_the_first_byte_or_on_a_new_connection_is_never_resent() -> None:
    for first in (_exchange(new_connection=False, error="stream stalled", first_byte_ns=5),
                  _exchange(new_connection=True, error="cannot connect")):
        client = _ScriptedClient([first])
        ex = asyncio.run(client.exchange(b"req"))
        assert ex is first and not ex.resent and len(client.reuse) == 1


@pytest.mark.slow
def test_users_wait_for_the_recorder_when_unrecorded_answers_pass_the_memory_budget(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import harness._runner as runner_module

    big = _chunk("x" * (1 << 20))  # 1 MiB answers, all at once: far faster than they are recorded
    fake = FakeTransport(lambda body, attempt: FakeAnswer(events=sse_events([big], 0.0, 0.0)))
    monkeypatch.setattr(runner_module, "_BACKLOG_BYTES", 4 << 20)
    held: list[int] = []
    queue = runner_module.Runner._queue

    def watched(self: Runner, done: Any) -> None:
        queue(self, done)
        held.append(self._backlog_bytes)

    monkeypatch.setattr(runner_module.Runner, "_queue", watched)
    load = LoadSpec(pattern="closed", concurrency=4, measure={"requests": 40})
    requests, _, _ = _run(tmp_path, fake, load, _pool(fake, 40))
    assert requests.num_rows == 40 and set(requests.column("outcome").to_pylist()) == {"ok"}
    # the budget, plus at most one more answer from each of the 4 users
    answer_bytes = len(big) + 8
    assert max(held) <= (4 << 20) + 4 * answer_bytes
    assert max(held) > (4 << 20) - answer_bytes  # the budget was reached: the test exercised it
