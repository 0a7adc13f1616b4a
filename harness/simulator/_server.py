"""The simulator's HTTP/1.1 server: an asyncio Protocol with httptools request parsing."""

from __future__ import annotations

import asyncio
import base64
import math
import os
import random
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httptools
import numpy as np
import orjson

from harness.simulator._formats import format_reply
from harness.simulator._kinds import (
    audio_tokens,
    chat_view,
    clip_of,
    pooling_answer,
    typed_end,
    typed_start,
    typed_token,
)
from harness.simulator._script import Reply, _pieces, scripted_reply

__all__ = ["FaultKind", "SimConfig", "serve", "start_in_thread"]

FaultKind = Literal["disconnect", "malformed", "stall", "error_event", "http500", "reject", "flood", "huge_event",
                    "echo_auth", "echo_slice", "huge_headers"]
_now = time.perf_counter_ns


@dataclass
class SimConfig:
    """Scripted behaviour. Delays in ms; `*_jitter_ms` > 0 draws each delay from a gamma
    distribution with that standard deviation around the mean (seeded by `seed`).

    `faults` maps a fault kind to k: every k-th request (1-based count) gets that fault.
    `eos_after_tokens`: stop with finish_reason "stop" after that many tokens unless the request
    sets `ignore_eos` (None: always run to max_tokens). `drop_reused`: close, without a byte,
    any request that arrives on a connection that already served one (a keep-alive connection
    the server has given up on, as llama-server does after each stream). `slots`: at most that
    many requests generate at once; the others wait in arrival order (as llama-server's slots do),
    so offered load above slots / service time queues up: a known saturation point for sweeps.
    `script` / `forget_history`: scripted replies (see `_script.py`) for canary tests;
    `wrong_rate`: each scripted reply is garbled with this chance, whatever the load (an engine
    as often wrong alone as loaded: the A/A case of accuracy under load);
    `garble_above`: a request that arrives while at least that many others stream gets its
    scripted reply garbled (an engine whose answers degrade under load). GET /metrics answers
    in vLLM's metric names (so the sampler's normalization is tested end to end): requests
    running and waiting, KV usage = running / slots, token counters; `metrics_delay_s` makes
    it slow. Structured-output and tool requests get a minimal valid answer (see `_formats.py`)
    unless `ignore_formats`. Hostile faults: `flood` (body bytes without a line end, forever),
    `huge_event` (one event of `huge_event_mib` MiB), `echo_slice` (401 quoting the credential
    without its scheme and cut at both ends), `echo_auth` (401 quoting the request's
    Authorization header), `huge_headers` (a 200 whose header block never ends); `endless_path`:
    a GET of that path answers with a body that never ends.
    `prefix_cache`: a prompt seen before (with the same `cache_salt`, vLLM's field) is served
    from a cache: usage reports all its tokens but the last as `prompt_tokens_details.
    cached_tokens` and its first token comes after `cached_ttft_factor` of the scripted TTFT;
    POST /reset_prefix_cache (vLLM's) empties it. Without it, that path answers 404.
    POST /tokenize (llama.cpp's `content` or vLLM's `prompt`) counts
    whitespace-separated words, as prompt_tokens does; an image part (a PNG data URL) counts one
    token per 28x28 patch of the size its header declares (as vision encoders charge), so a test
    can tell that the image arrived whole. GET /version answers `{"version", "build"}`, `build`
    as given (a stand-in for an engine's build, which the identity probe reads).
    """

    ttft_ms: float = 20.0
    itl_ms: float = 5.0
    ttft_jitter_ms: float = 0.0
    itl_jitter_ms: float = 0.0
    seed: int = 0
    model: str = "sim-model"
    max_concurrency: int | None = None
    retry_after_s: int = 1
    faults: dict[str, int] = field(default_factory=dict)
    fault_after_chunks: int = 3
    stall_s: float = 2.0
    eos_after_tokens: int | None = None
    usage_in_stream: bool = True
    drop_reused: bool = False
    slots: int | None = None
    script: list[dict[str, Any]] = field(default_factory=list)
    forget_history: bool = False
    garble_above: int | None = None
    wrong_rate: float = 0.0  # a scripted reply is garbled with this chance (seeded), load or not
    metrics_delay_s: float = 0.0
    counter_value: str | None = None  # every counter reported as this text (NaN, +Inf: a hostile /metrics)
    ignore_formats: bool = False
    huge_event_mib: int = 32
    endless_path: str | None = None
    prefix_cache: bool = False
    cached_ttft_factor: float = 0.2
    die_after: int | None = None  # the process exits (code 3) on receiving this many generation requests
    build: str = "dev"  # what GET /version says this build is (a release manager's builds, for ledger tests)
    # After a first chunk of one token (the prefill's), unscripted answers carry this many tokens
    # a chunk, one ITL apart, as speculative decoding sends them (`sim.tokens` says how many).
    tokens_per_chunk: int = 1
    embedding_dim: int = 64  # the length of /v1/embeddings vectors (see _kinds.py for the other kinds)
    api_key: str | None = None  # POSTs without `Authorization: Bearer <api_key>` get 401 (never quoting it)


class _State:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.wrong_rng = random.Random(config.seed)  # wrong_rate's draws, apart from the timing's
        self.count = 0
        self.active = 0
        self.slots = asyncio.Semaphore(config.slots) if config.slots else None
        self.waiting = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished: dict[str, int] = {"stop": 0, "length": 0}  # streams sent to their end, by finish reason
        self.cached: set[bytes] = set()  # prompts (with their salt) the prefix cache holds
        self.conversations: dict[str, list[dict[str, Any]]] = {}  # Responses API state, by response id

    def metrics_text(self) -> bytes:
        capacity = self.config.slots or 64
        counted = self.config.counter_value
        lines = [
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running {self.active}",
            "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting {self.waiting}",
            "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc {min(1.0, self.active / capacity)}",
            "# TYPE vllm:prompt_tokens counter", f"vllm:prompt_tokens_total {counted or self.prompt_tokens}",
            "# TYPE vllm:generation_tokens counter",
            f"vllm:generation_tokens_total {counted or self.generation_tokens}",
            "# TYPE vllm:request_success counter",
            *(f'vllm:request_success_total{{finished_reason="{reason}"}} {counted or n}'
              for reason, n in sorted(self.finished.items())),
        ]
        return ("\n".join(lines) + "\n").encode()

    def delay_s(self, mean_ms: float, jitter_ms: float) -> float:
        if jitter_ms <= 0 or mean_ms <= 0:
            return mean_ms / 1000.0
        shape = (mean_ms / jitter_ms) ** 2
        return float(self.rng.gamma(shape, mean_ms / shape)) / 1000.0

    def fault_for(self, n: int) -> str | None:
        for kind, every in self.config.faults.items():
            if every > 0 and n % every == 0:
                return kind
        return None


def _scripted_delta(reply: Reply, i: int) -> dict[str, Any]:
    """Token i of a scripted reply: a text piece, or a piece of its tool call (name, then the
    arguments in two halves)."""
    if i < reply.n_reasoning:
        return {"reasoning_content": reply.pieces[i]}
    if i < len(reply.pieces):
        return {"content": reply.pieces[i]}
    call = reply.tool_call or {}
    k = i - len(reply.pieces)
    arguments = str(call.get("arguments", ""))
    half = len(arguments) // 2
    if k == 0:
        return {"tool_calls": [{"index": 0, "id": "call-0", "type": "function",
                                "function": {"name": call.get("name", ""), "arguments": ""}}]}
    piece = arguments[:half] if k == 1 else arguments[half:]
    return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


def _image_tokens(url: str) -> int:
    """Patches of 28x28 in a PNG data URL's declared size (0 when it is not a readable PNG)."""
    try:
        png = base64.b64decode(url.split(",", 1)[1][:64])
    except (ValueError, IndexError):
        return 0
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return 0
    width, height = struct.unpack(">II", png[16:24])
    return int(math.ceil(width / 28) * math.ceil(height / 28))


def _message_tokens(message: dict[str, Any]) -> int:
    """Words of a chat message's text, plus its images' patches."""
    content = message.get("content")
    if not isinstance(content, list):
        return len(str(content or "").split())
    total = 0
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            total += len(str(part.get("text", "")).split())
        elif isinstance(part, dict) and part.get("type") == "image_url":
            total += _image_tokens(str((part.get("image_url") or {}).get("url", "")))
    return total


_GENERATING = {b"/v1/chat/completions": "chat", b"/v1/completions": "completions", b"/v1/responses": "responses",
               b"/v1/messages": "anthropic_messages", b"/v1/audio/transcriptions": "audio_transcriptions"}
_POOLING = {b"/v1/embeddings": "embeddings", b"/v1/rerank": "rerank", b"/v1/score": "score"}


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


@dataclass(frozen=True)
class _Answer:
    """One streamed answer, decided before its first byte."""

    chat: bool
    rid: str
    dialect: str  # chat, completions, responses, anthropic_messages or audio_transcriptions
    n_tokens: int
    finish: str
    reply: Reply | None
    prompt_tokens: int
    include_usage: bool
    fault: str | None
    recv_ns: int
    cached_tokens: int = 0
    history: tuple[dict[str, Any], ...] = ()  # a Responses request's conversation, stored under rid


class _SimProtocol(asyncio.Protocol):
    def __init__(self, state: _State) -> None:
        self.state = state
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body = bytearray()
        self.authorization = ""
        self.content_type = ""
        self.closed = False
        self.served = 0
        self.queue: asyncio.Queue[tuple[bytes, bytes, bytes, int, str]] = asyncio.Queue()
        self.worker = asyncio.get_running_loop().create_task(self._work())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.worker.cancel()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._write_simple(400, b'{"error":{"message":"bad request","code":400}}', close=True)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"authorization":
            self.authorization = value.decode("latin-1")
        elif name.lower() == b"content-type":
            self.content_type = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        self.queue.put_nowait((method, bytes(self.url), bytes(self.body), _now(), self.content_type))
        self.url = b""
        self.body = bytearray()

    def _write_simple(self, status: int, body: bytes, close: bool = False,
                      extra: str = "", content_type: str = "application/json") -> None:
        if self.transport is None or self.closed:
            return
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error"}.get(status, "Status")
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n{extra}")
        if close:
            head += "Connection: close\r\n"
        self.transport.write(head.encode() + b"\r\n" + body)
        if close:
            self.transport.close()

    async def _work(self) -> None:
        while True:
            method, url, body, recv_ns, content_type = await self.queue.get()
            path = url.split(b"?")[0]
            if method == b"GET" and path.decode() == self.state.config.endless_path:
                await self._trickle()
            elif method == b"GET" and path in (b"/health", b"/v1/health"):
                self._write_simple(200, b'{"status":"ok"}')
            elif method == b"GET" and path == b"/metrics":
                if self.state.config.metrics_delay_s:
                    await asyncio.sleep(self.state.config.metrics_delay_s)
                self._write_simple(200, self.state.metrics_text(), content_type="text/plain; version=0.0.4")
            elif method == b"GET" and path == b"/version":
                version = {"version": "passport-simulator", "build": self.state.config.build}
                self._write_simple(200, orjson.dumps(version))
            elif method == b"GET" and path == b"/v1/models":
                payload = {"object": "list", "data": [
                    {"id": self.state.config.model, "object": "model", "owned_by": "passport-sim"}]}
                self._write_simple(200, orjson.dumps(payload))
            elif method == b"POST" and path == b"/reset_prefix_cache" and self.state.config.prefix_cache:
                self.state.cached.clear()
                self._write_simple(200, b"{}")
            elif method == b"POST" and path == b"/tokenize":
                try:
                    req = orjson.loads(body)
                    text = str(req.get("content", req.get("prompt", "")))
                except (orjson.JSONDecodeError, AttributeError):
                    self._write_simple(400, b'{"error":{"message":"invalid JSON body","code":400}}')
                    return
                n = len(text.split())
                self._write_simple(200, orjson.dumps({"tokens": list(range(n)), "count": n}))
            elif (method == b"POST" and self.state.config.api_key is not None
                  and self.authorization != f"Bearer {self.state.config.api_key}"):
                self._write_simple(401, b'{"error":{"message":"missing or wrong API key","code":401}}')
            elif method == b"POST" and path in _GENERATING:
                if self.served and self.state.config.drop_reused:
                    assert self.transport is not None
                    self.transport.close()
                    return
                self.served += 1
                await self._generate(_GENERATING[path], body, recv_ns, content_type)
            elif method == b"POST" and path in _POOLING:
                await self._pool(_POOLING[path], body, recv_ns)
            else:
                self._write_simple(404, b'{"error":{"message":"not found","code":404}}')

    async def _pool(self, api: str, raw: bytes, recv_ns: int) -> None:
        """A pooling answer, whole, the scripted TTFT and an ITL per input past the first after
        the request arrived (the answer's own making counts against that time)."""
        state, cfg = self.state, self.state.config
        arrived_s = asyncio.get_running_loop().time() - (_now() - recv_ns) / 1e9
        try:
            req = orjson.loads(raw)
            answer, n, tokens = pooling_answer(api, req, cfg.model, cfg.embedding_dim)
        except (orjson.JSONDecodeError, AttributeError, TypeError):
            self._write_simple(400, b'{"error":{"message":"invalid request body","code":400}}')
            return
        state.count += 1
        if cfg.max_concurrency is not None and state.active >= cfg.max_concurrency:
            self._write_simple(429, b'{"error":{"message":"overloaded","code":429}}',
                               extra=f"Retry-After: {cfg.retry_after_s}\r\n")
            return
        state.active += 1
        state.prompt_tokens += tokens
        try:
            delay_s = state.delay_s(cfg.ttft_ms, cfg.ttft_jitter_ms) + sum(
                state.delay_s(cfg.itl_ms, cfg.itl_jitter_ms) for _ in range(max(0, n - 1)))
            await asyncio.sleep(max(0.0, arrived_s + delay_s - asyncio.get_running_loop().time()))
            answer["sim"] = {"recv_ns": recv_ns, "sent_ns": _now()}
            self._write_simple(200, orjson.dumps(answer))
            state.finished["stop"] += 1  # as vLLM counts a pooling request's end
        finally:
            state.active -= 1

    async def _generate(self, dialect: str, raw: bytes, recv_ns: int, content_type: str = "") -> None:
        state, cfg = self.state, self.state.config
        try:
            if dialect == "audio_transcriptions":
                seconds, transcript, fields = clip_of(raw, content_type)
                req: dict[str, Any] = {**fields, "audio_s": seconds, "transcript": transcript}
            else:
                req = orjson.loads(raw)
                if dialect in ("responses", "anthropic_messages"):
                    req = chat_view(dialect, req, state.conversations)
        except (orjson.JSONDecodeError, ValueError, AttributeError, TypeError):
            self._write_simple(400, b'{"error":{"message":"invalid request body","code":400}}')
            return
        state.count += 1
        if cfg.die_after is not None and state.count >= cfg.die_after:
            os._exit(3)  # an engine crashing mid-run: no answer, no goodbye
        fault = state.fault_for(state.count)
        if fault == "reject" or (cfg.max_concurrency is not None and state.active >= cfg.max_concurrency):
            self._write_simple(429, b'{"error":{"message":"overloaded","code":429}}',
                               extra=f"Retry-After: {cfg.retry_after_s}\r\n")
            return
        if fault == "http500":
            self._write_simple(500, b'{"error":{"message":"simulated failure","code":500}}')
            return
        if fault == "huge_headers":  # header lines, and more, never a blank line
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 200 OK\r\n")
            while not self.closed:
                await self._pour(b"X-Padding: " + b"p" * 8000 + b"\r\n", framed=False)
            return
        if fault == "echo_auth":  # a careless gateway that quotes the request back
            self._write_simple(401, orjson.dumps({"error": {"message": f"bad key in Authorization: "
                                                                       f"{self.authorization}", "code": 401}}))
            return
        if fault == "echo_slice":  # one that quotes a cut of the credential, without its scheme
            token = (self.authorization or "").split()[-1] if self.authorization else ""
            self._write_simple(401, orjson.dumps({"error": {"message": f"rejected credential ...{token[3:-3]}...",
                                                            "code": 401}}))
            return
        answer = self._answer(req, dialect, state.count, fault, recv_ns)
        state.prompt_tokens += answer.prompt_tokens
        if state.slots is not None:
            state.waiting += 1
            await state.slots.acquire()
            state.waiting -= 1
        state.active += 1
        try:
            await self._stream(answer)
        finally:
            state.active -= 1
            if state.slots is not None:
                state.slots.release()

    def _answer(self, req: dict[str, Any], dialect: str, n: int, fault: str | None, recv_ns: int) -> _Answer:
        """How many tokens to send, what they say and how the stream ends."""
        state, cfg = self.state, self.state.config
        chat = dialect != "completions"
        if dialect == "audio_transcriptions":  # as long as the clip's speech, or its transcript
            transcript = req.get("transcript")
            reply = Reply(_pieces(transcript)) if transcript else None
            n_tokens = len(reply.pieces) if reply else audio_tokens(float(req["audio_s"]))
            return _Answer(True, f"sim-{n}", dialect, n_tokens, "stop", reply, 0, True, fault, recv_ns)
        max_tokens = int(req.get("max_tokens") or 16)
        n_tokens = max_tokens
        finish = "length"
        if cfg.eos_after_tokens is not None and not req.get("ignore_eos") and cfg.eos_after_tokens < max_tokens:
            n_tokens, finish = cfg.eos_after_tokens, "stop"
        reply = scripted_reply(cfg.script, req, chat, cfg.forget_history) if cfg.script else None
        if reply is None and not cfg.ignore_formats:
            reply = format_reply(req)
        garble = cfg.garble_above is not None and state.active >= cfg.garble_above
        if reply is not None and cfg.wrong_rate > 0 and cfg.script:
            garble = garble or state.wrong_rng.random() < cfg.wrong_rate
        if reply is not None and garble:
            reply = Reply(["garbled " for _ in reply.pieces], None)
        if reply is not None:
            n_reply = len(reply.pieces) + (3 if reply.tool_call else 0)
            n_tokens = min(max_tokens, n_reply)
            finish = "tool_calls" if reply.tool_call and n_reply <= max_tokens else (
                "stop" if n_reply < max_tokens else "length")
        prompt_tokens = (len(str(req.get("prompt", "")).split()) if not chat
                         else sum(_message_tokens(m) for m in req.get("messages", []) if isinstance(m, dict)))
        include_usage = bool((req.get("stream_options") or {}).get("include_usage")) and cfg.usage_in_stream
        cached = 0
        if cfg.prefix_cache:
            key = orjson.dumps([req.get("cache_salt"), req.get("prompt"), req.get("messages")])
            cached = max(0, prompt_tokens - 1) if key in state.cached else 0
            state.cached.add(key)
        if dialect in ("responses", "anthropic_messages"):
            include_usage = True  # these APIs always report usage
        history = tuple(req.get("messages") or ()) if dialect == "responses" else ()
        return _Answer(chat, f"sim-{n}", dialect, n_tokens, finish, reply, prompt_tokens, include_usage, fault,
                       recv_ns, cached, history)

    async def _pour(self, data: bytes, framed: bool = True) -> None:
        """Write `data` (as a body chunk unless not `framed`), waiting while the client's socket is full."""
        assert self.transport is not None
        if self.transport.is_closing():
            self.closed = True
            return
        self.transport.write(_chunk(data) if framed else data)
        await asyncio.sleep(0)  # always yield, so a hang-up (connection_lost) is seen
        while self.transport.get_write_buffer_size() > 1 << 20 and not self.closed:
            await asyncio.sleep(0.001)

    async def _trickle(self) -> None:
        """An answer whose body never ends: headers at once, then 1 KiB every 10 ms (100 KiB/s)."""
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        self.transport.write(_chunk(b'{"data": ['))
        while not self.closed:
            await asyncio.sleep(0.01)
            await self._pour(b" " * 1024)

    async def _fault(self, fault: str) -> bool:
        """Play a fault at its chunk; True when the stream ends there."""
        assert self.transport is not None
        if fault == "flood":  # bytes without a line end, until the client hangs up
            block = b"x" * 65536
            while not self.closed:
                await self._pour(block)
            return True
        if fault == "huge_event":  # one event far larger than any engine sends, then the stream goes on
            await self._pour(b'data: {"choices": [{"index": 0, "delta": {"content": "')
            for _ in range(self.state.config.huge_event_mib):
                await self._pour(b"y" * (1 << 20))
            await self._pour(b'"}, "finish_reason": null}]}\n\n')
            return self.closed
        if fault == "disconnect":
            self.transport.close()
            return True
        if fault == "malformed":
            self.transport.write(_chunk(b'data: {"choices": [{"delta": {"content": "x"\n\n'))
        elif fault == "error_event":
            self._send_event({"error": {"message": "simulated mid-stream failure", "type": "server_error",
                                        "code": 500}})
            self.transport.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            return True
        elif fault == "stall":
            await asyncio.sleep(self.state.config.stall_s)
        return self.closed

    async def _stream_typed(self, a: _Answer) -> None:
        """A Responses or Messages stream: the chat stream's tokens and timing in typed events."""
        state, cfg = self.state, self.state.config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + state.delay_s(cfg.ttft_ms, cfg.ttft_jitter_ms) * (
            cfg.cached_ttft_factor if a.cached_tokens else 1.0)
        for event in typed_start(a.dialect, a.rid, a.prompt_tokens, a.cached_tokens):
            self._send_typed(event)
        said: list[str] = []
        for i in range(a.n_tokens):
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            if self.closed or (a.fault is not None and i == cfg.fault_after_chunks and await self._fault(a.fault)):
                return
            delta: dict[str, Any] = _scripted_delta(a.reply, i) if a.reply is not None else {"content": f"tok{i} "}
            said.append(delta.get("content") or "")
            for event in typed_token(a.dialect, delta):
                self._send_typed(event, {"recv_ns": a.recv_ns, "sent_ns": _now(), "token": i, "tokens": 1})
            state.generation_tokens += 1
            deadline += state.delay_s(cfg.itl_ms, cfg.itl_jitter_ms)
        for event in typed_end(a.dialect, a.rid, a.finish, self._usage(a.prompt_tokens, a.n_tokens, a.cached_tokens)):
            self._send_typed(event)
        if a.dialect == "responses":
            state.conversations[a.rid] = [*a.history, {"role": "assistant", "content": "".join(said)}]
        assert self.transport is not None
        self.transport.write(b"0\r\n\r\n")
        state.finished[a.finish] = state.finished.get(a.finish, 0) + 1

    def _send_typed(self, event: dict[str, Any], sim: dict[str, Any] | None = None) -> None:
        if self.transport is not None and not self.closed:
            payload = orjson.dumps(event | {"sim": sim} if sim else event)
            self.transport.write(_chunk(b"event: " + event["type"].encode() + b"\ndata: " + payload + b"\n\n"))

    async def _stream(self, a: _Answer) -> None:
        state, cfg = self.state, self.state.config
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n")
        if a.dialect in ("responses", "anthropic_messages"):
            await self._stream_typed(a)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + state.delay_s(cfg.ttft_ms, cfg.ttft_jitter_ms) * (
            cfg.cached_ttft_factor if a.cached_tokens else 1.0)
        obj = ("transcription.chunk" if a.dialect == "audio_transcriptions" else "chat.completion.chunk" if a.chat
               else "text_completion")
        if a.chat:  # role-only first chunk, as real engines send
            self._send_event({"id": a.rid, "object": obj, "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}],
                "sim": {"recv_ns": a.recv_ns, "sent_ns": _now(), "token": None}})
        per_chunk = 1 if a.reply is not None else max(1, cfg.tokens_per_chunk)
        i = chunk = 0  # tokens sent, token-bearing chunks sent
        while i < a.n_tokens:
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            if self.closed or (a.fault is not None and chunk == cfg.fault_after_chunks and await self._fault(a.fault)):
                return
            carried = 1 if i == 0 else min(per_chunk, a.n_tokens - i)
            text = "".join(f"tok{j} " for j in range(i, i + carried))
            last = i + carried == a.n_tokens
            delta: dict[str, Any] = {"content": text}
            if a.reply is not None:
                delta = _scripted_delta(a.reply, i)
                text = delta.get("content") or ""
            if a.chat:
                choice = {"index": 0, "delta": delta, "finish_reason": None}
            else:
                choice = {"index": 0, "text": text, "finish_reason": a.finish if last else None}
            event: dict[str, Any] = {"id": a.rid, "object": obj, "choices": [choice],
                                     "sim": {"recv_ns": a.recv_ns, "sent_ns": _now(), "token": i, "tokens": carried}}
            if not a.chat and last and a.include_usage:
                event["usage"] = self._usage(a.prompt_tokens, a.n_tokens, a.cached_tokens)
            self._send_event(event)
            state.generation_tokens += carried
            i, chunk = i + carried, chunk + 1
            deadline += state.delay_s(cfg.itl_ms, cfg.itl_jitter_ms)
        if a.chat:
            self._send_event({"id": a.rid, "object": obj, "choices": [
                {"index": 0, "delta": {}, "finish_reason": a.finish}]})
            if a.include_usage:
                self._send_event({"id": a.rid, "object": obj, "choices": [],
                                  "usage": self._usage(a.prompt_tokens, a.n_tokens, a.cached_tokens)})
        self.transport.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        state.finished[a.finish] = state.finished.get(a.finish, 0) + 1

    def _usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if self.state.config.prefix_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
        return usage

    def _send_event(self, event: dict[str, Any]) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(_chunk(b"data: " + orjson.dumps(event) + b"\n\n"))


async def serve(config: SimConfig, host: str = "127.0.0.1", port: int = 0,
                ready: threading.Event | None = None, bound: list[int] | None = None,
                stop: asyncio.Event | None = None, ssl_context: ssl.SSLContext | None = None,
                on_bound: Callable[[int], None] | None = None, reuse_port: bool = False) -> None:
    """Serve until `stop` is set (forever when None); `bound` receives the actual port, and
    `on_bound` is called with it once the socket listens. `reuse_port`: several simulator
    processes listen on one address and the kernel spreads the connections over them (each
    keeps its own counters), for loads one process cannot serve."""
    state = _State(config)
    loop = asyncio.get_running_loop()
    # asyncio's default backlog of 100 overflowed when 10,000 users connected at once: the SYNs past
    # it waited a second to be sent again, and some connections were reset; servers in front of
    # engines listen with thousands (uvicorn 2048); the kernel caps it at net.core.somaxconn
    server = await loop.create_server(lambda: _SimProtocol(state), host, port, ssl=ssl_context, backlog=4096,
                                      reuse_port=reuse_port or None)
    if bound is not None:
        bound.append(server.sockets[0].getsockname()[1])
    if on_bound is not None:
        on_bound(server.sockets[0].getsockname()[1])
    if ready is not None:
        ready.set()
    async with server:
        if stop is None:
            await server.serve_forever()
        else:
            await stop.wait()


def start_in_thread(config: SimConfig) -> tuple[int, threading.Thread, asyncio.AbstractEventLoop, asyncio.Event]:
    """Run the simulator on its own event loop in a daemon thread; returns (port, thread, loop,
    stop event). Set the event with `loop.call_soon_threadsafe(stop.set)` to stop it."""
    ready = threading.Event()
    bound: list[int] = []
    holder: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        holder["loop"] = loop
        stop = asyncio.Event()
        holder["stop"] = stop
        loop.run_until_complete(serve(config, port=0, ready=ready, bound=bound, stop=stop))
        loop.close()

    thread = threading.Thread(target=main, name="simulator", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("simulator did not start within 10 s")
    return bound[0], thread, holder["loop"], holder["stop"]
