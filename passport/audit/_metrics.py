"""Metric definitions and the primitives that compute them from a run folder's Parquet files.

This module is the one place a metric is defined. Each id has a version, a unit and a one-line
definition; the functions here turn `requests.parquet` and `chunks.parquet` (or their `.parts/`
folders, if a run was killed) into per-request samples and summaries. `compute_results`
assembles a passport's `results` from them. numpy and pyarrow only, so an auditor can run it
without the load generator or an endpoint.

Conventions:
- Only requests with `phase == "measure"` count; warm-up requests never do.
- Success = outcome `ok` or `truncated`; every other outcome is a failure.
- Latencies are in seconds; success-only stats use successful requests that have the event;
  failure-inclusive stats add each failed request as +infinity.
- Each repetition's window runs from its first measured `sent_ns` to its last measured
  `end_ns`; rates are per window, summarized over repetitions.
- Percentiles: numpy's 'linear' method (Hyndman-Fan type 7). 95 % confidence intervals of
  percentiles from binomial order statistics (exact, distribution-free).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from passport.audit._types import StatFigures

__all__ = ["MetricDef", "MetricKind", "METRICS", "PERCENTILES", "stat", "empty_stat", "SUCCESS_OUTCOMES",
           "distinct_ints", "stat_value", "numeric_column", "object_column", "request_latencies", "itl_gaps_by_request",
           "itl_samples_by_request", "tokens_per_chunk", "output_tokens",
           "REQUEST_LATENCY_IDS", "send_lag_ns"]

SUCCESS_OUTCOMES = ("ok", "truncated")
PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}


MetricKind = Literal["latency", "rate", "level", "speed"]


@dataclass(frozen=True)
class MetricDef:
    """A metric id: `kind` is latency (per-request or per-gap samples), rate, level, or speed
    (per-request samples where higher is better)."""

    id: str
    version: int
    unit: str
    kind: MetricKind
    definition: str
    failure_inclusive: bool = False


_DEFS = [
    MetricDef("ttft.any", 1, "s", "latency",
              "first chunk carrying a generated token of any kind (content, reasoning, tool call) "
              "minus sent; role-only, empty and keep-alive events never count", True),
    MetricDef("ttft.content", 1, "s", "latency", "first chunk carrying content text minus sent", True),
    MetricDef("ttft.any.sched", 1, "s", "latency",
              "ttft.any measured from the intended send time (coordinated-omission-aware)", True),
    MetricDef("ttft.content.sched", 1, "s", "latency", "ttft.content measured from the intended send time", True),
    MetricDef("itl.chunk", 1, "s", "latency",
              "gaps between consecutive token-bearing chunks of a request, pooled over requests"),
    MetricDef("itl.token", 1, "s", "latency",
              "each token after a request's first token-bearing chunk: its chunk's gap divided over the tokens "
              "the chunk carries (k tokens in one chunk are k samples of gap / k), pooled over tokens. A "
              "chunk's tokens: the request's output tokens (usage, else our count) shared over its "
              "token-bearing chunks by the characters each carries, at least one each, in whole tokens "
              "(exact when every chunk carries one token: then itl.chunk). Its mean is the gaps' sum over the "
              "tokens after the first chunk: guidellm's token-weighted ITL when the first chunk carries one"),
    MetricDef("tpot", 1, "s", "latency",
              "(last token - first token) / (completion tokens - 1), per request with >= 2 tokens"),
    MetricDef("e2e", 1, "s", "latency", "end (last byte) minus sent", True),
    MetricDef("tps.user", 1, "tokens/s", "speed",
              "completion tokens / (end - first token), per request with >= 2 tokens: the decode speed "
              "one user sees (higher is better; the slow tail is the low percentiles)"),
    MetricDef("e2e.sched", 1, "s", "latency", "end minus intended send time", True),
    MetricDef("dispatch_lag", 2, "s", "latency",
              "sent minus intended, less the new connection's setup time (connect_ns, the server's "
              "accept, which *.sched metrics keep): how late the harness itself sent (open loop: "
              "deadline; closed loop: user free); a request that found an open loop's in-flight cap "
              "full counts from the moment the cap let it go (slot_ns, raw schema 5): its wait before "
              "is slot_wait, the cap's, not the harness's"),
    MetricDef("slot_wait", 1, "s", "latency",
              "an open loop with an in-flight cap (load.concurrency): slot_ns minus intended, over the "
              "measured requests that found the cap full when they were due (those that found a slot "
              "free are not samples); its n is how many waited"),
    MetricDef("throughput.output_tokens_per_s", 1, "tokens/s", "rate",
              "completion tokens of successful measured requests / window duration"),
    MetricDef("throughput.total_tokens_per_s", 1, "tokens/s", "rate",
              "prompt + completion tokens of successful measured requests / window duration"),
    MetricDef("throughput.requests_per_s", 1, "requests/s", "rate",
              "successful measured requests / window duration"),
    MetricDef("goodput.requests_per_s", 1, "requests/s", "rate",
              "measured requests that succeeded and met every declared SLO target / window duration "
              "(only when the spec declares `slo`)"),
    MetricDef("goodput.output_tokens_per_s", 1, "tokens/s", "rate",
              "completion tokens of the requests counted by goodput.requests_per_s / window duration"),
    MetricDef("throughput.inputs_per_s", 1, "inputs/s", "rate",
              "embeddings: inputs (texts) of successful measured requests / window duration"),
    MetricDef("throughput.documents_per_s", 1, "documents/s", "rate",
              "rerank and score: documents scored by successful measured requests / window duration"),
    MetricDef("throughput.input_tokens_per_s", 1, "tokens/s", "rate",
              "embeddings, rerank and score: prompt tokens (usage) of successful measured requests / window "
              "duration"),
    MetricDef("throughput.audio_s_per_s", 1, "audio s/s", "rate",
              "audio transcription: seconds of audio in successful measured requests / window duration (the "
              "run's real-time factor as audio seconds per wall second, RTFx)"),
    MetricDef("rtfx.request", 1, "audio s/s", "speed",
              "audio transcription: the clip's seconds / (end - sent), per request: how many times faster than "
              "real time one request was transcribed (higher is better; RTF is its inverse; vLLM's `rtfx` is the "
              "run's, throughput.audio_s_per_s)"),
    MetricDef("concurrency", 1, "requests", "level",
              "requests in flight (sent..end, any phase) over the window: mean is time-weighted, "
              "max is the peak"),
]
METRICS: dict[str, MetricDef] = {d.id: d for d in _DEFS}

_LATENCY_COLUMNS = {
    "ttft.any": ("first_token_ns", "sent_ns"),
    "ttft.content": ("first_content_ns", "sent_ns"),
    "ttft.any.sched": ("first_token_ns", "intended_ns"),
    "ttft.content.sched": ("first_content_ns", "intended_ns"),
    "e2e": ("end_ns", "sent_ns"),
    "e2e.sched": ("end_ns", "intended_ns"),
}
REQUEST_LATENCY_IDS = tuple(_LATENCY_COLUMNS)  # one value per request, from two timestamps


def numeric_column(table: pa.Table, name: str) -> np.ndarray:
    """A column as float64 with NaN for null (ns fit exactly below 2**53, i.e. 104 days)."""
    column = table.column(name)
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def distinct_ints(values: np.ndarray) -> list[int]:
    """The distinct finite values of a float column, as ascending ints (repetitions, turns)."""
    return [int(x) for x in np.unique(values[np.isfinite(values)])]


def superseded(requests: pa.Table) -> np.ndarray:
    """Rows a retry replaced (`load.on_reject`): every attempt of a retried request but its
    last. A request counts once, by its last attempt; the attempts before it are counted as
    `retries`. All False for runs before raw schema 3 (no retries)."""
    n = requests.num_rows
    if "retry_of" not in requests.column_names or n == 0:
        return np.zeros(n, dtype=bool)
    first = numeric_column(requests, "retry_of")
    chain = np.where(np.isnan(first), numeric_column(requests, "request_id"), first)
    attempt = np.nan_to_num(numeric_column(requests, "attempt"))
    order = np.lexsort((attempt, chain))
    replaced = np.zeros(n, dtype=bool)
    replaced[order[:-1]] = chain[order[:-1]] == chain[order[1:]]  # a later attempt of the same request follows
    return replaced


def object_column(table: pa.Table, name: str) -> np.ndarray:
    """A column as a numpy object array (strings, booleans; None for null), for comparisons."""
    return np.array(table.column(name).to_pylist(), dtype=object)


@functools.lru_cache(maxsize=256)
def _binomial_ci(n: int, q: float, level: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) bracketing quantile q with >= `level` coverage, or None. Cached: a
    run asks it for the same few sample counts many times. The Binomial(n, q) mass is summed over
    a window around n*q wide enough that every term left out underflows to 0.0 (log mass below
    -750), so the ranks are those of the sum over all n + 1 terms, bit for bit, at a fraction of
    the cost (a full sum at n = 100,000 took 0.6 s of every `passport verify`)."""
    if n < 2:
        return None
    centre, width = n * q, 40.0 * math.sqrt(n * q * (1.0 - q)) + 64.0
    while True:
        first, last = max(0, math.floor(centre - width)), min(n, math.ceil(centre + width))
        logpmf = _binomial_logpmf(n, q, np.arange(first, last + 1))
        if (first == 0 or logpmf[0] < -750.0) and (last == n or logpmf[-1] < -750.0):
            break
        width *= 2.0
    cdf = np.cumsum(np.exp(logpmf))
    alpha = (1.0 - level) / 2.0
    lo = first + int(np.searchsorted(cdf, alpha, side="left"))  # P(B < lo+1) >= alpha
    above = int(np.searchsorted(cdf, 1.0 - alpha, side="left"))
    hi = (first + above if above < len(cdf) else n + 1) + 1
    if lo < 1 or hi > n:
        return None
    return lo - 1, hi - 1


def _binomial_logpmf(n: int, q: float, k: np.ndarray) -> np.ndarray:
    """log P(B = k) for B ~ Binomial(n, q), at each of the ranks `k`."""
    log_n = math.lgamma(n + 1)
    log_k = np.array([math.lgamma(i + 1) for i in k.tolist()])
    log_rest = np.array([math.lgamma(n - i + 1) for i in k.tolist()])
    out: np.ndarray = (log_n - log_k - log_rest) + k * math.log(q) + (n - k) * math.log1p(-q)
    return out


def _percentile(sorted_values: np.ndarray, pct: float) -> float | None:
    """Linear interpolation between order statistics (numpy 'linear'); None if it touches +inf."""
    rank = pct / 100.0 * (len(sorted_values) - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    a, b = sorted_values[lo], sorted_values[hi]
    if not np.isfinite(b if rank > lo else a):
        return None
    return float(a) if rank == lo else float(a + (b - a) * (rank - lo))


def empty_stat(n: int) -> StatFigures:
    """A summary of `n` samples with every statistic null, to be filled in."""
    return {"n": n, "mean": None, "std": None, "min": None, "max": None, "p50": None, "p90": None, "p95": None,
            "p99": None, "p99_9": None, "ci95": None, "n_failed": None}


def stat(samples: np.ndarray, n_failed: int = 0, with_ci: bool = True) -> StatFigures:
    """Summary of finite `samples` plus `n_failed` failures counted as +infinity."""
    values = np.sort(samples[np.isfinite(samples)])
    n = len(values) + n_failed
    out = cast(dict[str, Any], empty_stat(int(n)))
    if n_failed:
        out["n_failed"] = int(n_failed)
    if n == 0:
        return cast(StatFigures, out)
    full = np.concatenate([values, np.full(n_failed, np.inf)]) if n_failed else values
    if not n_failed:  # the mean, spread and maximum of a set holding +inf are undefined
        out["mean"] = float(values.mean())
        out["std"] = float(values.std(ddof=1)) if n > 1 else 0.0
        out["max"] = float(values[-1])
    out["min"] = float(full[0]) if np.isfinite(full[0]) else None
    for key, pct in PERCENTILES.items():
        out[key] = _percentile(full, pct)
    if with_ci:
        ci: dict[str, list[float] | None] = {}
        for key in ("p50", "p90", "p95", "p99"):
            ranks = _binomial_ci(n, PERCENTILES[key] / 100.0)
            if ranks is None or not np.isfinite(full[ranks[1]]):
                ci[key] = None
            else:
                ci[key] = [float(full[ranks[0]]), float(full[ranks[1]])]
        out["ci95"] = ci
    return cast(StatFigures, out)


def stat_value(figures: StatFigures, key: str) -> float | None:
    """One statistic of a summary by name (`p99`, `max`, ...), or None when it has no value."""
    value = cast(dict[str, Any], figures).get(key)
    return None if value is None else float(value)


def output_tokens(requests: pa.Table) -> np.ndarray:
    """Each request's output tokens: the server's usage, else our count (NaN when neither)."""
    server = numeric_column(requests, "completion_tokens")
    tokens: np.ndarray = np.where(np.isfinite(server), server, numeric_column(requests, "completion_tokens_client"))
    return tokens


def send_lag_ns(requests: pa.Table) -> np.ndarray:
    """How late the harness sent each request, in ns: sent minus intended, or minus the moment an
    open loop's in-flight cap let it go when it found the cap full (slot_ns): the wait for a slot
    is the load's (the cap the user declared), not the client's."""
    intended = numeric_column(requests, "intended_ns")
    if "slot_ns" in requests.column_names:
        intended = np.fmax(intended, numeric_column(requests, "slot_ns"))
    lag: np.ndarray = numeric_column(requests, "sent_ns") - intended
    return lag


def request_latencies(requests: pa.Table) -> dict[str, np.ndarray]:
    """Each per-request latency metric, in seconds, one value per row of `requests` (NaN where
    the event never happened): the `*.sched`, `ttft.*` and `e2e` ids, `tpot` and `dispatch_lag`."""
    out = {
        metric_id: (numeric_column(requests, end_col) - numeric_column(requests, start_col)) / 1e9
        for metric_id, (end_col, start_col) in _LATENCY_COLUMNS.items()
    }
    connect = np.nan_to_num(numeric_column(requests, "connect_ns"), nan=0.0)
    out["dispatch_lag"] = (send_lag_ns(requests) - connect) / 1e9
    intended = numeric_column(requests, "intended_ns")
    slot = numeric_column(requests, "slot_ns") if "slot_ns" in requests.column_names else np.full(len(intended),
                                                                                                  np.nan)
    out["slot_wait"] = np.where(slot > intended, slot - intended, np.nan) / 1e9
    completion = numeric_column(requests, "completion_tokens")
    first_tok, last_tok = numeric_column(requests, "first_token_ns"), numeric_column(requests, "last_token_ns")
    with np.errstate(invalid="ignore", divide="ignore"):
        out["tpot"] = np.where(completion > 1, (last_tok - first_tok) / (completion - 1) / 1e9, np.nan)
    return out


def _token_chunks(chunks: pa.Table | None,
                  request_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The token-bearing chunks of `request_ids` in (request id, seq) order: each one's request
    id, recv_ns and characters; None when there are none."""
    if chunks is None or not chunks.num_rows:
        return None
    c_rid = numeric_column(chunks, "request_id")
    mask = np.asarray(chunks.column("token_bearing").to_numpy(zero_copy_only=False), dtype=bool)
    mask &= np.isin(c_rid, request_ids)
    c_rid, c_seq, c_t = c_rid[mask], numeric_column(chunks, "seq")[mask], numeric_column(chunks, "recv_ns")[mask]
    c_chars = numeric_column(chunks, "n_chars")[mask]
    if not len(c_rid):
        return None
    order = np.lexsort((c_seq, c_rid))
    return c_rid[order], c_t[order], c_chars[order]


def itl_gaps_by_request(chunks: pa.Table | None, request_ids: np.ndarray) -> dict[int, np.ndarray]:
    """`itl.chunk` samples by request: for each of `request_ids` that streamed tokens, the gaps in
    seconds between its consecutive token-bearing chunks (in ascending request id order)."""
    return itl_samples_by_request(chunks, request_ids, None)[0]


def tokens_per_chunk(chars: np.ndarray, tokens: int) -> np.ndarray:
    """`tokens` shared over chunks carrying `chars` characters each, in whole tokens, at least one
    each, in proportion to the characters (largest remainders first; ties to the earlier chunk).
    Needs tokens >= len(chars); equal shares when no chunk carries a character."""
    n = len(chars)
    weights = np.where(np.isfinite(chars) & (chars > 0), chars, 0.0).astype(float)
    if weights.sum() <= 0:
        weights = np.ones(n)
    raw = tokens * weights / weights.sum()
    k: np.ndarray = np.maximum(1, np.floor(raw)).astype(np.int64)
    short = tokens - int(k.sum())
    if short > 0:  # the largest remainders get one more each
        k[np.argsort(-(raw - k), kind="stable")[:short]] += 1
    while short < 0:  # the floor of one made too many: the smallest remainders above one give one back
        over = np.flatnonzero(k > 1)
        take = over[np.argsort(raw[over] - k[over], kind="stable")[:-short]]
        k[take] -= 1
        short += len(take)
    return k


def itl_samples_by_request(chunks: pa.Table | None, request_ids: np.ndarray,
                           output_tokens: np.ndarray | None) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(`itl.chunk` gaps, `itl.token` samples) by request, from one pass over the chunks: for each
    of `request_ids` that streamed tokens, the gaps in seconds between its consecutive
    token-bearing chunks; and each later chunk's gap over its tokens, once per token
    (`tokens_per_chunk`, with `output_tokens` aligned with `request_ids`, NaN when unknown). A
    request whose count is unknown or not above its chunk count has one token a chunk: its
    itl.token samples are its itl.chunk gaps (the same array). Without `output_tokens`, no
    itl.token samples. Vectorized over requests: a run's worth of requests costs a few numpy
    passes, not a Python loop each."""
    found = _token_chunks(chunks, request_ids)
    if found is None:
        return {}, {}
    c_rid, c_t, c_chars = found
    ids, starts, counts = np.unique(c_rid, return_index=True, return_counts=True)
    # every gap at once: differences between neighbours of the same request, split by request
    later = np.ones(len(c_rid), dtype=bool)
    later[starts] = False  # a request's first chunk has no gap before it
    gap_before = np.concatenate([[0.0], np.diff(c_t) / 1e9])
    rid_list = [int(r) for r in ids.tolist()]
    gaps = np.split(gap_before[later], np.cumsum(counts - 1)[:-1])
    chunk = dict(zip(rid_list, gaps))
    if output_tokens is None:
        return chunk, {}
    order = np.argsort(request_ids, kind="stable")
    n = output_tokens[order][np.searchsorted(request_ids[order], ids)]
    many = np.isfinite(n) & (n > counts)
    if not many.any():
        return chunk, dict(chunk)
    # a request of one token a chunk shares its count evenly (one each, never the rare path below)
    k = _shares(np.where(np.repeat(many, counts), c_chars, 1.0), starts, counts,
                np.where(many, n, counts).astype(np.int64))
    per_token = np.repeat(gap_before[later] / k[later], k[later])
    token_counts = np.add.reduceat(np.where(later, k, 0), starts)
    token = dict(zip(rid_list, np.split(per_token, np.cumsum(token_counts)[:-1])))
    return chunk, {rid: token[rid] if wide else chunk[rid] for rid, wide in zip(rid_list, many.tolist())}


def _shares(chars: np.ndarray, starts: np.ndarray, counts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """`tokens_per_chunk` of every request at once: chunks grouped contiguously (group g from
    starts[g], counts[g] chunks) and tokens[g] >= counts[g] shared over each group."""
    group = np.repeat(np.arange(len(starts)), counts)
    weights = np.where(np.isfinite(chars) & (chars > 0), chars, 0.0).astype(float)
    total = np.add.reduceat(weights, starts)
    weights = np.where(total[group] > 0, weights, 1.0)  # no characters: equal shares
    raw = tokens[group] * weights / np.add.reduceat(weights, starts)[group]
    k: np.ndarray = np.maximum(1, np.floor(raw)).astype(np.int64)
    short = tokens - np.add.reduceat(k, starts)
    # the largest remainders get one more each (ties to the earlier chunk): rank within the group
    position = np.arange(len(k))
    ranked = np.lexsort((position, -(raw - k), group))
    rank = np.empty(len(k), dtype=np.int64)
    rank[ranked] = position - starts[group[ranked]]
    k += (rank < np.maximum(short, 0)[group]).astype(np.int64)
    for g in np.flatnonzero(short < 0):  # the floor of one made too many: rare, one request at a time
        span = slice(int(starts[g]), int(starts[g] + counts[g]))
        k[span] = tokens_per_chunk(chars[span], int(tokens[g]))
    return k
