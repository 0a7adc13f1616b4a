"""Streams of typed events: the Responses API, Anthropic Messages and OpenAI's transcription
stream, where each event's JSON names its own `type` (and usually repeats it as the SSE
`event:` field, which we ignore: the payload is what the server meant).

`summarize_typed(sse, handle)` does the bookkeeping every such stream shares, so each dialect
writes only what its event types mean: it decodes each payload (one orjson call; a payload that
is not a JSON object, or nested past orjson's depth limit, is `malformed` and the request's
error), asks `handle` what the event carried, and derives first-token, first-content and
last-token indices, the token-bearing count, and the joined text and reasoning, as the chat
parser does. A `[DONE]` (which some servers add) counts as the end, and nothing after it counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from harness._openai import ChunkKind, StreamSummary, seal
from harness._sse import SSEParser

__all__ = ["Carried", "summarize_typed"]


@dataclass
class Carried:
    """What one event carried: text, reasoning, characters of a tool call, and whether it ended
    the answer. `handle` fills it; `summary` is the request's, for usage, ids and the finish."""

    text: str = ""
    reasoning: str = ""
    call_chars: int = 0
    error: str | None = None
    final: bool = False


Handler = Callable[[StreamSummary, dict[str, Any], Carried], None]


def summarize_typed(sse: SSEParser, handle: Handler) -> StreamSummary:
    """The summary of a finished typed-event stream; `finish_reason` is set by the event that
    ended it (`classify` calls a stream without one cut off)."""
    s = StreamSummary()
    kinds: list[int] = []
    n_chars: list[int] = []
    content: list[str] = []
    reasoning: list[str] = []
    ended = False
    for i, payload in enumerate(sse.payloads):
        kind, chars = ChunkKind.EMPTY, 0
        if ended:
            s.events_after_done += payload != b"[DONE]"
        elif payload == b"[DONE]":
            kind, ended = ChunkKind.DONE, True
        else:
            try:
                obj = orjson.loads(payload)
            except orjson.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict):
                kind = ChunkKind.MALFORMED
                if s.error is None:
                    s.error = f"malformed event {i}: {payload[:120]!r}"
            else:
                carried = Carried()
                handle(s, obj, carried)
                if carried.error is not None:
                    kind = ChunkKind.ERROR
                    if s.error is None:
                        s.error = carried.error
                elif carried.text:
                    kind, chars = ChunkKind.CONTENT, len(carried.text) + len(carried.reasoning)
                    content.append(carried.text)
                elif carried.reasoning:
                    kind, chars = ChunkKind.REASONING, len(carried.reasoning)
                elif carried.call_chars:
                    kind, chars = ChunkKind.TOOL_CALL, carried.call_chars
                if carried.reasoning:
                    reasoning.append(carried.reasoning)
                ended = ended or carried.final
        kinds.append(kind)
        n_chars.append(chars)
    return seal(s, kinds, n_chars, content, reasoning)
