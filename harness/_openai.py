"""The OpenAI streaming dialect: request bodies in, per-request summaries out.

`build_body` writes the JSON for `/chat/completions` or `/completions`, always streaming with
`stream_options.include_usage` (usage arrives in a final chunk with `choices: []` on vLLM,
SGLang, TGI and llama.cpp; in the finish chunk on `/completions` and on HF-serve).

`summarize` runs once per request, after its last byte, over the raw events the SSE parser
kept: it decodes them all with one msgspec call (a JSON array of the payloads, into structs that
hold only the fields we read), classifies each, and derives first-token times, the
finish reason, usage, the text, and the outcome class. Parsing here rather than per read keeps
the receive path bare. Engine variations handled (docs/engines/research.md §5): the reasoning field as
`reasoning` or `reasoning_content`; streamed or whole-call `tool_calls`; `{"error": ...}` data
events (object or string) as failures; a missing `[DONE]` (HF-serve) is fine once a finish
reason was seen.

Outcome classes, exactly one per request:
- `ok`: HTTP 200 and a complete stream;
- `truncated`: complete, but finish_reason `length` while max_tokens was a cap, not the target;
- `rejected`: HTTP 429 or 503 (admission control), Retry-After recorded;
- `http_error`: any other non-200 status, with the body excerpt;
- `timeout`: connect / first_byte / stall / total limit hit (kind recorded);
- `stream_error`: the connection failed or closed mid-stream, malformed SSE or JSON, or an
  error event inside a 200 stream;
- `client_error`: the harness itself failed while handling the request.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import orjson

from harness._sse import SSEParser

__all__ = [
    "Api",
    "ChunkKind",
    "StreamSummary",
    "build_body",
    "summarize",
    "OUTCOMES",
    "SUCCESS_OUTCOMES",
    "classify",
    "CHUNK_KINDS",
    "ACCOUNTING_ERROR",
    "MAX_TOKEN_COUNT",
    "impossible_accounting",
    "usage_count",
    "seal",
]

# The endpoint kinds (`endpoint.api`): chat and completions here; the others' bodies and parsers in
# harness._pooling, _responses, _anthropic and _audio, and which is which in harness._kinds.
Api = Literal["chat", "completions", "embeddings", "rerank", "score", "responses", "audio_transcriptions",
              "anthropic_messages"]
# interrupted: in flight when the run was stopped (Ctrl-C, SIGTERM, a full disk): the harness cut
# it, so it is neither the server's failure nor a client error (raw data from 2026-12-04 on; earlier
# runs recorded these as client_error "run interrupted")
OUTCOMES = ("ok", "truncated", "rejected", "http_error", "timeout", "stream_error", "client_error", "interrupted")
# A request succeeded when it ended in one of these (passport.audit reads the same classes from
# requests.parquet; tests/unit/test_exports.py keeps the two in step).
SUCCESS_OUTCOMES = ("ok", "truncated")


class ChunkKind:
    """Codes for `chunks.parquet` column `kind` (also written as names, CHUNK_KINDS)."""

    EMPTY = 0  # role-only, empty delta, finish-only without text
    CONTENT = 1
    REASONING = 2
    TOOL_CALL = 3
    USAGE = 4  # usage-only chunk (choices: [])
    ERROR = 5
    DONE = 6  # the [DONE] sentinel
    MALFORMED = 7  # not JSON, or JSON of an unexpected shape
    BODY = 8  # a whole answer that is not a stream (embeddings, rerank, score), kept as one row


CHUNK_KINDS = ("empty", "content", "reasoning", "tool_call", "usage", "error", "done", "malformed", "body")


def build_body(
    api: Api,
    model: str,
    prompt: str,
    max_tokens: int,
    params: dict[str, Any],
    imported: dict[str, Any] | None = None,
) -> bytes:
    """The JSON body of one streamed request; `params` (decoding, extras) are merged last.
    `imported`: the request's own fields: messages or prompt, tools, tool_choice, response_format
    or an engine's structured-output field (a logged request's, or a traffic shape's)."""
    body: dict[str, Any] = {"model": model}
    imported = imported or {}
    if api == "chat":
        body["messages"] = imported.get("messages") or [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = imported.get("prompt") or prompt
    for key, value in imported.items():  # tools, tool_choice, response_format, an engine's own field
        if key not in ("messages", "prompt"):
            body[key] = value
    body["max_tokens"] = max_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    body.update(params)
    return orjson.dumps(body)


@dataclass
class StreamSummary:
    """What one response stream says, derived from its events (indices into the events)."""

    kinds: array[int] = field(default_factory=lambda: array("b"))
    n_chars: array[int] = field(default_factory=lambda: array("i"))
    first_token: int | None = None
    first_content: int | None = None
    last_token: int | None = None
    n_token_chunks: int = 0
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    # What made the server's own accounting impossible (a count out of range or negative, more
    # tokens than the budget or the stream allow); the request is then a stream_error.
    accounting_error: str | None = None
    events_after_done: int = 0
    # Pooling answers (harness._pooling): vectors or scores carried, the vectors' length, the
    # scores as (document index, score) by index, and the vectors when kept for a canary.
    n_results: int | None = None
    dimension: int | None = None
    scores: list[tuple[int, float]] = field(default_factory=list)
    vectors: list[list[float]] | None = None
    # The Responses API's id of this answer (the next turn's `previous_response_id`).
    response_id: str | None = None
    # The answer came as one body, not as events (its one chunks row has kind `body`).
    whole: bool = False


# A token count a column holds and no request reaches; beyond it (or below 0) a count is not one.
MAX_TOKEN_COUNT = 2**31 - 1
ACCOUNTING_ERROR = "server accounting"  # how such errors start, for the validity count


def usage_count(summary: StreamSummary, name: str, value: Any) -> int | None:
    """`value` (usage field `name`) as a token count, or None (noting why in `accounting_error`)
    when it is not one."""
    if value is None:
        return None
    if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    if summary.accounting_error is None:
        summary.accounting_error = (f"usage {name} is {str(value)[:40]}, not a token count (0 to "
                                    f"{MAX_TOKEN_COUNT:,})")
    return None


def _usage(summary: StreamSummary, usage: dict[str, Any]) -> None:
    summary.prompt_tokens = usage_count(summary, "prompt_tokens", usage.get("prompt_tokens"))
    summary.completion_tokens = usage_count(summary, "completion_tokens", usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    summary.reasoning_tokens = usage_count(summary, "reasoning_tokens",
                                      usage.get("reasoning_tokens", details.get("reasoning_tokens")))
    prompt_details = usage.get("prompt_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    summary.cached_tokens = usage_count(summary, "cached_tokens", prompt_details.get("cached_tokens"))


def _tool_calls(summary: StreamSummary, deltas: list[_ToolCall]) -> int:
    """Merge tool-call deltas (fragments or whole calls); returns characters added."""
    added = 0
    for delta in deltas:
        index = delta.index if delta.index is not None else len(summary.tool_calls)
        while len(summary.tool_calls) <= index:
            summary.tool_calls.append({"id": None, "name": "", "arguments": ""})
        call = summary.tool_calls[index]
        if delta.id:
            call["id"] = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call["name"] += function.name
                added += len(function.name)
            if function.arguments:
                call["arguments"] += function.arguments
                added += len(function.arguments)
    return added


def _error_text(error: Any) -> str:
    """An error event's message, or the event itself in short (str, not orjson: the decoder
    keeps integers past 64 bits that orjson cannot write back)."""
    if isinstance(error, dict):
        return str(error.get("message") or str(error)[:512])
    return str(error)[:512]


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct, gc=False):
    delta: _Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct, gc=False):
    """The fields of a stream chunk we read; msgspec skips every other field unallocated
    (`id`, `model`, `created`, llama.cpp's `timings`...), which is most of the decoding cost.
    `gc=False` (on all of these): they hold no cycles, so the cyclic GC need not track them."""

    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = None


_DECODE_ALL = msgspec.json.Decoder(list[_Chunk | str])
_DECODE_ONE = msgspec.json.Decoder(_Chunk | str)


def _parse_all(sse: SSEParser) -> list[Any]:
    """Every event decoded: one call over a JSON array in the common case; event by event
    (undecodable ones become None) when any event is malformed or of an unexpected shape."""
    array_bytes = sse.json_array()
    n = len(sse)
    if array_bytes is not None:
        try:
            parsed = _DECODE_ALL.decode(array_bytes)
            if len(parsed) == n:
                return parsed
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass
    out: list[Any] = []
    for payload in sse.payloads:
        if payload == b"[DONE]":
            out.append("[DONE]")
            continue
        try:
            out.append(_DECODE_ONE.decode(payload))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # nested past any limit: malformed
            out.append(None)
    return out


def summarize(sse: SSEParser, api: Api) -> StreamSummary:
    """Classify every event of a finished stream and derive the request-level fields."""
    s = StreamSummary()
    content_parts: list[str] = []
    reasoning_parts: list[str] = []
    kinds: list[int] = []
    n_chars: list[int] = []
    chat = api == "chat"
    done = False
    for i, obj in enumerate(_parse_all(sse)):
        kind, chars = ChunkKind.EMPTY, 0
        if done:  # nothing after [DONE] counts: it is kept as an empty event and counted
            s.events_after_done += 1
        elif type(obj) is not _Chunk:
            if obj == "[DONE]":
                kind = ChunkKind.DONE
                done = True
            else:
                kind = ChunkKind.MALFORMED
                if s.error is None:
                    s.error = f"malformed event {i}: {sse.payloads[i][:120]!r}"
        elif obj.error is not None:
            kind = ChunkKind.ERROR
            if s.error is None:
                s.error = f"error event: {_error_text(obj.error)}"
        else:
            choices = obj.choices
            if obj.usage:
                _usage(s, obj.usage)
            if not choices:
                if obj.usage:
                    kind = ChunkKind.USAGE
            else:
                choice = choices[0]
                if choice.finish_reason:
                    s.finish_reason = choice.finish_reason
                thought = None
                calls = None
                if chat:
                    delta = choice.delta
                    if delta is not None:
                        text = delta.content
                        thought = delta.reasoning_content or delta.reasoning
                        calls = delta.tool_calls
                    else:
                        text = None
                else:
                    text = choice.text
                if text:
                    kind, chars = ChunkKind.CONTENT, len(text)
                    content_parts.append(text)
                if thought:
                    if not text:
                        kind = ChunkKind.REASONING
                    chars += len(thought)
                    reasoning_parts.append(thought)
                if calls:
                    added = _tool_calls(s, calls)
                    if added and not text and not thought:
                        kind, chars = ChunkKind.TOOL_CALL, added
        kinds.append(kind)
        n_chars.append(chars)
    return seal(s, kinds, n_chars, content_parts, reasoning_parts)


# Chunk kinds that carry a token (CONTENT, REASONING, TOOL_CALL) as 1, every other kind as 0
_TOKEN_KINDS = bytes(1 if k in (ChunkKind.CONTENT, ChunkKind.REASONING, ChunkKind.TOOL_CALL) else 0
                     for k in range(256))


def seal(s: StreamSummary, kinds: list[int], n_chars: list[int], content: list[str],
         reasoning: list[str]) -> StreamSummary:
    """Finish a summary from its per-event kinds and sizes: the first and last token-carrying
    events, the first content event and their count come from the kinds (byte searches, no
    Python loop); the texts are joined. Shared by every streaming parser."""
    s.kinds = array("b", kinds)
    s.n_chars = array("i", n_chars)
    raw = s.kinds.tobytes()
    tokens = raw.translate(_TOKEN_KINDS)
    first = tokens.find(1)
    s.first_token = first if first >= 0 else None
    s.last_token = tokens.rfind(1) if first >= 0 else None
    s.n_token_chunks = tokens.count(1)
    first_content = raw.find(ChunkKind.CONTENT)
    s.first_content = first_content if first_content >= 0 else None
    s.content = "".join(content)
    s.reasoning = "".join(reasoning)
    return s


def classify(
    status: int,
    error: str | None,
    timeout_kind: str | None,
    summary: StreamSummary | None,
    sse_done: bool,
    leftover: bytes,
    max_tokens_is_target: bool,
    content_type: str | None = None,
) -> tuple[str, str | None]:
    """(outcome class, error text) for one finished exchange; see the module docstring."""
    if timeout_kind is not None:
        return "timeout", error
    if status in (429, 503):
        return "rejected", error
    if status and status != 200:
        return "http_error", error
    if error is not None:
        return "stream_error", error
    assert summary is not None
    if summary.error is not None:
        return "stream_error", summary.error
    if not summary.kinds and content_type and "event-stream" not in content_type:
        return "stream_error", (f"the response is not an event stream (Content-Type: {content_type}); "
                                "the server may not support stream: true on this route")
    if leftover.strip():
        return "stream_error", f"stream ended inside an event: {leftover[:120]!r}"
    if summary.finish_reason is None and not sse_done:
        return "stream_error", "stream ended without a finish_reason or [DONE]"
    if summary.finish_reason == "length" and not max_tokens_is_target:
        return "truncated", None
    return "ok", None


def impossible_accounting(summary: StreamSummary, max_tokens: int | None) -> str | None:
    """Why the server's counts cannot be true, or None: a count that is no count, more output
    tokens than the budget allows (16 spare for stop tokens), or more than the stream could carry
    by a wide margin (32 per token-bearing event or 2 per character sent, at least 64: engines
    batch tokens into events, and an unstreamed answer comes in one, but its text is there)."""
    if summary.accounting_error is not None:
        return summary.accounting_error
    completion = summary.completion_tokens
    if completion is None:
        return None
    if max_tokens is not None and completion > max_tokens + 16:
        return f"usage completion_tokens {completion:,} is more than max_tokens {max_tokens:,} allows"
    chars = sum(summary.n_chars)
    if completion > max(64, 32 * summary.n_token_chunks, 2 * chars):
        return (f"usage completion_tokens {completion:,} from {summary.n_token_chunks} token-bearing events of "
                f"{chars:,} characters: more than the stream carried")
    return None
