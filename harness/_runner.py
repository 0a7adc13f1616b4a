"""The runner: sends a materialized schedule through the HTTP client and records every request.

It sees only the client (transport), the schedule, the prepared requests and the writers. Open loops
send on absolute deadlines on the monotonic clock (never relative sleeps, so lag never
accumulates): each request is armed `ARM_NS` ahead and written at its deadline by the transport's
pacer thread (`harness._pacer`), so a record or a parse running then does not delay it; optionally
capped in flight; closed loops run `concurrency` users back to back. Each
finished exchange becomes one row of `requests.parquet` and its events rows of `chunks.parquet`.
Nothing is retried unless `load.on_reject` declares it for rejections (429/503, see
`RejectPolicy`: each attempt its own row, linked to the first by `retry_of`); a request a server
dropped unanswered on a reused keep-alive connection is re-sent by the transport and marked
`resent`. After 20 connection failures in a row
the endpoint is taken as gone and the run stops (reason in `abort_reason`) instead of recording
errors as fast as the loop spins. `stop` (Ctrl-C, SIGTERM) ends issuing at once, aborts what is in
flight (recorded as `client_error`, "run interrupted") and returns normally, so the caller can close
the files and write a passport marked incomplete.

Multi-turn sessions: a scheduled entry whose request has a `SessionTurn` starts a session. Its
next turn is built when the previous answer has arrived (the conversation so far, with the
engine's real answers) and sent `think_ns` after it; the session's slot (open loop with a cap) or
user (closed loop) stays taken until its last turn. A failed turn ends its session: the turns
after it are not sent (they appear in the schedule, not in the requests). A request with a
`ResponseExpectation` (JSON schema or tools) is checked after the fact; the result is recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import types
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from harness._checks import check_json, check_tool_call
from harness._http import Exchange
from harness._kinds import judge
from harness._loadspec import LoadSpec
from harness._openai import SUCCESS_OUTCOMES, Api, ChunkKind, StreamSummary
from harness._recorder import TableWriter
from harness._redact import has_secret, scrub, scrub_bytes
from harness._schedule import Schedule
from harness._transport import Transport

INTERRUPTED = "run interrupted"  # the error of a request the run's stop cut off (outcome `interrupted`)

__all__ = ["PreparedRequest", "Runner", "RepetitionResult", "WorkerShare", "ProgressSink", "RecordText", "SessionTurn",
           "ResponseExpectation"]

_now = time.perf_counter_ns
_MAX_CONNECT_FAILURES = 20  # in a row: the endpoint is gone; stop rather than spin on errors
START_LEAD_NS = 20_000_000  # first open-loop deadline: 20 ms after start, so setup never lags it
# A paced send is armed this long before its deadline (connection chosen, answer awaited): more
# than the loop's own lag at the rates one worker holds (a loop timer rounds to 1 ms).
ARM_NS = 3_000_000
# An open loop arms every request due to be armed within this without a sleep of its own: the
# loop's timers round to 1 ms anyway, and at thousands a second a sleep per request cost more than
# the arming itself. So a request is armed 3 to 4 ms before its deadline.
_ARM_EARLY_NS = 1_000_000
_STOP_HEARD_NS = 50_000_000  # a stop ends any wait longer than this at once; shorter ones run out
# Bytes of finished answers waiting to be recorded before users wait for the recorder: an
# endpoint answering faster than answers can be parsed (a flood cut at a limit every few ms)
# must not grow the harness's memory without bound. Ordinary answers are kilobytes.
_BACKLOG_BYTES = 64 << 20
# The recorder yields to the loop after this much recording, not after each record (a task step
# per request was a tenth of a short request's cost at thousands a second).
_RECORD_TURN_NS = 200_000

RecordText = str  # "full" | "hashes"
_SEQ = np.arange(4096, dtype=np.int32)  # chunk numbers: an answer's are a view of these (never written to)
_SEQ.flags.writeable = False
# token_bearing by chunk kind, looked up in one step
_TOKEN_BEARING = np.array([k in (ChunkKind.CONTENT, ChunkKind.REASONING, ChunkKind.TOOL_CALL) for k in range(128)])
_SENDING: Mapping[str, object] = types.MappingProxyType({})  # the progress row of a request being sent


class ProgressSink(Protocol):
    """Receives progress after each recorded request (`row`, as written to requests.parquet;
    not to be kept or changed) and as each request is sent (an empty `row`: only the counts
    moved, so a closed loop of N shows N in flight); called on the event loop, so it must be
    quick."""

    def update(self, done: int, in_flight: int, errors: int, row: Mapping[str, object]) -> None: ...


@dataclass(frozen=True)
class ResponseExpectation:
    """What a request asked the answer to be: JSON under `schema`, or a call of one of `tools`
    (`tool`: the one a named tool_choice demands)."""

    kind: str  # "json_schema" | "tool_call"
    schema: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool: str | None = None


@dataclass(frozen=True)
class SessionTurn:
    """One turn of a multi-turn session. `build(history, client)` gives the request bytes for this
    turn after `history` (earlier user messages and the engine's answers), framed by the client
    that sends them (so a turn holds no client, and no credential, of its own: it travels to Ray
    actors on other hosts); `next_index` is the pool index of the next turn (-1: the last);
    `think_ns` the pause before this turn is sent."""

    session: int
    turn: int
    turns: int
    next_index: int
    think_ns: int
    message: dict[str, Any]
    build: Callable[[list[dict[str, Any]], Transport], bytes]


@dataclass(frozen=True)
class PreparedRequest:
    """One workload entry with its HTTP request bytes (and prompt hash) built before timing
    (a session's later turns: empty, their bytes are built by `turn.build` from the answers)."""

    request: bytes
    prompt: str
    max_tokens: int
    max_tokens_is_target: bool
    input_tokens_target: int
    input_tokens_client: int | None
    output_tokens_target: int
    shape: str | None = None
    expect: ResponseExpectation | None = None
    turn: SessionTurn | None = None
    n_inputs: int | None = None  # embeddings' inputs, or rerank's and score's documents
    audio_ms: int | None = None  # the clip's duration, for audio transcription
    prompt_sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_sha256", hashlib.sha256(self.prompt.encode()).hexdigest())


@dataclass(frozen=True)
class WorkerShare:
    """This process's part of a load dealt to `workers` processes (passport.run._workers): every
    `workers`-th scheduled request from `worker` on (open loop: at its absolute deadline, so the
    processes together send the one schedule; closed loop: its users are every `workers`-th user,
    its requests every `workers`-th sequence number), request ids interleaved so they stay unique,
    an open loop's in-flight cap split between the processes. `start(rep)` is awaited before
    each repetition, so every worker starts it at once; it returns the repetition's start time on
    this host's clock when the workers share one (an open loop's deadlines are then that start
    plus the schedule's offsets in every worker), or None for each to start on its own."""

    worker: int = 0
    workers: int = 1
    start: Callable[[int], Awaitable[int | None]] | None = None

    def part(self, total: int) -> int:
        """This worker's part of `total` (the first `total % workers` workers get one more)."""
        return total // self.workers + (1 if self.worker < total % self.workers else 0)


@dataclass
class RepetitionResult:
    """What one repetition sent (its window is derived from the raw logs, not kept here)."""

    repetition: int
    sent: int = 0
    pool_cycles: int = 0


@dataclass
class _Done:
    """A finished (or failed) exchange waiting to be recorded."""

    rid: int
    rep: int
    seq: int
    phase: str
    index: int
    user: int | None
    intended_ns: int
    prepared: PreparedRequest
    ex: Exchange | None
    failure: str | None
    judged: tuple[StreamSummary | None, str, str | None] | None = None
    attempt: int = 0
    retry_of: int | None = None
    slot_ns: int | None = None  # when the in-flight cap let it go, if it had to wait for a slot


@dataclass
class _Counters:
    done: int = 0
    errors: int = 0
    next_id: int = 0


def _held_bytes(done: _Done) -> int:
    """Bytes of answer a finished attempt holds until it is recorded."""
    ex = done.ex
    return 0 if ex is None else ex.sse.received_bytes + len(ex.error_body)


class Runner:
    """Sends one schedule `load.repetitions` times; see the module docstring."""

    def __init__(
        self,
        client: Transport,
        api: Api,
        load: LoadSpec,
        schedule: Schedule,
        pool: list[PreparedRequest],
        requests_writer: TableWriter,
        chunks_writer: TableWriter,
        t0_ns: int,
        stop: asyncio.Event,
        record_text: RecordText = "full",
        count_tokens: Callable[[str], int] | None = None,
        progress: ProgressSink | None = None,
        entries: list[int] | None = None,
        share: WorkerShare | None = None,
    ) -> None:
        """`entries`: the pool index of each schedulable entry (a request, or a session's first
        turn), for closed loops that cycle the entries; None: every pool index is an entry.
        `share`: this process's part of a load dealt to several worker processes (see
        `WorkerShare`); None: the whole load."""
        self._share = share or WorkerShare()
        self._client = client
        self._entries = entries
        self._api = api
        self._load = load
        self._schedule = schedule
        self._pool = pool
        self._requests = requests_writer
        self._chunks = chunks_writer
        self._t0 = t0_ns
        self._stop = stop
        self._full_text = record_text == "full"
        self._count_tokens = count_tokens
        self._progress = progress
        self._c = _Counters()
        self._offsets = schedule.table.column("intended_offset_ns").to_numpy(zero_copy_only=False)
        self._phases = schedule.table.column("phase").to_pylist()
        self._indexes = schedule.table.column("request_index").to_numpy()
        self._tasks: set[asyncio.Task[None]] = set()
        self._connect_failures = 0
        self._context: dict[tuple[int, int], int] = {}  # a session's context tokens so far, by (rep, seq)
        self.abort_reason: str | None = None
        # Finished exchanges wait here for the recorder task, which records for up to
        # _RECORD_TURN_NS, then yields to the loop: when many streams end together, arriving
        # chunks wait for about that (and one record), never for the whole queue.
        self._backlog: deque[_Done] = deque()
        self._backlog_bytes = 0
        self._drained = asyncio.Event()
        self._backlog_ready = asyncio.Event()

    async def run(self) -> list[RepetitionResult]:
        results = []
        recorder = asyncio.get_running_loop().create_task(self._record_backlog())
        try:
            for rep in range(self._load.repetitions):
                if self._stop.is_set():
                    break
                start_ns = None
                if self._share.start is not None:  # every worker starts the repetition together
                    start_ns = await self._share.start(rep)
                    if self._stop.is_set():
                        break
                result = RepetitionResult(rep)
                if self._load.open_loop:
                    await self._open_loop(result, start_ns)
                else:
                    await self._closed_loop(result)
                results.append(result)
        finally:
            recorder.cancel()
            try:
                await recorder
            except asyncio.CancelledError:
                pass
            while self._backlog:  # whatever the task had not reached
                self._record_one(self._backlog.popleft())
        return results

    async def _record_backlog(self) -> None:
        while True:
            await self._backlog_ready.wait()
            self._backlog_ready.clear()
            turn_ns = _now() + _RECORD_TURN_NS
            while self._backlog:
                self._record_one(self._backlog.popleft())
                if self._backlog and _now() >= turn_ns:
                    await asyncio.sleep(0)  # let the loop read sockets between records
                    turn_ns = _now() + _RECORD_TURN_NS

    def _queue(self, done: _Done) -> None:
        """Hand a finished attempt to the recorder task."""
        self._backlog.append(done)
        self._backlog_bytes += _held_bytes(done)
        self._backlog_ready.set()

    async def _wait_for_recorder(self) -> None:
        """Backpressure: while more than _BACKLOG_BYTES of answers wait to be recorded, the
        caller (a user about to send again) waits until the recorder is below it."""
        while self._backlog_bytes > _BACKLOG_BYTES and not self._stop.is_set():
            self._drained.clear()
            await self._drained.wait()

    def _record_one(self, done: _Done) -> None:
        held = _held_bytes(done)
        try:
            self._record(done)
        except Exception as exc:  # a harness bug must not stop the run; it is recorded
            done.ex, done.failure = None, f"recording failed: {type(exc).__name__}: {exc}"
            self._record(done)
        self._backlog_bytes -= held
        if self._backlog_bytes <= _BACKLOG_BYTES:
            self._drained.set()

    # -- one request (or one session, turn by turn) -------------------------------------------
    async def _one(
        self, rep: int, seq: int, phase: str, index: int, user: int | None, intended_ns: int, paced: bool,
        slot_ns: int | None = None,
    ) -> None:
        """One request or session; `paced`: its first request goes at `intended_ns` exactly (the
        pacer's), not as soon as it is ready (a closed loop's user); `slot_ns`: when the in-flight
        cap let it go, if it found the cap full (its first request's wait is the cap's)."""
        history: list[dict[str, Any]] = []
        while True:
            prepared = self._pool[index]
            turn = prepared.turn
            request = turn.build(history, self._client) if turn is not None and history else prepared.request
            done = await self._attempts(rep, seq, phase, index, user, intended_ns, paced, prepared, request,
                                        None if history else slot_ns)
            if done is None:
                return  # stopped while waiting to retry, or before it was sent
            ex = done.ex
            if turn is not None and turn.next_index >= 0 and ex is not None and done.failure is None:
                done.judged = judge(ex, self._api, prepared.max_tokens_is_target,  # the answer is needed now
                                    prepared.max_tokens, prepared.n_inputs)
            self._queue(done)
            await self._wait_for_recorder()
            if turn is None or turn.next_index < 0 or done.judged is None or self._stop.is_set():
                return
            summary, outcome, _ = done.judged
            if summary is None or outcome not in SUCCESS_OUTCOMES:
                return  # a failed turn ends its session
            assert ex is not None
            answer = {"role": "assistant", "content": summary.content}
            if summary.response_id is not None:  # the Responses API's, for the next turn's previous_response_id
                answer["response_id"] = summary.response_id
            history = history + [turn.message, answer]
            index = turn.next_index
            following = self._pool[index].turn
            assert following is not None
            intended_ns, paced = ex.end_ns + following.think_ns, True
            await self._sleep_until(intended_ns - ARM_NS)
            if self._stop.is_set():
                return

    async def _attempts(self, rep: int, seq: int, phase: str, index: int, user: int | None, intended_ns: int,
                        paced: bool, prepared: PreparedRequest, request: bytes,
                        slot_ns: int | None = None) -> _Done | None:
        """Send one request, and again after each rejection the policy retries; every attempt
        but the last is queued for recording here. The last attempt (None if stopped first, or
        withdrawn before it went). A retry is paced at its wait's end."""
        attempt, first_rid = 0, None
        while True:
            rid = self._c.next_id * self._share.workers + self._share.worker  # unique across workers
            self._c.next_id += 1
            ex: Exchange | None = None
            failure: str | None = None
            if self._progress is not None:
                self._progress.update(self._c.done, self._client.in_flight + 1, self._c.errors, _SENDING)
            try:
                ex = await self._client.exchange(request, intended_ns if paced else None)
                if ex.withdrawn:
                    return None
                if ex.interrupted:
                    failure = INTERRUPTED
            except Exception as exc:  # a harness bug must not stop the run; it is recorded
                failure = f"{type(exc).__name__}: {exc}"
            done = _Done(rid, rep, seq, phase, index, user, intended_ns, prepared, ex, failure, attempt=attempt,
                         retry_of=first_rid, slot_ns=slot_ns if attempt == 0 else None)
            rejected = ex is not None and failure is None and ex.status in (429, 503)
            wait_s = self._load.on_reject.wait_s(ex.retry_after, attempt) if rejected and ex is not None else None
            if wait_s is None or self._stop.is_set():
                return done
            self._queue(done)
            first_rid = rid if first_rid is None else first_rid
            attempt += 1
            intended_ns, paced = _now() + int(wait_s * 1e9), True
            await self._sleep_until(intended_ns - ARM_NS)
            if self._stop.is_set():
                return None

    def _check(self, prepared: PreparedRequest, summary: StreamSummary) -> tuple[str | None, str]:
        expect = prepared.expect
        assert expect is not None
        if expect.kind == "json_schema":
            return check_json(summary.content, summary.finish_reason, expect.schema or {})
        return check_tool_call(summary.content, summary.tool_calls, expect.tools or [], expect.tool)

    def _record(self, done: _Done) -> None:
        """One finished exchange as one requests.parquet row (and its events as chunks rows)."""
        ex, failure = done.ex, done.failure
        row = self._planned_fields(done)
        context_tokens = self._session_fields(done, row)
        if ex is None or failure is not None:
            row.update(outcome="interrupted" if failure == INTERRUPTED else "client_error",
                       error=None if failure is None else scrub(failure), end_ns=_now() - self._t0)
            if ex is not None:
                row.update(sent_ns=self._rel(ex.sent_ns), first_byte_ns=self._rel(ex.first_byte_ns),
                           http_status=ex.status or None, n_chunks=len(ex.sse))
        else:
            summary, outcome, error = done.judged or judge(ex, self._api, done.prepared.max_tokens_is_target,
                                                           done.prepared.max_tokens, done.prepared.n_inputs)
            row.update(
                sent_ns=self._rel(ex.sent_ns), first_byte_ns=self._rel(ex.first_byte_ns), end_ns=self._rel(ex.end_ns),
                connect_ns=ex.connect_ns if ex.new_connection else None, new_connection=ex.new_connection,
                resent=ex.resent, http_status=ex.status or None, outcome=outcome, timeout_kind=ex.timeout_kind,
                error=None if error is None else scrub(error), retry_after=ex.retry_after, n_chunks=len(ex.sse),
            )
            if summary is not None:
                self._answer_fields(done, summary, outcome, context_tokens, row)
                if summary.whole:
                    row["n_chunks"] = 1
                    self._chunks.append_columns(self._body_columns(done.rid, ex), 1)
                else:
                    self._chunks.append_columns(self._chunk_columns(done.rid, ex, summary), len(ex.sse))
        self._requests.append_row(row)
        self._count(row, ex, failure)

    def _rel(self, t_ns: int) -> int | None:
        """A perf_counter time on the run clock (ns since t0); None for an event that never came."""
        return t_ns - self._t0 if t_ns else None

    def _planned_fields(self, done: _Done) -> dict[str, object]:
        """What was planned for the request, known before it was sent."""
        prepared = done.prepared
        row: dict[str, object] = {
            "request_id": done.rid, "attempt": done.attempt, "retry_of": done.retry_of,
            "repetition": done.rep, "seq": done.seq, "phase": done.phase,
            "request_index": done.index, "user": done.user, "intended_ns": done.intended_ns - self._t0,
            "slot_ns": None if done.slot_ns is None else done.slot_ns - self._t0,
            "max_tokens": prepared.max_tokens, "max_tokens_is_target": prepared.max_tokens_is_target,
            "input_tokens_target": prepared.input_tokens_target, "input_tokens_client": prepared.input_tokens_client,
            "output_tokens_target": prepared.output_tokens_target, "prompt_sha256": prepared.prompt_sha256,
            "prompt_chars": len(prepared.prompt),
        }
        if self._full_text:
            row["prompt"] = prepared.prompt
        if prepared.shape is not None:
            row["shape"] = prepared.shape
        if prepared.n_inputs is not None:
            row["n_inputs"] = prepared.n_inputs
        if prepared.audio_ms is not None:
            row["audio_ms"] = prepared.audio_ms
        if prepared.expect is not None:
            row["check"] = prepared.expect.kind
            row["check_result"] = "not_checked"
        return row

    def _session_fields(self, done: _Done, row: dict[str, object]) -> int | None:
        """A session turn's place and context; returns its context tokens (our count) so far."""
        turn = done.prepared.turn
        if turn is None:
            return None
        row.update(session=turn.session, turn=turn.turn, session_turns=turn.turns, context_messages=2 * turn.turn + 1)
        if self._count_tokens is None:
            return None
        # earlier turns' counts carried forward: re-encoding a long history here would stall the loop
        context_tokens = (self._context.pop((done.rep, done.seq), 0) if turn.turn else 0) + (
            done.prepared.input_tokens_client or 0)
        row["context_tokens_client"] = context_tokens
        return context_tokens

    def _answer_fields(self, done: _Done, summary: StreamSummary, outcome: str, context_tokens: int | None,
                       row: dict[str, object]) -> None:
        """What the answer said: token times and counts, its check, its text."""
        times, t0, prepared = done.ex.sse.times_ns if done.ex else None, self._t0, done.prepared
        assert times is not None

        def at(index: int | None) -> int | None:
            return None if index is None else int(times[index]) - t0

        row.update(
            first_token_ns=at(summary.first_token), first_content_ns=at(summary.first_content),
            last_token_ns=at(summary.last_token), finish_reason=summary.finish_reason,
            prompt_tokens=summary.prompt_tokens, completion_tokens=summary.completion_tokens,
            reasoning_tokens=summary.reasoning_tokens, cached_tokens=summary.cached_tokens,
            n_token_chunks=summary.n_token_chunks,
            response_sha256=hashlib.sha256(summary.content.encode()).hexdigest(), response_chars=len(summary.content),
        )
        if self._count_tokens is not None and summary.n_results is None:  # a pooling answer generates none
            row["completion_tokens_client"] = self._count_tokens(summary.content + summary.reasoning)
            if summary.reasoning:
                row["reasoning_tokens_client"] = self._count_tokens(summary.reasoning)
            turn = prepared.turn
            if turn is not None and turn.next_index >= 0 and context_tokens is not None:
                self._context[(done.rep, done.seq)] = context_tokens + self._count_tokens(summary.content)
        if summary.n_results is not None:
            row.update(n_results=summary.n_results, embedding_dim=summary.dimension)
        if summary.completion_tokens is not None:
            row["tokens_source"] = "server"
        elif row.get("completion_tokens_client") is not None:
            row["completion_tokens"] = row["completion_tokens_client"]
            row["tokens_source"] = "client"
        if prepared.expect is not None and outcome in SUCCESS_OUTCOMES:
            category, reason = self._check(prepared, summary)
            row["check_result"] = category or "passed"
            row["check_reason"] = reason
        if self._full_text:
            row["response_text"] = scrub(summary.content)
            row["reasoning_text"] = scrub(summary.reasoning) if summary.reasoning else None
            if summary.tool_calls:
                row["tool_calls"] = scrub(orjson.dumps(summary.tool_calls).decode())

    def _count(self, row: dict[str, object], ex: Exchange | None, failure: str | None) -> None:
        """Progress counters, and the endpoint taken as gone after too many failed connects."""
        if ex is not None and not ex.first_byte_ns and ex.new_connection and failure is None:
            self._connect_failures += 1
            if self._connect_failures >= _MAX_CONNECT_FAILURES and self.abort_reason is None:
                self.abort_reason = f"{_MAX_CONNECT_FAILURES} connection attempts in a row failed: {ex.error}"
                self._stop.set()
        else:
            self._connect_failures = 0
        self._c.done += 1
        if row["outcome"] not in SUCCESS_OUTCOMES:
            self._c.errors += 1
        if self._progress is not None:
            self._progress.update(self._c.done, self._client.in_flight, self._c.errors, row)

    def _chunk_columns(self, rid: int, ex: Exchange, summary: StreamSummary) -> dict[str, Any]:
        """The answer's chunks rows, one piece per column (Arrow once per part, not per answer)."""
        sse = ex.sse
        n = len(sse)
        kinds = np.frombuffer(summary.kinds, dtype=np.int8) if n else np.zeros(0, np.int8)
        events = [sse.event_names.get(i) for i in range(n)] if sse.event_names else [None] * n
        data = sse.data_piece(scrub_bytes if has_secret(sse.body()) else None) if self._full_text else [None] * n
        request_id = np.empty(n, dtype=np.int64)
        request_id.fill(rid)  # np.full is a Python function around these two calls
        return {"request_id": request_id, "seq": _SEQ[:n] if n <= len(_SEQ) else np.arange(n, dtype=np.int32),
                "recv_ns": sse.times_ns - self._t0, "kind": kinds, "token_bearing": _TOKEN_BEARING[kinds],
                "n_chars": np.frombuffer(summary.n_chars, dtype=np.int32) if n else np.zeros(0, np.int32),
                "event": events, "data": data}

    def _body_columns(self, rid: int, ex: Exchange) -> dict[str, Any]:
        """A whole-body answer's one chunks row (kind `body`), timed at its last byte."""
        body = ex.sse.body()
        data = (scrub_bytes(body) if has_secret(body) else body) if self._full_text else None
        return {"request_id": np.array([rid], np.int64), "seq": _SEQ[:1], "recv_ns": np.array([ex.end_ns - self._t0]),
                "kind": np.array([ChunkKind.BODY], np.int8), "token_bearing": np.zeros(1, bool),
                "n_chars": np.array([len(body)], np.int32), "event": [None], "data": [data]}

    def _pool_index(self, entry: int) -> int:
        """The pool index of a schedulable entry (a request, or a session's first turn)."""
        return self._entries[entry] if self._entries is not None else entry

    def _spawn(self, coro: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _drain(self) -> None:
        """Wait for in-flight requests; on stop, abort them so they are recorded as interrupted."""
        while self._tasks:
            stop_wait = asyncio.ensure_future(self._stop.wait())
            done, _ = await asyncio.wait(
                [*self._tasks, stop_wait], return_when=asyncio.FIRST_COMPLETED
            )
            if stop_wait in done:
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                return
            stop_wait.cancel()

    # -- open loop ----------------------------------------------------------------------------
    async def _sleep_until(self, deadline_ns: int) -> None:
        """Wait, on the loop's own (millisecond) timers, until about `deadline_ns` or the stop:
        only for arming; the send's own time is kept by the pacer. A wait under
        `_STOP_HEARD_NS` is a plain sleep (the stop is checked after it): waiting on the stop
        too costs a task and a timeout per request, a tenth of a request's whole cost at
        thousands a second."""
        wait_ns = deadline_ns - _now()
        if wait_ns <= 0:
            return
        if wait_ns < _STOP_HEARD_NS:
            await asyncio.sleep(wait_ns / 1e9)
            return
        try:
            await asyncio.wait_for(self._stop.wait(), wait_ns / 1e9)
        except TimeoutError:
            pass

    async def _open_loop(self, result: RepetitionResult, start_ns: int | None) -> None:
        share = self._share
        cap = share.part(self._load.concurrency) if self._load.concurrency else None
        slots = asyncio.Semaphore(cap) if cap else None
        start_ns = start_ns if start_ns is not None else _now() + START_LEAD_NS
        offsets = self._offsets

        def release_slot(_task: asyncio.Task[None]) -> None:
            assert slots is not None
            slots.release()

        n_warmup = self._schedule.n_warmup
        warmups: list[asyncio.Task[None]] = []
        held_until = 0  # when the in-flight cap last let the pacer go after holding it
        for seq in range(share.worker, len(offsets), share.workers):
            if seq >= n_warmup and warmups and self._load.warmup.barrier:
                # the measured schedule starts once warm-up has drained, its gaps kept
                drained = asyncio.ensure_future(asyncio.wait(warmups))
                stop_wait = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait([drained, stop_wait], return_when=asyncio.FIRST_COMPLETED)
                stop_wait.cancel()
                drained.cancel()
                if self._stop.is_set():
                    break
                start_ns = max(start_ns, _now() + START_LEAD_NS - int(offsets[seq]))
                warmups.clear()
            deadline = start_ns + int(offsets[seq])
            if deadline - ARM_NS - _now() > _ARM_EARLY_NS:  # else armed now, up to _ARM_EARLY_NS early
                await self._sleep_until(deadline - ARM_NS)
            if self._stop.is_set():
                break
            slot_ns = None
            if slots is not None:
                full = slots.locked()  # every slot taken: this request waits for the cap, not the pacer
                await slots.acquire()
                if full:
                    held_until = _now()
                # held by the cap after it was due, waiting itself or behind an earlier request that
                # waited (the pacer goes in order): the delay until the cap let go is the cap's
                slot_ns = held_until if held_until > deadline else None
                if self._stop.is_set():
                    break
            phase = self._phases[seq]
            index = self._pool_index(int(self._indexes[seq]))
            task = self._spawn(self._one(result.repetition, seq, phase, index, None, deadline, True, slot_ns))
            if seq < n_warmup:
                warmups.append(task)
            if slots is not None:
                task.add_done_callback(release_slot)
            result.sent += 1
        await self._drain()

    # -- closed loop --------------------------------------------------------------------------
    async def _closed_loop(self, result: RepetitionResult) -> None:
        assert self._load.concurrency is not None
        n_sched = self._schedule.table.num_rows
        pool = self._schedule.pool_size
        n_warmup = self._schedule.n_warmup
        window_ns = self._schedule.window_ns
        share = self._share
        counter = iter(range(share.worker, 1 << 62, share.workers))  # this worker's seqs
        window_end_ns: list[int] = []  # set when the first measured request of a timed window goes
        warmup_left = [len(range(share.worker, n_warmup, share.workers))]  # unanswered warm-up (the barrier waits)
        warmed = asyncio.Event()
        if warmup_left[0] == 0 or not self._load.warmup.barrier:
            warmed.set()

        async def user(u: int) -> None:
            while not self._stop.is_set():
                seq = next(counter)
                if seq >= n_warmup and not warmed.is_set():
                    await warmed.wait()  # the barrier: every warm-up answer is in
                now = _now()
                if window_ns is None:
                    if seq >= n_sched:
                        return
                    phase = self._phases[seq]
                elif seq < n_warmup:
                    phase = "warmup"
                else:
                    if not window_end_ns:
                        window_end_ns.append(now + window_ns)
                    if now >= window_end_ns[0]:
                        return
                    phase = "measure"
                result.sent += 1
                await self._one(result.repetition, seq, phase, self._pool_index(seq % pool), u, now, False)
                if phase == "warmup":
                    warmup_left[0] -= 1
                    if warmup_left[0] == 0:
                        warmed.set()

        users = [self._spawn(user(u)) for u in range(share.worker, self._load.concurrency, share.workers)]
        stop_wait: asyncio.Future[bool] = asyncio.ensure_future(self._stop.wait())
        all_users: asyncio.Future[list[None]] = asyncio.gather(*users)
        # a stop cancels the users, and the gathering future then holds a CancelledError that asyncio
        # would print as "exception was never retrieved", with a traceback, when it is collected
        all_users.add_done_callback(lambda done: done.cancelled() or done.exception())
        waiting: list[asyncio.Future[Any]] = [all_users, stop_wait]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._stop.is_set():
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        stop_wait.cancel()
        result.pool_cycles = max(0, (result.sent - 1) // pool) if pool else 0
