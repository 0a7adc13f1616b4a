"""Send a suite's cases, one at a time, through the harness's transport and judge each answer.

Cases run sequentially (concurrent requests change each other's greedy output on batching
engines) with greedy decoding: temperature 0 and seed 42 unless a case's `params` say
otherwise. Each case becomes one `CaseResult`: every request body it sent, the raw stream of
the last one, the answer, the verdict with its reason, category, expected and actual values,
and timings on the run's clock; `write_results` keeps them in `canaries.parquet`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from canaries._checks import Answer, Check, check
from canaries._suite import CanaryError, CaseSpec, Suite
from harness import (
    ANTHROPIC_SAMPLING,
    JSON,
    KINDS,
    SUCCESS_OUTCOMES,
    Api,
    Exchange,
    HttpClient,
    StreamSummary,
    judge,
    parse_pooling,
    request_body,
    scrub,
)
from harness.engines import structured_fields
from workloads import corpus_text, speechlike_clip

__all__ = ["CaseResult", "run_suite", "run_case", "send_body", "write_results",
           "CANARIES_SCHEMA", "long_context_prompt", "GREEDY"]

GREEDY: dict[str, Any] = {"temperature": 0.0, "seed": 42}
POOLED_CASES = ("embedding_deterministic", "embedding_semantic", "embedding_shape", "rerank_order", "transcript")
_RAW_BODY_BYTES = 64 << 10  # of a whole answer (embeddings run long), kept in canaries.parquet
_FILLER = corpus_text().split()

CANARIES_SCHEMA = pa.schema([
    ("suite", pa.string()), ("suite_sha256", pa.string()), ("case_id", pa.string()), ("case_version", pa.int32()),
    ("case_sha256", pa.string()), ("kind", pa.string()), ("phase", pa.string()), ("verdict", pa.string()),
    ("category", pa.string()), ("reason", pa.string()), ("expected", pa.string()), ("actual", pa.string()),
    ("outcome", pa.string()), ("http_status", pa.int32()), ("requests", pa.string()), ("raw_response", pa.string()),
    ("content", pa.string()), ("reasoning", pa.string()), ("tool_calls", pa.string()),
    ("finish_reason", pa.string()), ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
    ("sent_ns", pa.int64()), ("end_ns", pa.int64()), ("duration_s", pa.float64()),
])


@dataclass(frozen=True)
class CaseResult:
    """One case's verdict and evidence (a row of canaries.parquet)."""

    suite: str
    suite_sha256: str
    case_id: str
    case_version: int
    case_sha256: str
    kind: str
    phase: str
    verdict: str  # pass | fail
    category: str | None
    reason: str
    expected: str
    actual: str
    outcome: str
    http_status: int | None
    requests: str
    raw_response: str
    content: str
    reasoning: str
    tool_calls: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    sent_ns: int
    end_ns: int
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def long_context_prompt(case: CaseSpec) -> str:
    """Filler text of about `context_tokens` tokens (0.75 words a token) with each needle at its depth."""
    assert case.context_tokens is not None and case.needles is not None
    n_words = max(16, int(case.context_tokens * 0.75))
    words = [_FILLER[i % len(_FILLER)] for i in range(n_words)]
    for needle in sorted(case.needles, key=lambda n: n.depth, reverse=True):
        at = int(needle.depth * len(words))
        while 0 < at < len(words) and not words[at - 1].endswith("."):
            at += 1  # a needle starts a sentence
        words.insert(min(at, len(words)), needle.text)
    return " ".join(words) + f"\n\n{case.question}"


def _body(case: CaseSpec, api: Api, model: str, messages: list[dict[str, Any]] | None,
          prompt: str | None, engine: str | None) -> tuple[bytes, str]:
    """(body, Content-Type) of a text case in `api`'s own form (harness.request_body): greedy
    sampling (Anthropic's own fields only), a JSON case's schema, a tool case's tools."""
    own: dict[str, Any] = {}
    if api != "completions" and messages is not None:
        own["messages"] = messages
    if case.kind == "json":
        own.update(structured_fields(case.schema_ or {}, engine, api)[0])
    if case.kind == "tool":
        own["tools"] = case.tools
        if case.tool_choice is not None:
            own["tool_choice"] = case.tool_choice
    params = {**GREEDY, **case.params}
    if api == "anthropic_messages":
        params = {k: v for k, v in params.items() if k in ANTHROPIC_SAMPLING or k in case.params}
    return request_body(api, model, prompt or "", case.max_tokens, params, own)


def _transcript(turns: list[tuple[str, str]], question: str) -> str:
    """A plain-text conversation for completions endpoints."""
    lines = [f"User: {u}\nAssistant: {a}" for u, a in turns]
    return "\n".join(lines + [f"User: {question}\nAssistant:"])


async def send_body(client: HttpClient, path: str, body: dict[str, Any] | tuple[bytes, str], api: Api,
                    max_tokens: int | None = None) -> tuple[Exchange, StreamSummary | None, str, str | None]:
    """One request as the runner sends it: (exchange, stream summary, outcome class, error);
    `body` is JSON to encode, or (bytes, Content-Type) already built; `max_tokens` its budget."""
    raw, content_type = body if isinstance(body, tuple) else (orjson.dumps(body), JSON)
    ex = await client.exchange(client.request_bytes(path, raw, content_type))
    return (ex, *judge(ex, api, False, max_tokens))


def _logged(body: tuple[bytes, str]) -> Any:
    """A sent body as canaries.parquet keeps it: the JSON, or a multipart body's size."""
    raw, content_type = body
    if content_type == JSON:
        return orjson.loads(raw)
    return {"content_type": content_type.partition(";")[0], "bytes": len(raw)}


def _clip(case: CaseSpec, source: str | None) -> bytes:
    """A transcript case's WAV: its file (relative to the suite's), or a generated clip."""
    if case.audio_file is None:
        return speechlike_clip(int(case.audio_s * 1000), 7)
    path = Path(case.audio_file).expanduser()
    if not path.is_absolute() and source is not None:
        path = Path(source).parent / path
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CanaryError(f"case {case.id!r}: cannot read audio_file {path}: {exc.strerror}") from None


async def _pooled_case(client: HttpClient, case: CaseSpec, model: str, api: Api, source: str | None,
                       bodies: list[Any]) -> tuple[Exchange, StreamSummary | None, str, str | None, Answer | None]:
    """The requests of an embedding, rerank or transcript case, and what they answered."""
    path = KINDS[api].path
    vectors: list[list[float]] = []
    if case.kind == "transcript":
        sent = request_body(api, model, "", case.max_tokens, dict(case.params), {"clip": _clip(case, source)})
        requests = [sent]
    elif api == "embeddings":
        texts = [case.prompt or ""] + list(case.inputs or [])
        requests = [request_body(api, model, "", 0, dict(case.params), {"input": [t]}) for t in texts[:1] * 2] \
            if case.kind == "embedding_deterministic" else [request_body(api, model, "", 0, dict(case.params),
                                                                         {"input": texts})]
    else:
        requests = [request_body(api, model, "", 0, dict(case.params),
                                 {"query": case.prompt or "", "documents": list(case.inputs or [])})]
    for sent in requests:
        bodies.append(_logged(sent))
        ex, summary, outcome, error = await send_body(client, path, sent, api)
        if outcome not in SUCCESS_OUTCOMES or summary is None:
            return ex, summary, outcome, error, None
        if api == "embeddings":
            vectors += parse_pooling(ex.sse.body(), api, vectors=True).vectors or []
    assert summary is not None  # every request answered
    answer = Answer(summary.content, summary.reasoning, summary.tool_calls, summary.finish_reason,
                    summary.prompt_tokens, summary.completion_tokens, summary.n_token_chunks,
                    vectors=vectors, scores=list(summary.scores))
    return ex, summary, outcome, error, answer


async def run_case(client: HttpClient, suite: Suite, case: CaseSpec, model: str, api: Api, t0_ns: int,
                    phase: str, engine: str | None = None) -> CaseResult:
    """One case, sent as the runner sends requests; `engine` picks its structured-output field."""
    api = api if case.api == "auto" else case.api
    path = KINDS[api].path
    bodies: list[Any] = []
    start = time.perf_counter_ns()
    pooled: Answer | None = None
    if case.kind in POOLED_CASES:
        ex, summary, outcome, error, pooled = await _pooled_case(client, case, model, api, suite.source, bodies)
    elif case.kind == "multi_turn":
        turns = case.turns or []
        history: list[tuple[str, str]] = []
        messages: list[dict[str, Any]] = list(case.messages or [])
        for i, turn in enumerate(turns):
            messages.append({"role": "user", "content": turn})
            sent = _body(case, api, model, list(messages), _transcript(history, turn), engine)
            bodies.append(_logged(sent))
            ex, summary, outcome, error = await send_body(client, path, sent, api, case.max_tokens)
            if outcome not in SUCCESS_OUTCOMES or summary is None or i == len(turns) - 1:
                break
            history.append((turn, summary.content))
            messages.append({"role": "assistant", "content": summary.content})
    else:
        prompt = long_context_prompt(case) if case.kind == "long_context" else case.prompt
        sent = _body(case, api, model, case.messages, prompt, engine)
        bodies.append(_logged(sent))
        ex, summary, outcome, error = await send_body(client, path, sent, api, case.max_tokens)
    if summary is None:
        raw = bytes(ex.error_body).decode("utf-8", "replace")
    else:  # a whole answer's body (its vectors cut short), or the stream's events
        whole = ex.sse.body()[:_RAW_BODY_BYTES] if summary.whole else b"\n".join(bytes(p) for p in ex.sse.payloads)
        raw = whole.decode("utf-8", "replace")
    if summary is not None and outcome in SUCCESS_OUTCOMES:
        answer = pooled or Answer(summary.content, summary.reasoning, summary.tool_calls, summary.finish_reason,
                                  summary.prompt_tokens, summary.completion_tokens, summary.n_token_chunks)
        verdict = check(case, answer)
    else:
        category = {"rejected": "rejection", "timeout": "error"}.get(outcome, "error")
        verdict = Check(False, category, f"the request failed ({outcome}): {error}", "a complete answer", outcome)
    return CaseResult(
        suite=suite.suite, suite_sha256=suite.sha256, case_id=case.id, case_version=case.version,
        case_sha256=case.sha256, kind=case.kind, phase=phase, verdict="pass" if verdict.passed else "fail",
        category=verdict.category, reason=verdict.reason, expected=verdict.expected, actual=verdict.actual,
        outcome=outcome, http_status=ex.status or None, requests=orjson.dumps(bodies).decode(), raw_response=raw,
        content=summary.content if summary else "", reasoning=summary.reasoning if summary else "",
        tool_calls=orjson.dumps(summary.tool_calls if summary else []).decode(),
        finish_reason=summary.finish_reason if summary else None,
        prompt_tokens=summary.prompt_tokens if summary else None,
        completion_tokens=summary.completion_tokens if summary else None,
        sent_ns=start - t0_ns, end_ns=time.perf_counter_ns() - t0_ns,
        duration_s=(time.perf_counter_ns() - start) / 1e9,
    )


async def run_suite(client: HttpClient, suite: Suite, model: str, api: Api, t0_ns: int, phase: str = "gate",
                    on_case: Callable[[CaseResult], None] | None = None,
                    engine: str | None = None) -> list[CaseResult]:
    """Run every case in order (the client must be started); `api` is the endpoint's, used by
    cases with `api: auto`; `engine` (when known) picks the structured-output field;
    `on_case(result)` after each."""
    results = []
    for case in suite.cases:
        result = await run_case(client, suite, case, model, api, t0_ns, phase, engine)
        results.append(result)
        if on_case is not None:
            on_case(result)
    return results


def write_results(path: Path, results: list[CaseResult]) -> None:
    """canaries.parquet: one row per case (every text scrubbed of secrets)."""
    rows = [{k: scrub(v) if isinstance(v, str) else v for k, v in asdict(r).items()} for r in results]
    table = pa.Table.from_pylist(rows, schema=CANARIES_SCHEMA)
    pq.write_table(table, path, compression="zstd")
