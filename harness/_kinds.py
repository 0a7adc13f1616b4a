"""Endpoint kinds (`endpoint.api`): where each sends, whether it streams, whether it generates
tokens, and `judge`, which reads a finished exchange in its kind's dialect.

| kind | path (after the base URL's `/v1`) | answer | parser |
|---|---|---|---|
| chat | /chat/completions | SSE chunks | harness._openai |
| completions | /completions | SSE chunks | harness._openai |
| responses | /responses | SSE typed events | harness._responses |
| anthropic_messages | /messages | SSE typed events | harness._anthropic |
| audio_transcriptions | /audio/transcriptions | SSE (vLLM chunks or OpenAI events) | harness._audio |
| embeddings | /embeddings | one JSON body | harness._pooling |
| rerank | /rerank | one JSON body | harness._pooling |
| score | /score | one JSON body | harness._pooling |

A whole-body answer is kept as one `body` chunk; it has no token times, so the TTFT/ITL
family does not apply to it and its figures are request latency and rates (passport.audit).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness._anthropic import messages_body, summarize_messages
from harness._audio import parse_transcription_body, summarize_transcription, transcription_body
from harness._openai import (
    ACCOUNTING_ERROR,
    Api,
    ChunkKind,
    StreamSummary,
    build_body,
    classify,
    impossible_accounting,
    summarize,
)
from harness._pooling import embeddings_body, parse_pooling, rerank_body, score_body
from harness._responses import responses_body, summarize_responses
from passport._kindnames import KIND_PATHS

if TYPE_CHECKING:
    from harness._http import Exchange

__all__ = ["EndpointKind", "KINDS", "judge", "POOLING_KINDS", "GENERATING_KINDS", "request_body", "JSON"]

JSON = "application/json"


@dataclass(frozen=True)
class EndpointKind:
    """One endpoint kind: its path after the base URL, whether its answer is a stream, and
    whether it generates tokens (the TTFT/ITL family applies)."""

    api: str
    path: str
    streams: bool
    generates: bool


_WHOLE = ("embeddings", "rerank", "score")  # answer in one JSON body and generate nothing
KINDS: dict[str, EndpointKind] = {name: EndpointKind(name, path, name not in _WHOLE, name not in _WHOLE)
                                  for name, path in KIND_PATHS.items()}
POOLING_KINDS = tuple(k for k, v in KINDS.items() if not v.generates)
GENERATING_KINDS = tuple(k for k, v in KINDS.items() if v.generates)


def request_body(api: Api, model: str, prompt: str, max_tokens: int, params: dict[str, Any],
                 imported: dict[str, Any] | None = None) -> tuple[bytes, str]:
    """(body, Content-Type) of one request of kind `api`. `imported` holds a request's own fields:
    messages, tools and formats for the text kinds; `input` (texts) for embeddings, `query` and
    `documents` for rerank and score, `clip` (WAV bytes) for audio. Pooling kinds take no
    max_tokens; `params` are the fields every request carries (passport.run._plan)."""
    imported = imported or {}
    if api in ("chat", "completions"):
        return build_body(api, model, prompt, max_tokens, params, imported or None), JSON
    if api == "responses":
        return responses_body(model, prompt, max_tokens, params, imported), JSON
    if api == "anthropic_messages":
        return messages_body(model, prompt, max_tokens, params, imported), JSON
    if api == "audio_transcriptions":
        return transcription_body(model, imported["clip"], params)
    if api == "embeddings":
        return embeddings_body(model, list(imported.get("input") or [prompt]), params), JSON
    documents = list(imported.get("documents") or [])
    query = str(imported.get("query", prompt))
    return (rerank_body if api == "rerank" else score_body)(model, query, documents, params), JSON


def _whole(summary: StreamSummary, body: bytes) -> StreamSummary:
    summary.whole = True
    summary.kinds = array("b", [ChunkKind.BODY])
    summary.n_chars = array("i", [len(body)])
    return summary


def _summary(ex: Exchange, api: Api) -> StreamSummary:
    """The summary of a 200 answer in its kind's dialect."""
    if api in ("chat", "completions"):
        return summarize(ex.sse, api)
    if api == "responses":
        return summarize_responses(ex.sse)
    if api == "anthropic_messages":
        return summarize_messages(ex.sse)
    if api == "audio_transcriptions":
        if ex.content_type and "json" in ex.content_type and "event-stream" not in ex.content_type:
            body = ex.sse.body()
            return _whole(parse_transcription_body(body), body)
        return summarize_transcription(ex.sse)
    body = ex.sse.body()
    return _whole(parse_pooling(body, api), body)


def judge(ex: Exchange, api: Api, max_tokens_is_target: bool, max_tokens: int | None = None,
          n_inputs: int | None = None) -> tuple[StreamSummary | None, str, str | None]:
    """(summary, outcome class, error) of a finished exchange: the summary of a 200 answer, its
    class, and for HTTP errors and rejections the start of the body as the error. A stream whose
    server accounting is impossible (`impossible_accounting`), or that sent events after [DONE],
    and a pooling answer with another count of vectors or scores than the `n_inputs` sent, are
    `stream_error`s saying so: their figures are not counted as a success's. A Responses answer
    `completed` with all of its max_output_tokens used is taken to have stopped at the limit
    (`length`): llama.cpp ends such an answer `completed` where the API says `incomplete`."""
    summary = _summary(ex, api) if ex.status == 200 else None
    if (api == "responses" and summary is not None and summary.finish_reason == "stop" and max_tokens is not None
            and summary.completion_tokens is not None and summary.completion_tokens >= max_tokens):
        summary.finish_reason = "length"  # llama.cpp says `completed`, not `incomplete`, at max_output_tokens
    whole = summary is not None and summary.whole
    outcome, error = classify(ex.status, ex.error, ex.timeout_kind, summary, whole or ex.sse.done,
                              b"" if whole else ex.sse.leftover(), max_tokens_is_target, ex.content_type)
    if summary is not None and outcome in ("ok", "truncated"):
        wrong = impossible_accounting(summary, max_tokens)
        if wrong is not None:
            outcome, error = "stream_error", f"{ACCOUNTING_ERROR}: {wrong}"
        elif summary.events_after_done:
            outcome, error = "stream_error", f"{summary.events_after_done} events after [DONE] (ignored)"
        elif n_inputs is not None and summary.n_results is not None and summary.n_results != n_inputs:
            outcome, error = "stream_error", f"the answer carried {summary.n_results} results for {n_inputs} inputs"
    if outcome in ("http_error", "rejected") and error is None:
        error = f"HTTP {ex.status}: {bytes(ex.error_body[:512]).decode('utf-8', 'replace')}"
    return summary, outcome, error
