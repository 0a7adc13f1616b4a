"""Other tools' result files of a run, for the scripts and dashboards that read them: guidellm's
`benchmarks.json` (its report schema, version 2, guidellm 0.8) and NVIDIA AIPerf's
`profile_export_aiperf.json` (its export schema 1.4, AIPerf 0.13). Every figure comes from the
run's raw logs under that tool's own definitions (`_views.tool_view`: where its clock starts,
which event is the first token, how it divides TPOT, how it takes a percentile).

What they carry, and what not (also said in each file, under the key `passport`, which both
tools' readers ignore):
- one benchmark: the run's measured window, its successful requests' distributions;
- guidellm's rates and concurrency (`requests_per_second`, `output_tokens_per_second`,
  `tokens_per_second`, `request_concurrency`) are distributions over time in guidellm; their
  duration-weighted mean is the window's count over its duration (and the concurrency's, the sum
  of latencies over it), which is what passport writes as every statistic of them; their spread
  over time is not rebuilt;
- failed requests are counted (`request_totals.errored`, `error_request_count`), their latencies
  are not exported; guidellm's scheduler timings passport does not have (its queueing and
  resolve delays) are written as 0.0 and named in `passport.not_measured`;
- no per-request records: the run folder's Parquet holds every request.
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np

from passport.audit._views import ToolView, inverse_cdf

__all__ = ["guidellm_report", "aiperf_export", "GUIDELLM_PERCENTILES"]

GUIDELLM_PERCENTILES = {"p001": 0.001, "p01": 0.01, "p05": 0.05, "p10": 0.1, "p25": 0.25, "p50": 0.5, "p75": 0.75,
                        "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
_AIPERF_PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
_NOT_MEASURED = ("queued_time_avg", "resolve_start_delay_avg", "resolve_targeted_start_delay_avg",
                 "resolve_end_delay_avg", "finalized_delay_avg", "processed_delay_avg")


def _distribution(values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, Any]:
    """guidellm's DistributionSummary of samples (DistributionSummary.from_values): its statistics,
    its percentiles by inverse CDF, each sample weighing the same or its `weights` (a weight of 0
    left out; count: the weights' sum, rounded); all 0.0 with count 0 when there are none, as
    guidellm writes."""
    keep = np.isfinite(values) if weights is None else np.isfinite(values) & (weights > 0)
    values = values[keep]
    w = np.ones(len(values)) if weights is None else weights[keep].astype(float)
    if not len(values):
        return {"mean": 0.0, "median": 0.0, "mode": 0.0, "variance": 0.0, "std_dev": 0.0, "min": 0.0, "max": 0.0,
                "count": 0, "total_sum": 0.0, "percentiles": dict.fromkeys(GUIDELLM_PERCENTILES, 0.0), "pdf": None}
    unique, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=w, minlength=len(unique))
    mean = float(np.average(values, weights=w))
    variance = float(np.average((values - mean) ** 2, weights=w))
    count = int(round(float(w.sum())))
    return {"mean": mean, "median": inverse_cdf(values, 0.5, w), "mode": float(unique[int(np.argmax(mass))]),
            "variance": variance, "std_dev": variance ** 0.5, "min": float(values.min()),
            "max": float(values.max()), "count": count, "total_sum": mean * count,
            "percentiles": {k: inverse_cdf(values, q, w) for k, q in GUIDELLM_PERCENTILES.items()}, "pdf": None}


def _level(value: float, count: int) -> dict[str, Any]:
    """A rate or concurrency as every statistic (see the module docstring)."""
    return {**_distribution(np.array([value])), "count": count, "total_sum": value * count}


def _by_status(successful: dict[str, Any]) -> dict[str, Any]:
    empty = _distribution(np.zeros(0))
    return {"successful": successful, "errored": empty, "incomplete": empty, "total": successful}


def _modality() -> dict[str, None]:
    """A modality's figure passport has none of (words, characters, images, audio, ...)."""
    return dict.fromkeys(("input", "input_per_second", "input_concurrency", "output", "output_per_second",
                          "output_concurrency", "total", "total_per_second", "total_concurrency"))


def _strategy(load: dict[str, Any]) -> dict[str, Any]:
    pattern, users = load.get("pattern"), load.get("concurrency")
    if pattern == "closed":
        return {"type_": "synchronous"} if users == 1 else {"type_": "concurrent", "streams": int(users or 1)}
    kind = "constant" if pattern == "constant" else "poisson"  # gamma: guidellm has no such strategy
    return {"type_": kind, "rate": float(load.get("rate_per_s") or 0.0),
            **({"max_concurrency": int(users)} if users else {})}


def _figure(view: ToolView, name: str) -> np.ndarray:
    return next(f.samples for f in view.figures if f.name == name)


def _weighed(view: ToolView, name: str) -> dict[str, Any]:
    """One of the view's figures as guidellm's distribution of its samples, weighed as guidellm does."""
    figure = next(f for f in view.figures if f.name == name)
    return _distribution(figure.samples, figure.weights)


def _total(view: ToolView, name: str) -> float:
    return next(t.value for t in view.totals if t.name == name)


def _benchmark(passport: dict[str, Any], view: ToolView, index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(one run as a guidellm benchmark, its profile and data for the report's config)."""
    failed = view.failed
    effective = passport["protocol"]["effective"]
    load, endpoint = effective["load"], effective["endpoint"]
    start_s, end_s = view.per_request["start_s"], view.per_request["end_s"]
    t0, t1 = (min(start_s), max(end_s)) if start_s else (0.0, 0.0)
    duration_s = _total(view, "duration (s)") if view.requests else 0.0
    n = view.requests
    prompt, out = _figure(view, "prompt_token_count"), _figure(view, "output_token_count")
    latency_s = _figure(view, "request_latency")
    concurrency = float(np.nansum(latency_s)) / duration_s if duration_s else 0.0
    strategy = _strategy(load)
    rates = {name: _by_status(_level(_total(view, name) if n else 0.0, count)) for name, count in (
        ("requests_per_second", n), ("output_tokens_per_second", int(np.nansum(out))),
        ("tokens_per_second", int(np.nansum(out) + np.nansum(prompt))))}
    prompt_rate = float(np.nansum(prompt)) / duration_s if duration_s else 0.0
    ttft = _distribution(_figure(view, "time_to_first_token_ms"))
    iterations = np.array(view.per_request["iterations"], dtype=np.float64)
    token_iterations = np.array(view.per_request["token_iterations"], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_iteration = np.where(token_iterations > 0, out / token_iterations, np.nan)
    # one value per token-bearing event (all of them; after the first), as guidellm counts them
    ok = np.isfinite(per_iteration)
    each = np.repeat(per_iteration[ok], token_iterations[ok].astype(int))
    after_first = np.repeat(per_iteration[ok], np.clip(token_iterations[ok] - 1, 0, None).astype(int))
    none = _by_status(_distribution(np.zeros(0)))
    text_tokens = {"input": _by_status(_distribution(prompt)), "output": _by_status(_distribution(out)),
                   "total": _by_status(_distribution(prompt + out)),
                   "input_per_second": _by_status(_level(prompt_rate, int(np.nansum(prompt)))),
                   "output_per_second": rates["output_tokens_per_second"],
                   "total_per_second": rates["tokens_per_second"],
                   "input_concurrency": None, "output_concurrency": None, "total_concurrency": None}
    metrics = {
        "request_streaming_iterations_count": _by_status(_distribution(iterations)),
        "output_tokens_per_iteration": _by_status(_distribution(each)),
        "iter_tokens_per_iteration": _by_status(_distribution(after_first)),
        "time_to_last_round_trip_ms": none, "avg_round_trip_time_ms": none,
        "text": {"tokens": text_tokens, "words": _modality(), "characters": _modality()},
        "image": {k: _modality() for k in ("tokens", "images", "pixels", "bytes")},
        "video": {k: _modality() for k in ("tokens", "frames", "seconds", "bytes")},
        "audio": {k: _modality() for k in ("tokens", "samples", "seconds", "bytes")},
        "tool_call": {k: _modality() for k in ("tokens", "mixed_tokens", "count")},
        "request_totals": {"successful": n, "errored": failed, "incomplete": 0, "total": n + failed},
        **rates,
        "prompt_tokens_per_second": _by_status(_level(prompt_rate, int(np.nansum(prompt)))),
        "request_concurrency": _by_status(_level(concurrency, n)),
        "request_latency": _by_status(_distribution(latency_s)),
        "prompt_token_count": _by_status(_distribution(prompt)),
        "output_token_count": _by_status(_distribution(out)),
        "total_token_count": _by_status(_distribution(prompt + out)),
        "time_to_first_token_ms": _by_status(ttft),
        "time_to_first_output_token_ms": _by_status(ttft),
        "time_per_output_token_ms": _by_status(_weighed(view, "time_per_output_token_ms")),
        "inter_token_latency_ms": _by_status(_weighed(view, "inter_token_latency_ms")),
    }
    made = {"successful": n, "errored": failed, "incomplete": 0, "total": n + failed}
    scheduler = {"start_time": t0, "request_start_time": t0, "measure_start_time": t0, "measure_end_time": t1,
                 "request_end_time": t1, "end_time": t1, "requests_made": made,
                 "request_start_delay_avg": 0.0, "request_targeted_start_delay_avg": 0.0,
                 "request_time_avg": float(np.nanmean(latency_s)) if n else 0.0,
                 "resolve_time_avg": float(np.nanmean(latency_s)) if n else 0.0,
                 **dict.fromkeys(_NOT_MEASURED, 0.0)}
    data = {"kind": "synthetic_text", "prompt_tokens": int(round(float(np.nanmean(prompt)))) if n else 0,
            "output_tokens": int(round(float(np.nanmean(out)))) if n else 0}
    profile = {"kind": strategy["type_"], **({"streams": [strategy["streams"]]} if "streams" in strategy else {}),
               **({"rate": [strategy["rate"]]} if "rate" in strategy else {})}
    benchmark: dict[str, Any] = {
        "type_": "generative_benchmark",
        "config": {"run_id": str(passport.get("run_id") or ""), "run_index": index, "strategy": strategy,
                   "constraints": {}, "profile": profile, "requests": {}, "backend": {}, "environment": {}},
        "scheduler_state": {}, "scheduler_metrics": scheduler, "metrics": metrics,
        "requests": {"successful": [], "errored": [], "incomplete": [], "total": None},
        "start_time": t0, "end_time": t1, "duration": duration_s, "warmup_duration": 0.0, "cooldown_duration": 0.0}
    config = {"backend": {"kind": "openai_http", "target": str(endpoint.get("base_url") or ""),
                          "model": str(endpoint.get("model") or "")}, "profile": profile, "data": [data]}
    return benchmark, config


def guidellm_report(runs: list[tuple[dict[str, Any], ToolView]], version: str) -> dict[str, Any]:
    """guidellm's report of runs (each a passport and its guidellm view; a sweep's levels in
    order, as guidellm lists a sweep's benchmarks); `version` is passport's."""
    built = [_benchmark(p, view, i) for i, (p, view) in enumerate(runs)]
    return {
        "metadata": {"version": 2, "guidellm_version": f"passport {version}", "python_version":
                     platform.python_version(), "platform": platform.platform()},
        "config": {"spec": built[0][1]},
        "benchmarks": [b for b, _ in built],
        "conclusions": [],
        "passport": {"runs": [{"run_id": p.get("run_id"), "content_sha256": p.get("content_sha256")} for p, _ in runs],
                     "not_measured": list(_NOT_MEASURED) + ["request_start_delay_avg",
                                                            "request_targeted_start_delay_avg",
                                                            "time_to_last_round_trip_ms", "avg_round_trip_time_ms",
                                                            "text.words", "text.characters",
                                                            "text.tokens.*_concurrency"],
                     "distributions_as_means": ["requests_per_second", "output_tokens_per_second",
                                                "tokens_per_second", "prompt_tokens_per_second",
                                                "request_concurrency"],
                     "note": "written by passport from the runs' raw logs under guidellm's definitions; see "
                             "passport.audit._peer_files"},
    }


def _aiperf_metric(values: np.ndarray, unit: str) -> dict[str, Any]:
    """AIPerf's JsonMetricResult of samples: avg, p1..p99 (numpy's linear percentile), min, max,
    std (population) and count."""
    values = values[np.isfinite(values)]
    if not len(values):
        return {"unit": unit, "count": 0}
    return {"unit": unit, "avg": float(np.mean(values)),
            **{f"p{p}": float(np.percentile(values, p)) for p in _AIPERF_PERCENTILES},
            "min": float(values.min()), "max": float(values.max()), "std": float(np.std(values)),
            "count": int(len(values)), "sum": float(values.sum())}


def aiperf_export(passport: dict[str, Any], view: ToolView, version: str) -> dict[str, Any]:
    """AIPerf's profile_export_aiperf.json of the run: `view` is its AIPerf view."""
    failed = view.failed
    shown = {"Time to First Token": ("time_to_first_token", "ms"), "Inter Token Latency": ("inter_token_latency", "ms"),
             "Inter Chunk Latency": ("inter_chunk_latency", "ms"), "Request Latency": ("request_latency", "ms"),
             "Output Token Throughput Per User": ("output_token_throughput_per_user", "tokens/sec/user"),
             "Output Sequence Length": ("output_sequence_length", "tokens"),
             "Input Sequence Length": ("input_sequence_length", "tokens")}
    out: dict[str, Any] = {"schema_version": "1.4", "aiperf_version": f"passport {version}",
                           "benchmark_id": passport.get("run_id")}
    for f in view.figures:
        key, unit = shown[f.name]
        out[key] = _aiperf_metric(f.samples, unit)
    out["request_throughput"] = {"unit": "requests/sec", "avg": _total(view, "Request Throughput (requests/sec)")}
    out["output_token_throughput"] = {"unit": "tokens/sec",
                                      "avg": _total(view, "Output Token Throughput (tokens/sec)")}
    out["request_count"] = {"unit": "requests", "avg": float(view.requests)}
    out["error_request_count"] = {"unit": "requests", "avg": float(failed)}
    lengths = out.get("output_sequence_length", {})
    out["total_output_tokens"] = {"unit": "tokens", "avg": float(lengths.get("sum", 0.0))}
    duration_s = view.requests / out["request_throughput"]["avg"] if out["request_throughput"]["avg"] else 0.0
    out["benchmark_duration"] = {"unit": "sec", "avg": duration_s}
    out["was_cancelled"] = passport.get("verdict") == "INCOMPLETE"
    out["is_complete"] = passport.get("verdict") != "INCOMPLETE"
    out["passport"] = {"run_id": passport.get("run_id"), "content_sha256": passport.get("content_sha256"),
                       "note": "written by passport from the run's raw logs under AIPerf's definitions; see "
                               "passport.audit._peer_files"}
    return out
