"""The endpoint kinds past chat: each kind's request body and the parse of its answer, from
answers written out by hand in the shapes each engine sends (docs/engines/research.md, and
the events llama.cpp's /v1/responses and /v1/messages sent on 2026-12-06), and hostile bytes
that must never raise out of a parser."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import ChunkKind, Exchange, SSEParser, judge, parse_pooling, request_body
from harness._anthropic import summarize_messages
from harness._audio import summarize_transcription
from harness._responses import summarize_responses
from workloads import speechlike_clip, wav_duration_ms

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _typed(*events: dict[str, object]) -> SSEParser:
    parser = SSEParser()
    for t, event in enumerate(events, start=1):
        parser.feed(b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n", t * 1000)
    return parser


def _exchange(body: bytes, content_type: str, status: int = 200) -> Exchange:
    ex = Exchange()
    ex.status, ex.content_type = status, content_type
    if status == 200:
        ex.sse.feed(body, 5000)
    else:
        ex.error_body += body
    return ex


# -- request bodies ------------------------------------------------------------------------------------

def test_each_kind_builds_its_own_body() -> None:
    emb, ct = request_body("embeddings", "m", "p", 0, {"dimensions": 64}, {"input": ["a", "b"]})
    assert ct == "application/json"
    assert orjson.loads(emb) == {"model": "m", "input": ["a", "b"], "encoding_format": "float", "dimensions": 64}
    rerank = orjson.loads(request_body("rerank", "m", "", 0, {}, {"query": "q", "documents": ["x", "y"]})[0])
    assert rerank == {"model": "m", "query": "q", "documents": ["x", "y"], "top_n": 2, "return_documents": False}
    score = orjson.loads(request_body("score", "m", "", 0, {}, {"query": "q", "documents": ["x"]})[0])
    assert score == {"model": "m", "text_1": "q", "text_2": ["x"]}
    responses = orjson.loads(request_body("responses", "m", "hi", 7, {"temperature": 0.0})[0])
    assert responses == {"model": "m", "input": "hi", "max_output_tokens": 7, "stream": True, "temperature": 0.0}
    messages = orjson.loads(request_body("anthropic_messages", "m", "hi", 7, {"top_k": 5})[0])
    assert messages == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7, "stream": True,
                        "top_k": 5}


def test_responses_and_messages_translate_chat_tools_formats_and_turns() -> None:
    tools = [{"type": "function", "function": {"name": "get", "description": "d", "parameters": {"type": "object"}}}]
    choice = {"type": "function", "function": {"name": "get"}}
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a"},
               {"role": "assistant", "content": "b", "response_id": "resp_1"}, {"role": "user", "content": "c"}]
    r = orjson.loads(request_body("responses", "m", "c", 8, {}, {"tools": tools, "tool_choice": choice,
                                                                  "messages": history,
                                                                  "previous_response_id": "resp_1"})[0])
    assert r["tools"] == [{"type": "function", "name": "get", "description": "d", "parameters": {"type": "object"}}]
    assert r["tool_choice"] == {"type": "function", "name": "get"}
    assert r["input"] == [{"role": "user", "content": "c"}] and r["previous_response_id"] == "resp_1"
    form = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}
    assert orjson.loads(request_body("responses", "m", "x", 8, {}, {"response_format": form})[0])["text"] == {
        "format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": True}}
    a = orjson.loads(request_body("anthropic_messages", "m", "c", 8, {}, {"tools": tools, "tool_choice": "required",
                                                                          "messages": history[:2]})[0])
    assert a["system"] == "be brief" and a["messages"] == [{"role": "user", "content": "a"}]
    assert a["tools"] == [{"name": "get", "description": "d", "input_schema": {"type": "object"}}]
    assert a["tool_choice"] == {"type": "any"}


def test_an_audio_body_is_multipart_with_the_clip_intact() -> None:
    clip = speechlike_clip(1500, 3)
    body, content_type = request_body("audio_transcriptions", "whisper", "", 0, {"temperature": 0.0},
                                      {"clip": clip})
    boundary = content_type.split("boundary=")[1]
    assert content_type.startswith("multipart/form-data; boundary=")
    parts = body.split(b"--" + boundary.encode())
    assert parts[-1] == b"--\r\n"
    named = {p.split(b'name="')[1].split(b'"')[0]: p.split(b"\r\n\r\n", 1)[1][:-2] for p in parts[1:-1]}
    assert named[b"model"] == b"whisper" and named[b"stream"] == b"true" and named[b"temperature"] == b"0.0"
    assert named[b"file"] == clip and wav_duration_ms(named[b"file"]) == 1500


# -- pooling answers -----------------------------------------------------------------------------------

def test_embeddings_are_counted_measured_and_checked() -> None:
    body = orjson.dumps({"object": "list", "usage": {"prompt_tokens": 6, "total_tokens": 6},
                         "data": [{"index": 1, "embedding": [0.0, 1.0, 0.0]}, {"index": 0, "embedding": [1, 0, 0]}]})
    s = parse_pooling(body, "embeddings", vectors=True)
    assert (s.error, s.n_results, s.dimension, s.prompt_tokens, s.completion_tokens) == (None, 2, 3, 6, 0)
    assert s.vectors == [[1, 0, 0], [0.0, 1.0, 0.0]]  # ordered by index
    assert parse_pooling(orjson.dumps([[0.5, 0.5], [1.0, 0.0]]), "embeddings").n_results == 2  # TEI's /embed
    for bad, why in ((b"{", "not JSON"), (orjson.dumps({"data": [{"embedding": [1, "x"]}]}), "finite numbers"),
                     (orjson.dumps({"data": [{"embedding": [1, 2]}, {"embedding": [1]}]}), "dimensions"),
                     (orjson.dumps({"data": [{"index": 3, "embedding": [1]}]}), "indices"),
                     (orjson.dumps({"error": {"message": "no pooling"}}), "no pooling")):
        assert why in (parse_pooling(bad, "embeddings").error or ""), bad


def test_rerank_and_score_answers_give_scores_by_document() -> None:
    jina = orjson.dumps({"results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1},
                                     {"index": 1, "relevance_score": -2.5}], "usage": {"total_tokens": 40}})
    s = parse_pooling(jina, "rerank")
    assert s.scores == [(0, 0.1), (1, -2.5), (2, 0.9)] and s.n_results == 3 and s.prompt_tokens == 40
    tei = parse_pooling(orjson.dumps([{"index": 0, "score": 0.3}]), "rerank")
    assert tei.scores == [(0, 0.3)]
    vllm_score = parse_pooling(orjson.dumps({"data": [{"index": 0, "object": "score", "score": 0.7}]}), "score")
    assert vllm_score.scores == [(0, 0.7)]
    assert "same document" in (parse_pooling(orjson.dumps({"results": [{"index": 0, "relevance_score": 1},
                                                                       {"index": 0, "relevance_score": 2}]}),
                                             "rerank").error or "")
    for value in ("high", True, None):
        bad = orjson.dumps({"results": [{"index": 0, "relevance_score": value}]})
        assert "finite score" in (parse_pooling(bad, "rerank").error or ""), value
    assert "not JSON" in (parse_pooling(b'{"results": [{"index": 0, "relevance_score": NaN}]}', "rerank").error or "")


def test_a_pooling_answer_with_too_few_results_is_a_stream_error() -> None:
    body = orjson.dumps({"data": [{"index": 0, "embedding": [1.0]}], "usage": {"prompt_tokens": 2}})
    summary, outcome, error = judge(_exchange(body, "application/json"), "embeddings", False, None, n_inputs=2)
    assert summary is not None and summary.whole and list(summary.kinds) == [ChunkKind.BODY]
    assert (outcome, error) == ("stream_error", "the answer carried 1 results for 2 inputs")
    assert judge(_exchange(body, "application/json"), "embeddings", False, None, n_inputs=1)[1] == "ok"
    _, rejected, said = judge(_exchange(b'{"error": "busy"}', "application/json", 429), "rerank", False)
    assert rejected == "rejected" and "busy" in (said or "")


# -- streamed answers of their own kinds ---------------------------------------------------------------

LLAMA_RESPONSES = [
    {"type": "response.created", "response": {"id": "resp_N", "object": "response", "status": "in_progress"}},
    {"type": "response.in_progress", "response": {"id": "resp_N", "object": "response", "status": "in_progress"}},
    {"type": "response.output_item.added", "item": {"content": [], "id": "msg_b", "role": "assistant",
                                                   "status": "in_progress", "type": "message"}},
    {"type": "response.content_part.added", "item_id": "msg_b", "part": {"type": "output_text", "text": ""}},
    {"type": "response.output_text.delta", "item_id": "msg_b", "delta": "<"},
    {"type": "response.output_text.delta", "item_id": "msg_b", "delta": "|"},
    {"type": "response.output_text.delta", "item_id": "msg_b", "delta": "im"},
    {"type": "response.output_text.done", "item_id": "msg_b", "text": "<|im"},
    {"type": "response.completed", "response": {"id": "resp_N", "status": "completed", "usage": {
        "input_tokens": 25, "output_tokens": 3, "total_tokens": 28, "input_tokens_details": {"cached_tokens": 20}}}},
]


def test_a_responses_stream_gives_tokens_usage_and_its_id() -> None:
    s = summarize_responses(_typed(*LLAMA_RESPONSES))
    assert (s.first_token, s.last_token, s.n_token_chunks, s.content) == (4, 6, 3, "<|im")
    assert (s.prompt_tokens, s.completion_tokens, s.cached_tokens, s.finish_reason) == (25, 3, 20, "stop")
    assert s.response_id == "resp_N" and s.error is None


def test_a_responses_answer_that_used_its_whole_budget_stopped_at_the_limit() -> None:
    body = b"".join(b"event: x\ndata: " + orjson.dumps(e) + b"\n\n" for e in LLAMA_RESPONSES)
    ex = _exchange(body, "text/event-stream")
    assert judge(ex, "responses", False, 3)[0].finish_reason == "length"  # type: ignore[union-attr]
    assert judge(_exchange(body, "text/event-stream"), "responses", False, 3)[1] == "truncated"
    assert judge(_exchange(body, "text/event-stream"), "responses", False, 8)[1] == "ok"


def test_vllms_completed_event_with_status_incomplete_is_a_stop_at_the_limit() -> None:
    s = summarize_responses(_typed({"type": "response.output_text.delta", "delta": "a"},
                                   {"type": "response.completed", "response": {
                                       "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                       "usage": {"input_tokens": 3, "output_tokens": 1}}}))
    assert s.finish_reason == "length" and s.completion_tokens == 1


def test_responses_reasoning_tool_calls_incomplete_and_failures() -> None:
    s = summarize_responses(_typed(
        {"type": "response.reasoning_text.delta", "delta": "think"},
        {"type": "response.output_item.added", "item": {"type": "function_call", "call_id": "c1", "name": "get"}},
        {"type": "response.function_call_arguments.delta", "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "delta": "1}"},
        {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"},
                                                     "usage": {"input_tokens": 1, "output_tokens": 4}}}))
    assert list(s.kinds) == [ChunkKind.REASONING, ChunkKind.TOOL_CALL, ChunkKind.TOOL_CALL, ChunkKind.TOOL_CALL,
                             ChunkKind.EMPTY]
    assert s.tool_calls == [{"id": "c1", "name": "get", "arguments": '{"a":1}'}] and s.finish_reason == "length"
    failed = summarize_responses(_typed({"type": "response.failed", "response": {"error": {"message": "oom"}}}))
    assert failed.error == "response.failed: oom"
    cut = _exchange(b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
                    b"\"delta\":\"a\"}\n\n", "text/event-stream")
    assert judge(cut, "responses", False)[1:] == ("stream_error", "stream ended without a finish_reason or [DONE]")


LLAMA_MESSAGES = [
    {"type": "message_start", "message": {"id": "chatcmpl-h", "type": "message", "role": "assistant", "content": [],
                                          "usage": {"cache_read_input_tokens": 0, "input_tokens": 25,
                                                    "output_tokens": 0}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "<"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "|"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "im"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
     "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


def test_a_messages_stream_gives_tokens_usage_and_the_stop_reason() -> None:
    s = summarize_messages(_typed(*LLAMA_MESSAGES))
    assert (s.first_token, s.last_token, s.n_token_chunks, s.content) == (2, 4, 3, "<|im")
    assert (s.prompt_tokens, s.completion_tokens, s.cached_tokens, s.finish_reason) == (25, 3, 0, "length")
    tool = summarize_messages(_typed(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "get"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "ping"},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"}))
    assert tool.reasoning == "hm" and tool.tool_calls == [{"id": "t", "name": "get", "arguments": "{}"}]
    assert tool.finish_reason == "tool_calls" and tool.n_token_chunks == 3
    assert summarize_messages(_typed({"type": "error", "error": {"type": "overloaded_error",
                                                                 "message": "Overloaded"}})).error == \
        "error event: Overloaded"


def test_transcription_streams_in_either_dialect_and_a_whole_answer() -> None:
    vllm = SSEParser()
    for t, event in enumerate([{"object": "transcription.chunk", "choices": [{"delta": {"content": " hello"}}]},
                               {"object": "transcription.chunk", "choices": [{"delta": {"content": " world"},
                                                                              "finish_reason": "stop"}]}], 1):
        vllm.feed(b"data: " + orjson.dumps(event) + b"\n\n", t)
    vllm.feed(b"data: [DONE]\n\n", 3)
    s = summarize_transcription(vllm)
    assert (s.content, s.n_token_chunks, s.finish_reason) == (" hello world", 2, "stop")
    openai = summarize_transcription(_typed({"type": "transcript.text.delta", "delta": "hi"},
                                            {"type": "transcript.text.done", "text": "hi",
                                             "usage": {"input_tokens": 9, "output_tokens": 1}}))
    assert (openai.content, openai.completion_tokens, openai.finish_reason) == ("hi", 1, "stop")
    whole, outcome, _ = judge(_exchange(b'{"text": "hello"}', "application/json"), "audio_transcriptions", False)
    assert outcome == "ok" and whole is not None and whole.content == "hello" and whole.first_token is None


# -- hostile bytes -------------------------------------------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["data", "results", "index", "embedding", "relevance_score", "score",
                                                "usage", "prompt_tokens", "error", "type", "delta", "response",
                                                "message", "item", "name", "text"]), inner, max_size=4),
                           max_leaves=20)


@FUZZ
@given(doc=json_values, api=st.sampled_from(["embeddings", "rerank", "score"]), raw=st.binary(max_size=200))
def test_no_pooling_answer_raises_out_of_the_parser(doc: object, api: str, raw: bytes) -> None:
    for body in (json.dumps(doc).encode(), raw):  # stdlib: big integers and NaN too, as a hostile server sends
        s = parse_pooling(body, api)
        assert s.error is not None or s.n_results is not None


@FUZZ
@given(events=st.lists(json_values, max_size=12), kind=st.sampled_from(["responses", "anthropic_messages",
                                                                       "audio_transcriptions"]),
       junk=st.binary(max_size=40))
def test_no_typed_event_stream_raises_out_of_judge(events: list[object], kind: str, junk: bytes) -> None:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + junk
    summary, outcome, _ = judge(_exchange(body, "text/event-stream"), kind, False, 16)  # type: ignore[arg-type]
    assert outcome in ("ok", "truncated", "stream_error") and summary is not None


@pytest.mark.parametrize("ms", [100, 2500, 61_000])
def test_generated_clips_have_the_declared_duration_and_are_the_same_for_a_seed(ms: int) -> None:
    assert wav_duration_ms(speechlike_clip(ms, 1)) == ms
    assert speechlike_clip(ms, 1) == speechlike_clip(ms, 1) != speechlike_clip(ms, 2)
