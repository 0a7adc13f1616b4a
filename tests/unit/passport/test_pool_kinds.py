"""The request pool per endpoint kind: each kind's path and body from the materialized workload,
and a Responses session's later turns sent as the new message and the previous response's id."""

from __future__ import annotations

from typing import Any

import orjson

from harness import FakeAnswer, FakeTransport
from passport.model import parse_spec
from passport.run._plan import request_params
from passport.run._pool import build_pool
from workloads import load_tokenizer, materialize, wav_duration_ms

_LOAD = {"pattern": "poisson", "rate_per_s": 5, "measure": {"requests": 4}}


def _pool(api: str, workload: dict[str, Any]) -> tuple[list[Any], FakeTransport]:
    spec = parse_spec({"endpoint": {"base_url": "http://x:1/v1", "api": api}, "load": _LOAD,
                       "workload": {"tokenizer": "none", **workload}})
    client = FakeTransport(lambda body, attempt: FakeAnswer())
    request_set = materialize(spec.workload, 4, load_tokenizer("none"), seed=1)
    params, is_target = request_params(spec, None)
    pool, _ = build_pool(spec, request_set, client, "m", None, params, is_target, "")
    return pool, client


def _sent(request: bytes) -> tuple[str, dict[str, Any]]:
    head, body = request.split(b"\n", 1)
    return head.decode(), orjson.loads(body)


def test_pooling_kinds_send_their_batches_and_documents_to_their_paths() -> None:
    pool, _ = _pool("embeddings", {"inputs_per_request": 3, "input_tokens": {"dist": "fixed", "value": 5}})
    head, body = _sent(pool[0].request)
    assert head == "POST /v1/embeddings" and len(body["input"]) == 3 and pool[0].n_inputs == 3
    assert set(body) == {"model", "input", "encoding_format"}  # no sampling fields for a pooling model
    pool, _ = _pool("rerank", {"documents": {"count": 5}})
    head, body = _sent(pool[0].request)
    assert head == "POST /v1/rerank" and len(body["documents"]) == 5 and pool[0].n_inputs == 5
    assert body["query"] and body["top_n"] == 5


def test_an_audio_request_carries_a_clip_of_the_drawn_duration() -> None:
    pool, _ = _pool("audio_transcriptions", {"audio": {"duration_s": 1.5}})
    request = pool[0].request
    assert request.startswith(b"POST /v1/audio/transcriptions\n") and pool[0].audio_ms == 1500
    clip = request[request.index(b"RIFF"):]
    assert wav_duration_ms(clip) == 1500


def test_a_responses_session_turn_sends_the_new_message_and_the_previous_response_id() -> None:
    pool, client = _pool("responses", {"sessions": {"turns": 2}})
    first, later = pool[0], pool[1]
    assert first.turn is not None and later.turn is not None and later.request == b""
    history = [first.turn.message, {"role": "assistant", "content": "answer", "response_id": "resp_7"}]
    head, body = _sent(later.turn.build(history, client))
    assert head == "POST /v1/responses" and body["previous_response_id"] == "resp_7"
    assert body["input"] == [later.turn.message]  # the server holds the rest
    _, chat = _sent(_pool("chat", {"sessions": {"turns": 2}})[0][1].turn.build(  # type: ignore[union-attr]
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], client))
    assert len(chat["messages"]) == 3 and "previous_response_id" not in chat
