"""Anthropic's Messages API (`/v1/messages`), streamed: the request body and the event stream.

The body: `messages` (a system message moved to the top-level `system`), `max_tokens`,
`stream: true`; chat-shaped tools become `{"name", "description", "input_schema"}` and
`tool_choice` `required` / `auto` / a named function becomes `{"type": "any" | "auto" | "tool"}`.
Only the sampling fields the API defines are sent (temperature, top_p, top_k, stop_sequences),
plus `decoding.extra` verbatim; the key travels as `x-api-key` with `anthropic-version`
(`passport.run._endpoint.auth_headers`).

The stream (Anthropic, vLLM, llama.cpp): `message_start` (input and cached tokens),
`content_block_start` (a `tool_use` block names its call), `content_block_delta` (`text_delta`
text, `thinking_delta` reasoning, `input_json_delta` a call's arguments), `message_delta` (the
stop reason and the output tokens so far), `message_stop` (the end), `ping`, and `error`.
Stop reasons map to the chat finish reasons: `end_turn` and `stop_sequence` to `stop`,
`max_tokens` to `length`, `tool_use` to `tool_calls`.
"""

from __future__ import annotations

from typing import Any

import orjson

from harness._openai import StreamSummary, usage_count
from harness._sse import SSEParser
from harness._typed_events import Carried, summarize_typed

__all__ = ["ANTHROPIC_VERSION", "ANTHROPIC_SAMPLING", "messages_body", "summarize_messages"]

ANTHROPIC_VERSION = "2023-06-01"  # the `anthropic-version` header every request carries
ANTHROPIC_SAMPLING = ("temperature", "top_p", "top_k", "stop_sequences")  # the decoding fields the API defines
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            out.append({"name": function.get("name"), "description": function.get("description", ""),
                        "input_schema": function.get("parameters") or {"type": "object"}})
        else:
            out.append(tool)
    return out


def _tool_choice(choice: Any) -> Any:
    if choice == "required":
        return {"type": "any"}
    if choice in ("auto", "none"):
        return {"type": choice}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "tool", "name": choice["function"].get("name")}
    return choice


def messages_body(model: str, prompt: str, max_tokens: int, params: dict[str, Any],
                  imported: dict[str, Any] | None = None) -> bytes:
    """The JSON body of one streamed Messages request (see the module docstring); `params` are
    sent as given (passport.run._plan keeps only the API's sampling fields and decoding.extra)."""
    imported = imported or {}
    messages = list(imported.get("messages") or [{"role": "user", "content": prompt}])
    body: dict[str, Any] = {"model": model}
    system = [m for m in messages if isinstance(m, dict) and m.get("role") == "system"]
    if system:
        body["system"] = "\n".join(str(m.get("content", "")) for m in system)
        messages = [m for m in messages if m not in system]
    body["messages"] = messages
    if imported.get("tools"):
        body["tools"] = _tools(imported["tools"])
    if "tool_choice" in imported:
        body["tool_choice"] = _tool_choice(imported["tool_choice"])
    body["max_tokens"] = max_tokens
    body["stream"] = True
    body.update(params)
    return orjson.dumps(body)


def _handle(s: StreamSummary, obj: dict[str, Any], carried: Carried) -> None:
    kind = obj.get("type")
    if kind == "content_block_delta":
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            return
        dtype = delta.get("type")
        if dtype == "text_delta" and isinstance(delta.get("text"), str):
            carried.text = delta["text"]
        elif dtype == "thinking_delta" and isinstance(delta.get("thinking"), str):
            carried.reasoning = delta["thinking"]
        elif dtype == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            if not s.tool_calls:
                s.tool_calls.append({"id": None, "name": "", "arguments": ""})
            s.tool_calls[-1]["arguments"] += delta["partial_json"]
            carried.call_chars = len(delta["partial_json"])
    elif kind == "content_block_start":
        block = obj.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            name = str(block["name"]) if isinstance(block.get("name"), str) else ""
            s.tool_calls.append({"id": block.get("id"), "name": name, "arguments": ""})
            carried.call_chars = len(name)
    elif kind == "message_start":
        message = obj.get("message")
        if isinstance(message, dict):
            usage = message.get("usage")
            if isinstance(usage, dict):
                s.prompt_tokens = usage_count(s, "input_tokens", usage.get("input_tokens"))
                s.cached_tokens = usage_count(s, "cache_read_input_tokens", usage.get("cache_read_input_tokens"))
    elif kind == "message_delta":
        delta = obj.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        if isinstance(reason, str):
            s.finish_reason = _STOP.get(reason, reason)
        usage = obj.get("usage")
        if isinstance(usage, dict) and "output_tokens" in usage:
            s.completion_tokens = usage_count(s, "output_tokens", usage.get("output_tokens"))
    elif kind == "message_stop":
        carried.final = True
        if s.finish_reason is None:
            s.finish_reason = "stop"
    elif kind == "error":
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        carried.error = f"error event: {message or orjson.dumps(obj)[:200].decode()}"[:512]


def summarize_messages(sse: SSEParser) -> StreamSummary:
    """Classify every event of a finished Messages stream (see the module docstring)."""
    return summarize_typed(sse, _handle)
