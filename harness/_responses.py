"""OpenAI's Responses API (`/v1/responses`), streamed: the request body and the event stream.

The body: the prompt as `input` (or a session's messages, or with `previous_response_id` only
the new message: the server holds the conversation), `max_output_tokens`, `stream: true`;
chat-shaped tools (`{"type": "function", "function": {...}}`) and `tool_choice`, and a chat
`response_format` are translated to the Responses forms (flat function tools, `text.format`).

The stream (vLLM, OpenAI, llama.cpp where served): text from `response.output_text.delta`,
reasoning from `response.reasoning_text.delta` and `response.reasoning_summary_text.delta`,
tool calls from `response.output_item.added` (a `function_call` item: its name) and
`response.function_call_arguments.delta`; the end and usage from `response.completed`,
`response.incomplete` (finish `length` when the reason is `max_output_tokens`; vLLM sends
`response.completed` with `status: incomplete` at the limit, read the same) or
`response.failed` / `error` (the request's error). Every other event is kept and carries nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from harness._openai import StreamSummary, usage_count
from harness._sse import SSEParser
from harness._typed_events import Carried, summarize_typed

__all__ = ["responses_body", "summarize_responses", "responses_tools"]


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-shaped tools as Responses tools (already flat ones are kept as they are)."""
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            out.append({"type": "function", **function})
        else:
            out.append(tool)
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def responses_body(model: str, prompt: str, max_tokens: int, params: dict[str, Any],
                   imported: dict[str, Any] | None = None) -> bytes:
    """The JSON body of one streamed Responses request (see the module docstring)."""
    imported = imported or {}
    body: dict[str, Any] = {"model": model}
    messages = imported.get("messages")
    previous = imported.get("previous_response_id")
    if previous and messages:
        body["input"] = [messages[-1]]
        body["previous_response_id"] = previous
    else:
        body["input"] = messages or prompt
    if imported.get("tools"):
        body["tools"] = responses_tools(imported["tools"])
    if "tool_choice" in imported:
        body["tool_choice"] = _tool_choice(imported["tool_choice"])
    form = imported.get("response_format")
    if isinstance(form, dict) and form.get("type") == "json_schema":
        inner = form.get("json_schema") or {}
        body["text"] = {"format": {"type": "json_schema", "name": inner.get("name", "answer"),
                                   "schema": inner.get("schema") or {}, "strict": bool(inner.get("strict", True))}}
    elif isinstance(form, dict) and form.get("type") == "json_object":
        body["text"] = {"format": {"type": "json_object"}}
    body["max_output_tokens"] = max_tokens
    body["stream"] = True
    body.update(params)
    return orjson.dumps(body)


def _usage(s: StreamSummary, response: dict[str, Any]) -> None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return
    s.prompt_tokens = usage_count(s, "input_tokens", usage.get("input_tokens"))
    s.completion_tokens = usage_count(s, "output_tokens", usage.get("output_tokens"))
    out_details = usage.get("output_tokens_details")
    if isinstance(out_details, dict):
        s.reasoning_tokens = usage_count(s, "reasoning_tokens", out_details.get("reasoning_tokens"))
    in_details = usage.get("input_tokens_details")
    if isinstance(in_details, dict):
        s.cached_tokens = usage_count(s, "cached_tokens", in_details.get("cached_tokens"))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _handle(s: StreamSummary, obj: dict[str, Any], carried: Carried) -> None:
    kind = obj.get("type")
    if kind == "response.output_text.delta":
        carried.text = _text(obj.get("delta"))
    elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
        carried.reasoning = _text(obj.get("delta"))
    elif kind == "response.output_item.added":
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            name = _text(item.get("name"))
            s.tool_calls.append({"id": item.get("call_id"), "name": name, "arguments": _text(item.get("arguments"))})
            carried.call_chars = len(name)
    elif kind == "response.function_call_arguments.delta":
        piece = _text(obj.get("delta"))
        if not s.tool_calls:
            s.tool_calls.append({"id": None, "name": "", "arguments": ""})
        s.tool_calls[-1]["arguments"] += piece
        carried.call_chars = len(piece)
    elif kind in ("response.created", "response.completed", "response.incomplete", "response.failed"):
        response = obj.get("response")
        response = response if isinstance(response, dict) else {}
        if isinstance(response.get("id"), str):
            s.response_id = response["id"]
        if kind == "response.created":
            return
        _usage(s, response)
        carried.final = True
        if kind == "response.completed" and response.get("status") != "incomplete":
            s.finish_reason = "tool_calls" if s.tool_calls else "stop"
        elif kind in ("response.completed", "response.incomplete"):  # vLLM: completed, with status incomplete
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            s.finish_reason = "length" if reason in ("max_output_tokens", None) else str(reason)
        else:
            failed = response.get("error")
            message = failed.get("message") if isinstance(failed, dict) else failed
            carried.error = f"response.failed: {message}"[:512]
    elif kind == "error":
        inner = obj.get("error")
        said: dict[str, Any] = inner if isinstance(inner, dict) else obj
        carried.error = f"error event: {said.get('message') or orjson.dumps(said)[:200].decode()}"[:512]


def summarize_responses(sse: SSEParser) -> StreamSummary:
    """Classify every event of a finished Responses stream (see the module docstring)."""
    return summarize_typed(sse, _handle)
