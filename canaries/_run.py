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
from canaries._suite import CaseSpec, Suite
from harness import SUCCESS_OUTCOMES, Api, Exchange, HttpClient, StreamSummary, judge, scrub
from harness.engines import structured_fields
from workloads import corpus_text

__all__ = ["CaseResult", "run_suite", "run_case", "send_body", "write_results",
           "CANARIES_SCHEMA", "long_context_prompt", "GREEDY"]

GREEDY: dict[str, Any] = {"temperature": 0.0, "seed": 42}
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
          prompt: str | None, engine: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model}
    if api == "chat":
        body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt or ""}]
    else:
        body["prompt"] = prompt or ""
    body.update(max_tokens=case.max_tokens, stream=True, stream_options={"include_usage": True}, **GREEDY)
    if case.kind == "json":
        body.update(structured_fields(case.schema_ or {}, engine, api)[0])
    if case.kind == "tool":
        body["tools"] = case.tools
        if case.tool_choice is not None:
            body["tool_choice"] = case.tool_choice
    body.update(case.params)
    return body


def _transcript(turns: list[tuple[str, str]], question: str) -> str:
    """A plain-text conversation for completions endpoints."""
    lines = [f"User: {u}\nAssistant: {a}" for u, a in turns]
    return "\n".join(lines + [f"User: {question}\nAssistant:"])


async def send_body(client: HttpClient, path: str, body: dict[str, Any],
                api: Api) -> tuple[Exchange, StreamSummary | None, str, str | None]:
    """One request as the runner sends it: (exchange, stream summary, outcome class, error)."""
    ex = await client.exchange(client.request_bytes(path, orjson.dumps(body)))
    return (ex, *judge(ex, api, False))


async def run_case(client: HttpClient, suite: Suite, case: CaseSpec, model: str, api: Api, t0_ns: int,
                    phase: str, engine: str | None = None) -> CaseResult:
    """One case, sent as the runner sends requests; `engine` picks its structured-output field."""
    api = api if case.api == "auto" else case.api
    path = "/chat/completions" if api == "chat" else "/completions"
    bodies: list[dict[str, Any]] = []
    start = time.perf_counter_ns()
    if case.kind == "multi_turn":
        turns = case.turns or []
        history: list[tuple[str, str]] = []
        messages: list[dict[str, Any]] = list(case.messages or [])
        for i, turn in enumerate(turns):
            messages.append({"role": "user", "content": turn})
            body = _body(case, api, model, list(messages), _transcript(history, turn), engine)
            bodies.append(body)
            ex, summary, outcome, error = await send_body(client, path, body, api)
            if outcome not in SUCCESS_OUTCOMES or summary is None or i == len(turns) - 1:
                break
            history.append((turn, summary.content))
            messages.append({"role": "assistant", "content": summary.content})
    else:
        prompt = long_context_prompt(case) if case.kind == "long_context" else case.prompt
        body = _body(case, api, model, case.messages, prompt, engine)
        bodies.append(body)
        ex, summary, outcome, error = await send_body(client, path, body, api)
    raw = (b"\n".join(bytes(p) for p in ex.sse.payloads) if summary is not None else bytes(ex.error_body)).decode(
        "utf-8", "replace")
    if summary is not None and outcome in SUCCESS_OUTCOMES:
        answer = Answer(summary.content, summary.reasoning, summary.tool_calls, summary.finish_reason,
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
