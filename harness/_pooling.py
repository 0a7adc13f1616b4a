"""Pooling endpoints: embeddings, rerank and score. One JSON answer per request, not a stream.

Request bodies (`embeddings_body`, `rerank_body`, `score_body`) and the parser of each answer
(`parse_pooling`), for the shapes the engines send:

- embeddings: OpenAI's `{"data": [{"index", "embedding": [floats]}], "usage": {"prompt_tokens"}}`
  (vLLM, SGLang, llama.cpp's `/v1/embeddings`, TEI's `/v1/embeddings`), and TEI's own `/embed`
  answer, a bare list of vectors;
- rerank: the Jina/Cohere shape `{"results": [{"index", "relevance_score"}], "usage"}` (vLLM's
  `/v1/rerank`, llama.cpp's `/v1/rerank`, Cohere, Jina), and TEI's `/rerank`, a bare list of
  `{"index", "score"}`;
- score: vLLM's `/v1/score`, `{"data": [{"index", "score"}], "usage"}`.

The parser is hostile-safe like the stream path: the body is already bounded in size by the
transport (`limits.bytes_per_response`), orjson refuses nesting past its depth limit, and every
field is checked for its type (a vector of numbers all of one length, a score that is a finite
number, an index in range) before it counts; what does not fit is the request's `error`. Vectors
are read only to count them and take their length; `vectors=True` keeps them (canaries).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from harness._openai import StreamSummary, usage_count

__all__ = ["embeddings_body", "rerank_body", "score_body", "parse_pooling"]


def embeddings_body(model: str, inputs: list[str], extra: dict[str, Any]) -> bytes:
    """`/v1/embeddings`: the inputs as a list (one input too: every engine takes a list), floats."""
    body: dict[str, Any] = {"model": model, "input": inputs, "encoding_format": "float"}
    body.update(extra)
    return orjson.dumps(body)


def rerank_body(model: str, query: str, documents: list[str], extra: dict[str, Any]) -> bytes:
    """`/v1/rerank` (Jina/Cohere shape): every document scored (`top_n` = all), none echoed back."""
    body: dict[str, Any] = {"model": model, "query": query, "documents": documents, "top_n": len(documents),
                            "return_documents": False}
    body.update(extra)
    return orjson.dumps(body)


def score_body(model: str, query: str, documents: list[str], extra: dict[str, Any]) -> bytes:
    """`/v1/score` (vLLM): the query against each document."""
    body: dict[str, Any] = {"model": model, "text_1": query, "text_2": documents}
    body.update(extra)
    return orjson.dumps(body)


def _vector(value: Any) -> list[float] | None:
    if not isinstance(value, list) or not value:
        return None
    for x in value:
        if type(x) not in (float, int) or not math.isfinite(x):
            return None
    return value


def _embeddings(s: StreamSummary, doc: Any, vectors: bool) -> None:
    if isinstance(doc, dict):
        items = doc.get("data")
        if not isinstance(items, list):
            s.error = "the answer has no `data` list of embeddings"
            return
        ordered: list[tuple[int, Any]] = []
        for k, item in enumerate(items):
            if not isinstance(item, dict):
                s.error = f"embedding {k} is not an object"
                return
            index = item.get("index", k)
            ordered.append((index if type(index) is int else -1, item.get("embedding")))
        if sorted(i for i, _ in ordered) != list(range(len(ordered))):
            s.error = "the embeddings' indices are not 0..n-1"
            return
        raw = [v for _, v in sorted(ordered, key=lambda p: p[0])]
        usage = doc.get("usage")
        if isinstance(usage, dict):
            s.prompt_tokens = usage_count(s, "prompt_tokens", usage.get("prompt_tokens", usage.get("total_tokens")))
            s.completion_tokens = 0  # a pooling model generates none: usage that counts input says so
    elif isinstance(doc, list):  # TEI's /embed: a bare list of vectors
        raw = doc
    else:
        s.error = "the answer is neither an embeddings object nor a list of vectors"
        return
    dimension = None
    kept: list[list[float]] = []
    for k, value in enumerate(raw):
        vector = _vector(value)
        if vector is None:
            s.error = f"embedding {k} is not a non-empty list of finite numbers"
            return
        if dimension is None:
            dimension = len(vector)
        elif len(vector) != dimension:
            s.error = f"embedding {k} has {len(vector)} dimensions where embedding 0 has {dimension}"
            return
        if vectors:
            kept.append(vector)
    s.n_results, s.dimension = len(raw), dimension
    if vectors:
        s.vectors = kept


def _scores(s: StreamSummary, doc: Any, api: str) -> None:
    if isinstance(doc, dict):
        items = doc.get("results" if api == "rerank" else "data")
        if not isinstance(items, list) and api == "score":
            items = doc.get("results")
        if not isinstance(items, list):
            s.error = f"the answer has no `{'results' if api == 'rerank' else 'data'}` list of scores"
            return
        usage = doc.get("usage")
        if isinstance(usage, dict):
            s.prompt_tokens = usage_count(s, "prompt_tokens", usage.get("prompt_tokens", usage.get("total_tokens")))
            s.completion_tokens = 0  # a pooling model generates none: usage that counts input says so
    elif isinstance(doc, list):  # TEI's /rerank
        items = doc
    else:
        s.error = "the answer is neither an object with scores nor a list of them"
        return
    scores: list[tuple[int, float]] = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            s.error = f"score {k} is not an object"
            return
        index = item.get("index")
        value = item.get("relevance_score", item.get("score"))
        if not (type(index) is int and index >= 0 and isinstance(value, (float, int)) and type(value) is not bool
                and math.isfinite(value)):
            s.error = f"score {k} lacks an index and a finite score: {orjson.dumps(item)[:120]!r}"
            return
        scores.append((index, float(value)))
    if len({i for i, _ in scores}) != len(scores):
        s.error = "two scores name the same document"
        return
    s.scores = sorted(scores)
    s.n_results = len(scores)
    s.content = orjson.dumps([[i, v] for i, v in s.scores]).decode()


def parse_pooling(body: bytes, api: str, vectors: bool = False) -> StreamSummary:
    """The summary of one pooling answer (`api`: embeddings, rerank or score); `error` says
    what is wrong with a malformed one. `n_results` counts vectors or scores, `dimension` is the
    vectors' length, `scores` are (document index, score) by index."""
    s = StreamSummary()
    s.finish_reason = "stop"
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        s.error = f"the answer is not JSON: {body[:120]!r}"
        return s
    if isinstance(doc, dict) and doc.get("error") is not None:
        error = doc["error"]
        s.error = f"error: {error.get('message') if isinstance(error, dict) else error}"[:512]
        return s
    if api == "embeddings":
        _embeddings(s, doc, vectors)
    else:
        _scores(s, doc, api)
    return s
