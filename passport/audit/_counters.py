"""The client's totals held against the engine's own counters (rules version 4 on).

`passport run` reads the engine's counters (requests finished, tokens generated) right before the
timed phase's first send and right after its last answer, and keeps both reads in
telemetry.parquet (sources `counters:before` and `counters:after`). Whatever the client recorded
in that window (requests.parquet: warm-up, measured and cool-down rows of every repetition;
canaries.parquet and accuracy.parquet: the cases and items sent under load) bounds what the server can have counted:

- what the client is *sure* the server did: every answered request, and the tokens its usage
  reported (answers without usage leave the token count unjudged);
- what the server *may* have done besides: a request that failed after it was sent may still have
  been counted, with up to its max_tokens; a rejected one generated nothing. From rules version 12
  a pooling request may count as several (`fan_out`): vLLM counts each input of an embeddings
  batch, and each document of a rerank or score request and its query, as requests of their own
  (Gemma 3 270M served as an embedder: 8 documents, 9 finished requests).

The server counting fewer than the client is sure of means the log claims answers or tokens the
engine never produced (a forged or corrupted log, or a proxy inventing them); counting more than
the client could account for means another client shared the server during the window, or rows
are missing from the log. Neither proves the other figures right: an engine's counters are only
as honest as the engine, and both reads come from the same endpoint the run measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa

from passport.audit._metrics import SUCCESS_OUTCOMES, numeric_column, object_column

__all__ = ["CounterFacts", "counter_facts", "BEFORE", "AFTER", "TOKEN_SLACK_PER_ANSWER"]

BEFORE, AFTER = "counters:before", "counters:after"
# An engine may count a stop token its usage leaves out (or the other way round): one token of
# slack per answered request.
TOKEN_SLACK_PER_ANSWER = 1
_NO_TOKENS_OUTCOMES = ("rejected",)  # refused before any work: nothing counted, nothing generated


@dataclass(frozen=True)
class CounterFacts:
    """The bracket's deltas and the client's bounds on them."""

    server_requests: float | None  # requests_finished_total after minus before; None: not exposed
    server_tokens: float | None  # generation_tokens_total after minus before
    backwards: tuple[str, ...]  # counters that went down (the engine restarted in the window)
    not_finite: tuple[str, ...]  # counters read as NaN or an infinity (legal Prometheus values, no count)
    sure_requests: int
    possible_requests: int
    sure_tokens: int | None  # None: some answer carried no usage count
    possible_tokens: float  # inf when a failed request had no max_tokens
    n_answered: int
    n_without_usage: int
    fan_out: str | None = None  # what one pooling request may count as ("inputs", "documents and the query")


def _deltas(telemetry: pa.Table) -> tuple[dict[str, float], tuple[str, ...], tuple[str, ...]]:
    """(each counter's finite change over the bracket, the counters that went down, those read as
    NaN or an infinity: Prometheus's text format allows them, and they count nothing)."""
    source, name = object_column(telemetry, "source"), object_column(telemetry, "name")
    value = numeric_column(telemetry, "value")
    reads: dict[str, dict[str, float]] = {BEFORE: {}, AFTER: {}}
    for tag, read in reads.items():
        mask = source == tag
        for counter, v in zip(name[mask], value[mask], strict=True):
            read[str(counter)] = read.get(str(counter), 0.0) + float(v)
    deltas = {k: reads[AFTER][k] - v for k, v in reads[BEFORE].items() if k in reads[AFTER]}
    return ({k: d for k, d in deltas.items() if d >= 0}, tuple(sorted(k for k, d in deltas.items() if d < 0)),
            tuple(sorted(k for k, d in deltas.items() if not math.isfinite(d))))


def _body_budget(body: object) -> float:
    budget = body.get("max_tokens", body.get("max_completion_tokens")) if isinstance(body, dict) else None
    return float(budget) if isinstance(budget, int) and budget >= 0 else math.inf


def _canary_bounds(canaries: pa.Table | None) -> tuple[int, int, int, float]:
    """(sure requests, possible requests, sure tokens, possible tokens) of the cases under load."""
    if canaries is None or "phase" not in canaries.column_names:
        return 0, 0, 0, 0.0
    rows = canaries.filter(pa.array(object_column(canaries, "phase") == "under_load"))
    sure_r = possible_r = sure_t = 0
    possible_t = 0.0
    for row in rows.select(["outcome", "requests", "completion_tokens"]).to_pylist():
        try:
            bodies = orjson.loads(row["requests"] or "[]")
        except orjson.JSONDecodeError:
            bodies = []
        bodies = bodies if isinstance(bodies, list) and bodies else [{}]
        answered = row["outcome"] in SUCCESS_OUTCOMES
        sure_r += len(bodies) if answered else len(bodies) - 1  # a case stops at its first failed turn
        possible_r += len(bodies)
        sure_t += int(row["completion_tokens"] or 0) if answered else 0
        possible_t += sum(_body_budget(b) for b in bodies)
    return sure_r, possible_r, sure_t, possible_t


def _accuracy_bounds(accuracy: pa.Table | None) -> tuple[int, int, int, float]:
    """(sure requests, possible requests, sure tokens, possible tokens) of the accuracy items under load."""
    if accuracy is None or accuracy.num_rows == 0:
        return 0, 0, 0, 0.0
    rows = [r for r in accuracy.select(["phase", "outcome", "completion_tokens", "max_tokens"]).to_pylist()
            if r["phase"] == "under_load"]
    answered = [r for r in rows if r["outcome"] in SUCCESS_OUTCOMES]
    sure_t = sum(int(r["completion_tokens"] or 0) for r in answered)
    cut = sum(float(r["max_tokens"] or 0) for r in rows if r["outcome"] not in SUCCESS_OUTCOMES)
    return len(answered), len(rows), sure_t, sure_t + cut


_FAN_OUT = {"embeddings": ("inputs", 0), "rerank": ("documents and the query", 1),
            "score": ("documents and the query", 1)}  # what each counts apart, and how many besides


def counter_facts(requests: pa.Table, telemetry: pa.Table | None, canaries: pa.Table | None,
                  accuracy: pa.Table | None = None, api: str | None = None) -> CounterFacts | None:
    """The facts of the bracket; None when the run kept none (an engine without counters, no
    /metrics, telemetry off, or a run older than the bracket). `api`: the endpoint kind, where
    one request may count as several (rules version 12 on; None: one each)."""
    if telemetry is None or "source" not in telemetry.column_names:
        return None
    deltas, backwards, not_finite = _deltas(telemetry)
    if not deltas and not backwards and not not_finite:
        return None
    outcome = object_column(requests, "outcome")
    answered = np.isin(outcome, SUCCESS_OUTCOMES)
    failed = ~answered & ~np.isin(outcome, _NO_TOKENS_OUTCOMES)
    tokens = numeric_column(requests, "completion_tokens")
    from_server = object_column(requests, "tokens_source") == "server"
    budget = numeric_column(requests, "max_tokens")
    n_answered = int(answered.sum())
    without_usage = int((answered & ~from_server).sum())
    answer_tokens = int(np.nansum(tokens[answered & from_server]))
    cut_budget = budget[failed]
    failed_tokens = math.inf if np.isnan(cut_budget).any() else float(cut_budget.sum())
    fan_out, extra = _FAN_OUT.get(api or "", (None, 0))
    counted = np.ones(len(outcome))  # the most requests the engine may count for each row
    if fan_out is not None and "n_inputs" in requests.column_names:
        inputs = numeric_column(requests, "n_inputs")
        counted = np.where(np.isnan(inputs), 1.0, np.maximum(1.0, np.nan_to_num(inputs) + extra))
    c_sure_r, c_possible_r, c_sure_t, c_possible_t = _canary_bounds(canaries)
    a_sure_r, a_possible_r, a_sure_t, a_possible_t = _accuracy_bounds(accuracy)
    c_sure_r, c_possible_r, c_sure_t, c_possible_t = (c_sure_r + a_sure_r, c_possible_r + a_possible_r,
                                                      c_sure_t + a_sure_t, c_possible_t + a_possible_t)
    return CounterFacts(
        server_requests=deltas.get("requests_finished_total"), server_tokens=deltas.get("generation_tokens_total"),
        backwards=backwards, not_finite=not_finite, sure_requests=n_answered + c_sure_r,
        possible_requests=int(counted[answered | failed].sum()) + c_possible_r,
        sure_tokens=None if without_usage else answer_tokens + c_sure_t,
        possible_tokens=math.inf if without_usage else answer_tokens + failed_tokens + c_possible_t,
        n_answered=n_answered, n_without_usage=without_usage, fan_out=fan_out)
