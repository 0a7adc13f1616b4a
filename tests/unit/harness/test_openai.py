from __future__ import annotations

import orjson
import pytest

from harness import ChunkKind, SSEParser, build_body, classify, summarize


def _parser(*events: object) -> SSEParser:
    parser = SSEParser()
    for t, event in enumerate(events, start=1):
        data = event if isinstance(event, bytes) else orjson.dumps(event)
        parser.feed(b"data: " + data + b"\n\n", t * 1000)
    return parser


def _chat(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_build_body_asks_for_streamed_usage_and_merges_params_last() -> None:
    body = orjson.loads(build_body("chat", "m", "hi", 8, {"temperature": 0.0, "ignore_eos": True}))
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True,
                    "stream_options": {"include_usage": True}, "temperature": 0.0, "ignore_eos": True}
    assert orjson.loads(build_body("completions", "m", "hi", 8, {}))["prompt"] == "hi"


def test_build_body_sends_a_request_s_own_fields_including_an_engine_s_structured_field() -> None:
    own = {"prompt": "logged", "json_schema": {"type": "object"}, "tools": [], "tool_choice": "auto"}
    body = orjson.loads(build_body("completions", "m", "synthetic", 8, {"temperature": 0.0}, own))
    assert body["prompt"] == "logged" and body["json_schema"] == {"type": "object"}
    assert body["tools"] == [] and body["tool_choice"] == "auto" and "messages" not in body


def test_ttft_any_skips_role_only_and_empty_chunks() -> None:
    s = summarize(_parser(_chat({"role": "assistant", "content": None}), _chat({"content": ""}),
                          _chat({"content": "Hi"}), _chat({}, "stop"),
                          {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}, b"[DONE]"), "chat")
    assert (s.first_token, s.first_content, s.last_token, s.n_token_chunks) == (2, 2, 2, 1)
    assert list(s.kinds) == [ChunkKind.EMPTY, ChunkKind.EMPTY, ChunkKind.CONTENT, ChunkKind.EMPTY, ChunkKind.USAGE,
                             ChunkKind.DONE]
    assert (s.finish_reason, s.prompt_tokens, s.completion_tokens, s.content) == ("stop", 5, 1, "Hi")


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_counts_for_ttft_any_not_ttft_content(field: str) -> None:
    s = summarize(_parser(_chat({field: "think"}), _chat({"content": "A"}), _chat({}, "stop")), "chat")
    assert (s.first_token, s.first_content) == (0, 1)
    assert s.reasoning == "think" and s.content == "A"


def test_tool_call_fragments_assemble_and_whole_calls_work() -> None:
    fragments = _parser(
        _chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                               "function": {"name": "get", "arguments": ""}}]}),
        _chat({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]}),
        _chat({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]}),
        _chat({}, "tool_calls"))
    s = summarize(fragments, "chat")
    assert s.tool_calls == [{"id": "c1", "name": "get", "arguments": '{"city": "Paris"}'}]
    assert s.first_token == 0 and s.first_content is None and s.n_token_chunks == 3
    whole = summarize(_parser(_chat({"tool_calls": [{"index": 0, "id": "x", "function": {
        "name": "f", "arguments": "{}"}}]}), _chat({}, "tool_calls")), "chat")
    assert whole.tool_calls == [{"id": "x", "name": "f", "arguments": "{}"}]


def test_completions_usage_in_finish_chunk() -> None:
    s = summarize(_parser({"choices": [{"text": "a", "finish_reason": None}]},
                          {"choices": [{"text": "", "finish_reason": "length"}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                     "prompt_tokens_details": {"cached_tokens": 2}}}), "completions")
    assert (s.finish_reason, s.completion_tokens, s.cached_tokens, s.n_token_chunks) == ("length", 1, 2, 1)


@pytest.mark.parametrize("error", [{"message": "boom", "code": 500}, "boom"])
def test_error_event_object_or_string_is_a_stream_error(error: object) -> None:
    s = summarize(_parser(_chat({"content": "a"}), {"error": error}, b"[DONE]"), "chat")
    assert classify(200, None, None, s, True, b"", True) == ("stream_error", "error event: boom")


def test_malformed_json_is_a_stream_error() -> None:
    s = summarize(_parser(b'{"choices": [', b"[DONE]"), "chat")
    outcome, error = classify(200, None, None, s, True, b"", True)
    assert outcome == "stream_error" and error is not None and "malformed event 0" in error


def test_missing_done_is_fine_after_a_finish_reason_but_not_without() -> None:
    finished = summarize(_parser(_chat({"content": "a"}, "stop")), "chat")
    assert classify(200, None, None, finished, False, b"", True)[0] == "ok"
    cut = summarize(_parser(_chat({"content": "a"})), "chat")
    assert classify(200, None, None, cut, False, b"", True)[0] == "stream_error"


def test_outcome_classes() -> None:
    s = summarize(_parser(_chat({"content": "a"}, "length"), b"[DONE]"), "chat")
    assert classify(200, None, None, s, True, b"", True) == ("ok", None)
    assert classify(200, None, None, s, True, b"", False) == ("truncated", None)
    assert classify(429, None, None, None, False, b"", True)[0] == "rejected"
    assert classify(503, None, None, None, False, b"", True)[0] == "rejected"
    assert classify(400, None, None, None, False, b"", True)[0] == "http_error"
    assert classify(0, "stalled", "stall", None, False, b"", True) == ("timeout", "stalled")
    assert classify(0, "refused", None, None, False, b"", True) == ("stream_error", "refused")


def test_a_plain_json_answer_to_a_streaming_request_says_so() -> None:
    parser = SSEParser()
    parser.feed(b'{"choices": [{"message": {"content": "hi"}}]}', 1)
    s = summarize(parser, "chat")
    outcome, error = classify(200, None, None, s, False, parser.leftover(), True, "application/json")
    assert outcome == "stream_error" and error is not None
    assert error.startswith("the response is not an event stream (Content-Type: application/json)")
