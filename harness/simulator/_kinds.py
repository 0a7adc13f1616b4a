"""The simulator's endpoint kinds past chat and completions (harness._kinds has the client's).

- Pooling (`/v1/embeddings`, `/v1/rerank`, `/v1/score`): one JSON answer after the scripted
  TTFT plus one ITL per input (or document) after the first, so a test knows each request's
  latency. Embeddings are hashed bags of words (each lower-cased word adds a seeded unit
  direction), normalised to length 1: the same text gives the same vector, and texts that share
  words are closer than texts that share none, so the semantic canary has a known answer.
  Rerank and score give each document the share of the query's words it holds.
- Responses and Anthropic Messages: the request is read as a chat (`chat_view`: `input` or
  `messages`, a `previous_response_id`'s stored conversation, `system`) and answered with the
  same tokens and scripted replies as chat, in the kind's own events (`typed_events`).
- Audio transcription: the clip's duration (from its WAV header) sets the answer's length,
  `words_per_audio_s` words a second of audio, streamed as vLLM's chat-shaped chunks. A WAV that
  carries a `txt ` chunk (the simulator's convention, for the transcript canary's tests) is
  "transcribed" to that text.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import struct
from typing import Any

import numpy as np

__all__ = ["embed", "pooling_answer", "chat_view", "clip_of", "typed_start", "typed_token", "typed_end",
           "WORDS_PER_AUDIO_S"]

WORDS_PER_AUDIO_S = 3.0
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=1 << 16)
def _direction(word: str, dim: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    direction: np.ndarray = np.random.default_rng(seed).standard_normal(dim)
    direction.flags.writeable = False
    return direction


def embed(text: str, dim: int) -> list[float]:
    """The unit vector of `text`'s words (module docstring)."""
    total = np.zeros(dim)
    for word in _words(text):
        total += _direction(word, dim)
    norm = float(np.linalg.norm(total))
    if norm == 0:
        total[0], norm = 1.0, 1.0
    return [float(x) for x in total / norm]


def _overlap(query: str, document: str) -> float:
    asked = set(_words(query))
    return len(asked & set(_words(document))) / len(asked) if asked else 0.0


def pooling_answer(api: str, req: dict[str, Any], model: str, dim: int) -> tuple[dict[str, Any], int, int]:
    """(answer, inputs or documents, prompt tokens) of a pooling request."""
    if api == "embeddings":
        inputs = req.get("input")
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs or []]
        tokens = sum(len(t.split()) for t in texts)
        data = [{"object": "embedding", "index": i, "embedding": embed(t, dim)} for i, t in enumerate(texts)]
        return ({"object": "list", "model": model, "data": data,
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, len(texts), tokens)
    query = str(req.get("query", req.get("text_1", "")))
    documents = [str(d) for d in (req.get("documents") or req.get("text_2") or [])]
    tokens = sum(len(t.split()) for t in [query, *documents])
    scores = [_overlap(query, d) for d in documents]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    if api == "rerank":
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        return {"model": model, "results": results, "usage": usage}, len(documents), tokens
    data = [{"index": i, "object": "score", "score": v} for i, v in enumerate(scores)]
    return {"object": "list", "model": model, "data": data, "usage": usage}, len(documents), tokens


def chat_view(api: str, req: dict[str, Any], conversations: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A Responses or Messages request as the chat request it amounts to (messages, max_tokens,
    tools, formats), so the chat machinery answers it."""
    out = dict(req)
    if api == "responses":
        given = req.get("input")
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        previous = req.get("previous_response_id")
        out["messages"] = conversations.get(str(previous), []) + messages if previous else messages
        out["max_tokens"] = req.get("max_output_tokens")
        tools = req.get("tools") or []
        out["tools"] = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
                        for t in tools if isinstance(t, dict)]
        choice = req.get("tool_choice")
        if isinstance(choice, dict) and choice.get("name"):
            out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        form = (req.get("text") or {}).get("format") if isinstance(req.get("text"), dict) else None
        if isinstance(form, dict) and form.get("type") == "json_schema":
            out["response_format"] = {"type": "json_schema", "json_schema": {"schema": form.get("schema") or {}}}
    else:
        system = req.get("system")
        out["messages"] = ([{"role": "system", "content": system}] if system else []) + list(req.get("messages") or [])
        out["tools"] = [{"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}
                        for t in req.get("tools") or [] if isinstance(t, dict)]
        choice = req.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
        elif isinstance(choice, dict):
            out["tool_choice"] = "required" if choice.get("type") == "any" else choice.get("type")
    return out


def clip_of(body: bytes, content_type: str) -> tuple[float, str | None, dict[str, str]]:
    """(audio seconds, the transcript a `txt ` chunk carries or None, the other form fields) of
    a multipart transcription request; ValueError when it holds no WAV."""
    boundary = content_type.partition("boundary=")[2].strip().strip('"')
    if not boundary:
        raise ValueError("no multipart boundary")
    fields: dict[str, str] = {}
    clip = None
    for part in body.split(b"--" + boundary.encode()):
        head, _, value = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        if name is None:
            continue
        value = value[:-2] if value.endswith(b"\r\n") else value
        if name.group(1) == b"file":
            clip = value
        else:
            fields[name.group(1).decode()] = value.decode("utf-8", "replace")
    if clip is None or clip[:4] != b"RIFF":
        raise ValueError("no WAV file part")
    at, rate, seconds, text = 12, 0, 0.0, None
    while at + 8 <= len(clip):
        kind, size = clip[at:at + 4], struct.unpack("<I", clip[at + 4:at + 8])[0]
        if kind == b"fmt ":
            rate = struct.unpack("<I", clip[at + 16:at + 20])[0]
        elif kind == b"data" and rate:
            seconds = min(size, len(clip) - at - 8) / rate
        elif kind == b"txt ":
            text = clip[at + 8:at + 8 + size].decode("utf-8", "replace")
        at += 8 + size + (size & 1)
    return seconds, text, fields


def audio_tokens(seconds: float) -> int:
    return max(1, math.ceil(seconds * WORDS_PER_AUDIO_S))


def typed_start(api: str, rid: str, prompt_tokens: int, cached: int) -> list[dict[str, Any]]:
    """The events before the first token."""
    if api == "responses":
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        return [{"type": "response.created", "response": response},
                {"type": "response.in_progress", "response": response},
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {"type": "message", "id": f"msg-{rid}", "role": "assistant", "content": []}}]
    usage = {"input_tokens": prompt_tokens, "output_tokens": 0, "cache_read_input_tokens": cached}
    return [{"type": "message_start", "message": {"id": rid, "type": "message", "role": "assistant", "content": [],
                                                  "usage": usage}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]


def typed_token(api: str, delta: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one chat delta (content, reasoning_content or a tool-call piece)."""
    calls = delta.get("tool_calls")
    if api == "responses":
        if delta.get("reasoning_content"):
            return [{"type": "response.reasoning_text.delta", "delta": delta["reasoning_content"]}]
        if calls:
            function = calls[0].get("function") or {}
            if function.get("name"):
                return [{"type": "response.output_item.added", "output_index": 1,
                         "item": {"type": "function_call", "call_id": "call-0", "name": function["name"],
                                  "arguments": ""}}]
            return [{"type": "response.function_call_arguments.delta", "delta": function.get("arguments", "")}]
        return [{"type": "response.output_text.delta", "delta": delta.get("content", "")}]
    if delta.get("reasoning_content"):
        return [{"type": "content_block_delta", "index": 0,
                 "delta": {"type": "thinking_delta", "thinking": delta["reasoning_content"]}}]
    if calls:
        function = calls[0].get("function") or {}
        if function.get("name"):
            return [{"type": "content_block_stop", "index": 0},
                    {"type": "content_block_start", "index": 1,
                     "content_block": {"type": "tool_use", "id": "call-0", "name": function["name"], "input": {}}}]
        return [{"type": "content_block_delta", "index": 1,
                 "delta": {"type": "input_json_delta", "partial_json": function.get("arguments", "")}}]
    text = {"type": "text_delta", "text": delta.get("content", "")}
    return [{"type": "content_block_delta", "index": 0, "delta": text}]


def typed_end(api: str, rid: str, finish: str, usage: dict[str, Any]) -> list[dict[str, Any]]:
    """The events after the last token: the finish and usage."""
    if api == "responses":
        response: dict[str, Any] = {"id": rid, "object": "response", "output": [],
                                    "usage": {"input_tokens": usage["prompt_tokens"],
                                              "output_tokens": usage["completion_tokens"],
                                              "total_tokens": usage["total_tokens"]}}
        if finish == "length":
            response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
            return [{"type": "response.incomplete", "response": response}]
        response["status"] = "completed"
        return [{"type": "response.completed", "response": response}]
    reason = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(finish, finish)
    return [{"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
             "usage": {"output_tokens": usage["completion_tokens"]}},
            {"type": "message_stop"}]
