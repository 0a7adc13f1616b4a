"""A passport's `results`, recomputed from the run folder's raw files and declarations.

`compute_results(run_dir)` is the one function that produces the figures, at the end of a run
and again in `passport verify`: it reads `requests`, `chunks` and `telemetry` Parquet (or their
`.parts/`), `engine.log`, `declared.json` and `canaries.parquet` (for the `canary_failed`
discard rule), nothing else. numpy and pyarrow only.

Conventions (the metric definitions themselves are in `passport.metrics`):
- Only requests with `phase == "measure"` count; warm-up requests never do, nor do the requests
  of a repetition discarded by a pre-registered rule (`passport.discard`).
- Success = outcome `ok` or `truncated`; every other outcome is a failure.
- Latencies are in seconds; success-only stats use successful requests that have the event;
  failure-inclusive stats add each failed request as +infinity.
- Each repetition's window runs from its first measured `sent_ns` to its last measured
  `end_ns`; rates (throughput, goodput) are per window, summarized over repetitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from passport.declared import read_declared
from passport.discard import RepetitionData, evaluate_discards
from passport.metrics import (
    METRICS,
    REQUEST_LATENCY_IDS,
    SUCCESS_OUTCOMES,
    itl_gaps_by_request,
    load_table,
    numeric_column,
    object_column,
    request_latencies,
    stat,
)
from passport.server_stats import server_summary
from passport.slo import requests_meeting, target_results
from passport.traffic import traffic_results

if TYPE_CHECKING:
    from passport._model import Passport

__all__ = ["compute_results", "per_request_samples", "discarded_repetitions"]


def _rate_stat(values: list[float]) -> dict[str, Any]:
    arr = np.array(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if not len(arr):
        return {"n": 0}
    return {"n": int(len(arr)), "mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if len(arr) > 1 else 0.0,
            "min": float(arr.min()), "max": float(arr.max())}


def _time_weighted(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[float, int]:
    """Time-weighted mean and max of overlapping [start, end) intervals within [lo, hi]."""
    starts, ends = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    keep = ends > starts
    times = np.concatenate([starts[keep], ends[keep]])
    steps = np.concatenate([np.ones(keep.sum()), -np.ones(keep.sum())])
    order = np.lexsort((steps, times))  # at equal times, ends (-1) before starts
    times, steps = times[order], steps[order]
    level = np.cumsum(steps)
    if not len(times) or hi <= lo:
        return 0.0, 0
    area = float(np.sum(level[:-1] * np.diff(times)))
    return area / (hi - lo), int(level.max())


def _engine_log(run_dir: Path) -> str:
    path = run_dir / "engine.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def compute_results(run_dir: Path) -> dict[str, Any]:
    """Every figure of `results` (see Results in _model.py), recomputed from the raw files."""
    run_dir = Path(run_dir)
    requests = load_table(run_dir, "requests")
    if requests is None:
        raise FileNotFoundError(f"{run_dir} has no requests.parquet (nor requests.parts/)")
    chunks = load_table(run_dir, "chunks")
    telemetry = load_table(run_dir, "telemetry")
    declared = read_declared(run_dir)

    outcome = object_column(requests, "outcome")
    rep = numeric_column(requests, "repetition")
    request_ids = numeric_column(requests, "request_id")
    latencies = request_latencies(requests)
    success = np.isin(outcome, SUCCESS_OUTCOMES)
    gaps_by_request = itl_gaps_by_request(chunks, request_ids[success])
    discard = evaluate_discards(declared, RepetitionData(requests, telemetry, _engine_log(run_dir), latencies,
                                                         gaps_by_request, load_table(run_dir, "canaries")))
    discarded_reps = [d["repetition"] for d in discard["discarded"]]
    measured = (object_column(requests, "phase") == "measure") & ~np.isin(rep, discarded_reps)
    ok_m = measured & success
    n_failed = int((measured & ~success).sum())

    metrics: dict[str, Any] = {}
    inclusive: dict[str, Any] = {}
    for metric_id in REQUEST_LATENCY_IDS:
        metrics[metric_id] = stat(latencies[metric_id][ok_m])
        if METRICS[metric_id].failure_inclusive:
            inclusive[metric_id] = stat(latencies[metric_id][ok_m], n_failed)
    lag = latencies["dispatch_lag"]
    metrics["dispatch_lag"] = stat(lag[measured & np.isfinite(lag)])
    metrics["tpot"] = stat(latencies["tpot"][ok_m])
    completion = numeric_column(requests, "completion_tokens")
    prompt = numeric_column(requests, "prompt_tokens")

    ok_ids = set(request_ids[ok_m].tolist())
    gaps = [g for rid, g in gaps_by_request.items() if rid in ok_ids]
    itl = np.concatenate(gaps) if gaps else np.zeros(0)
    metrics["itl.chunk"] = stat(itl)

    meets = (requests_meeting(declared.slo, latencies, success, gaps_by_request, request_ids) & measured
             if declared.slo else None)
    sent, end = numeric_column(requests, "sent_ns"), numeric_column(requests, "end_ns")
    windows: list[dict[str, Any]] = []
    rate_ids = ["throughput.output_tokens_per_s", "throughput.total_tokens_per_s", "throughput.requests_per_s"]
    if meets is not None:
        rate_ids += ["goodput.requests_per_s", "goodput.output_tokens_per_s"]
    rates: dict[str, list[float]] = {k: [] for k in rate_ids}
    conc_means: list[float] = []
    conc_max = 0
    for r in sorted({int(x) for x in rep[measured] if np.isfinite(x)}):
        in_rep = rep == r
        m = measured & in_rep & np.isfinite(sent)
        if not m.any():
            windows.append({"repetition": r, "start_ns": None, "end_ns": None, "duration_s": None,
                            "measured_requests": 0})
            continue
        lo, hi = float(np.nanmin(sent[m])), float(np.nanmax(end[m]))
        duration_s = (hi - lo) / 1e9
        windows.append({"repetition": r, "start_ns": int(lo), "end_ns": int(hi), "duration_s": duration_s,
                        "measured_requests": int((measured & in_rep).sum())})
        good = ok_m & in_rep
        if duration_s > 0:
            rates["throughput.output_tokens_per_s"].append(float(np.nansum(completion[good])) / duration_s)
            rates["throughput.total_tokens_per_s"].append(
                float(np.nansum(completion[good]) + np.nansum(prompt[good])) / duration_s)
            rates["throughput.requests_per_s"].append(float(good.sum()) / duration_s)
            if meets is not None:
                met = meets & in_rep
                rates["goodput.requests_per_s"].append(float(met.sum()) / duration_s)
                rates["goodput.output_tokens_per_s"].append(float(np.nansum(completion[met])) / duration_s)
        valid = in_rep & np.isfinite(sent) & np.isfinite(end)
        mean_c, max_c = _time_weighted(sent[valid], end[valid], lo, hi)
        conc_means.append(mean_c)
        conc_max = max(conc_max, max_c)
    for key, values in rates.items():
        metrics[key] = _rate_stat(values)
    metrics["concurrency"] = _rate_stat(conc_means)
    if conc_means:
        metrics["concurrency"]["max"] = float(conc_max)

    slo: dict[str, Any] | None = None
    if meets is not None:
        targets = target_results(declared.slo, latencies, ok_m, n_failed, itl)
        n_measured = int(measured.sum())
        slo = {"targets": targets, "met": all(t["met"] for t in targets),
               "requests_meeting": int(meets.sum()), "requests_measured": n_measured,
               "attainment": float(meets.sum()) / n_measured if n_measured else None}

    cached = numeric_column(requests, "cached_tokens")[ok_m]
    reporting = np.isfinite(cached)
    prompt_ok = prompt[ok_m]
    cache_usage = None
    if reporting.any():
        total_prompt = float(np.nansum(prompt_ok[reporting]))
        cache_usage = {"requests_reporting": int(reporting.sum()), "cached_tokens": int(np.nansum(cached)),
                       "share_of_prompt_tokens": float(np.nansum(cached)) / total_prompt if total_prompt else None}

    outcomes = {str(k): int(v) for k, v in zip(*np.unique(outcome[measured].astype(str), return_counts=True))}

    spans = [(float(w["start_ns"]), float(w["end_ns"])) for w in windows if w["start_ns"] is not None]
    server = server_summary(telemetry, spans)
    peak: dict[str, Any] = {"value_bytes": None, "source": None,
                            "reason": "no engine process was launched by the harness and no GPU memory was "
                                      "sampled (NVML, a DCGM exporter or TRT-LLM's /metrics)"}
    cpu_mean = cpu_max = lag_p99 = None
    restarts = None
    if telemetry is not None and telemetry.num_rows:
        source = object_column(telemetry, "source")
        name = object_column(telemetry, "name")
        value = numeric_column(telemetry, "value")
        rss = value[(source == "engine") & (name == "rss_bytes")]
        if server is not None and server["gpu_memory_peak_bytes"] is not None:
            peak = {"value_bytes": server["gpu_memory_peak_bytes"],
                    "source": f"GPU memory used ({server['gpu_source']})", "reason": None}
        elif len(rss):
            peak = {"value_bytes": int(rss.max()), "source": "engine process tree RSS (psutil)", "reason": None}
        if ((source == "engine") & (name == "launched")).any():
            restarts = int(((source == "engine") & (name == "exit")).sum())
        cpu = value[(source == "client") & (name == "cpu_share")]
        if len(cpu):
            cpu_mean, cpu_max = float(cpu.mean()), float(cpu.max())
        loop_lag = value[(source == "client") & (name == "loop_lag_ms")]
        if len(loop_lag):
            lag_p99 = float(np.percentile(loop_lag, 99))
    dispatch_p99 = metrics["dispatch_lag"].get("p99")
    return {
        "metrics": metrics,
        "metrics_failure_inclusive": inclusive,
        "outcomes": outcomes,
        "windows": windows,
        "peak_memory": peak,
        "engine_restarts": restarts,
        "client": {
            "cpu_share_mean": cpu_mean,
            "cpu_share_max": cpu_max,
            "loop_lag_p99_ms": lag_p99,
            "dispatch_lag_p99_ms": None if dispatch_p99 is None else dispatch_p99 * 1000.0,
        },
        "server": server,
        "prefix_cache_usage": cache_usage,
        "slo": slo,
        "discard": discard if discard["rules"] else None,
        **traffic_results(requests, measured, latencies),
    }


def discarded_repetitions(passport: Passport) -> list[int]:
    """The repetitions a passport's pre-registered rules discarded."""
    discard = passport.results.discard
    return [] if discard is None else [d.repetition for d in discard.discarded]


def per_request_samples(run_dir: Path, discarded: list[int],
                        metric_ids: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
    """Samples of each successful measured request by metric id, as the results count them: one
    value per request, or for `itl.chunk` its array of gaps (requests without the event omitted)."""
    requests = load_table(Path(run_dir), "requests")
    if requests is None:
        raise FileNotFoundError(f"{run_dir} has no requests.parquet (nor requests.parts/)")
    keep = ((object_column(requests, "phase") == "measure")
            & ~np.isin(numeric_column(requests, "repetition"), discarded)
            & np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES))
    latencies = request_latencies(requests)
    samples = {metric: [np.array([v]) for v in latencies[metric][keep] if np.isfinite(v)]
               for metric in metric_ids if metric != "itl.chunk"}
    if "itl.chunk" in metric_ids:
        ids = numeric_column(requests, "request_id")[keep]
        samples["itl.chunk"] = list(itl_gaps_by_request(load_table(Path(run_dir), "chunks"), ids).values())
    return samples
