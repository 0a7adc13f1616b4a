"""A passport's `results`, recomputed from the run folder's raw files and declarations.

`compute_results(run_dir)` is the one function that produces the figures, at the end of a run
and again in `passport verify`: it reads `requests`, `chunks` and `telemetry` Parquet (or their
`.parts/`), `engine.log`, `declared.json` and `canaries.parquet` (for the `canary_failed`
discard rule), nothing else. numpy and pyarrow only.

Conventions (the metric definitions themselves are in `_metrics.py`):
- Only requests with `phase == "measure"` count; warm-up requests never do, nor do the requests
  of a repetition discarded by a pre-registered rule (`_discard.py`).
- Success = outcome `ok` or `truncated`; every other outcome is a failure.
- Latencies are in seconds; success-only stats use successful requests that have the event;
  failure-inclusive stats add each failed request as +infinity.
- Each repetition's window runs from its first measured `sent_ns` to its last measured
  `end_ns`; rates (throughput, goodput) are per window, summarized over repetitions.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa

from passport.audit._accuracy import accuracy_figures
from passport.audit._cost import cost_figures
from passport.audit._declared import read_declared
from passport.audit._discard import evaluate_discards
from passport.audit._files import RunFiles, RunSource
from passport.audit._headroom import headroom_figures, read_calibration
from passport.audit._metrics import (
    METRICS,
    REQUEST_LATENCY_IDS,
    SUCCESS_OUTCOMES,
    distinct_ints,
    empty_stat,
    itl_samples_by_request,
    numeric_column,
    object_column,
    output_tokens,
    request_latencies,
    stat,
    superseded,
)
from passport.audit._run_data import RunData
from passport.audit._server_stats import server_summary
from passport.audit._slo import requests_meeting, target_results
from passport.audit._traffic import traffic_results
from passport.audit._types import (
    CacheUsageFigures,
    ClientFigures,
    PacerFigures,
    PeakMemoryFigures,
    ResultsFigures,
    ServerFigures,
    SloFigures,
    StatFigures,
    WindowFigures,
    WorkerFigures,
)

__all__ = ["compute_results", "per_request_samples", "RunData", "read_run", "tokens_per_s_per_user"]

_NO_GPU = "no GPU memory was sampled (NVML, a DCGM exporter or TRT-LLM's /metrics)"
_NO_PEAK = f"no engine process was launched by the harness and {_NO_GPU}"
_NO_TIMED_PHASE = "nothing was sampled: the run had no timed phase"


def _rate_stat(values: list[float]) -> StatFigures:
    arr = np.array(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    figures = empty_stat(int(len(arr)))
    if len(arr):
        figures["mean"], figures["min"], figures["max"] = float(arr.mean()), float(arr.min()), float(arr.max())
        figures["std"] = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return figures


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


def read_run(source: RunSource) -> RunData:
    """Read the raw files and apply the pre-registered discard rules (see the module docstring)."""
    files = RunFiles.of(source)
    requests = files.table("requests", figures_only=True)
    if requests is None:
        raise FileNotFoundError(f"{files.folder} has no requests.parquet (nor requests.parts/)")
    telemetry = files.table("telemetry")
    declared = read_declared(files)
    rep = numeric_column(requests, "repetition")
    request_ids = numeric_column(requests, "request_id")
    latencies = request_latencies(requests)
    success = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES)
    gaps, token_gaps = itl_samples_by_request(files.table("chunks", figures_only=True), request_ids[success],
                                              output_tokens(requests)[success])
    measure = (object_column(requests, "phase") == "measure") & ~superseded(requests)
    before = RunData(files, requests, telemetry, declared, files.text("engine.log") or "", latencies, gaps,
                     token_gaps, request_ids, rep, success, files.table("canaries"), files.table("accuracy"), measure,
                     {"rules": [], "discarded": [], "not_evaluable": []})
    discard = evaluate_discards(declared, before)
    discarded = [d["repetition"] for d in discard["discarded"]]
    return replace(before, measured=measure & ~np.isin(rep, discarded), discard=discard)


def _latency_metrics(run: RunData) -> tuple[dict[str, StatFigures], dict[str, StatFigures]]:
    """(success-only, failure-inclusive) latency statistics: per-request metrics, itl.chunk and itl.token."""
    ok_m, n_failed, latencies = run.ok_measured, run.n_failed, run.latencies
    metrics: dict[str, StatFigures] = {}
    inclusive: dict[str, StatFigures] = {}
    for metric_id in REQUEST_LATENCY_IDS:
        metrics[metric_id] = stat(latencies[metric_id][ok_m])
        if METRICS[metric_id].failure_inclusive:
            inclusive[metric_id] = stat(latencies[metric_id][ok_m], n_failed)
    for metric in ("dispatch_lag", "slot_wait"):
        lag = latencies[metric]
        metrics[metric] = stat(lag[run.measured & np.isfinite(lag)])
    metrics["tpot"] = stat(latencies["tpot"][ok_m])
    metrics["tps.user"] = stat(_speeds(run.requests)[ok_m])
    if run.declared.api == "audio_transcriptions":
        metrics["rtfx.request"] = stat(_rtfx(run.requests)[ok_m])
    metrics["itl.chunk"] = stat(_pooled_itl(run))
    metrics["itl.token"] = stat(_pooled_itl(run, tokens=True))
    return metrics, inclusive


def _rtfx(requests: pa.Table) -> np.ndarray:
    """rtfx.request of every request: the clip's seconds / (end - sent), NaN where undefined."""
    audio_s = _column_or_nan(requests, "audio_ms")
    wall_s = (numeric_column(requests, "end_ns") - numeric_column(requests, "sent_ns")) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(wall_s > 0, audio_s / wall_s, np.nan)
    return out


# The rates each endpoint kind adds to the token and request rates: (metric id, the column summed).
_KIND_RATES = {
    "embeddings": (("throughput.inputs_per_s", "n_inputs"), ("throughput.input_tokens_per_s", "prompt_tokens")),
    "rerank": (("throughput.documents_per_s", "n_inputs"), ("throughput.input_tokens_per_s", "prompt_tokens")),
    "score": (("throughput.documents_per_s", "n_inputs"), ("throughput.input_tokens_per_s", "prompt_tokens")),
    "audio_transcriptions": (("throughput.audio_s_per_s", "audio_ms"),),
}


def _column_or_nan(requests: pa.Table, name: str) -> np.ndarray:
    if name not in requests.column_names:
        return np.full(requests.num_rows, np.nan)
    values = numeric_column(requests, name)
    return values / 1e3 if name == "audio_ms" else values


def _speeds(requests: pa.Table) -> np.ndarray:
    """tps.user of every request: completion tokens / (end - first token), NaN where undefined."""
    tokens = numeric_column(requests, "completion_tokens")
    decode_s = (numeric_column(requests, "end_ns") - numeric_column(requests, "first_token_ns")) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where((decode_s > 0) & (tokens > 1), tokens / decode_s, np.nan)
    return out


def _pooled_itl(run: RunData, tokens: bool = False) -> np.ndarray:
    """itl.chunk's gaps (or with `tokens` itl.token's samples) of the successful measured requests."""
    ok_ids = set(run.request_ids[run.ok_measured].tolist())
    by_request = run.token_gaps_by_request if tokens else run.gaps_by_request
    gaps = [g for rid, g in by_request.items() if rid in ok_ids]
    return np.concatenate(gaps) if gaps else np.zeros(0)


def _window_rates(run: RunData, meets: np.ndarray | None) -> tuple[list[WindowFigures], dict[str, StatFigures]]:
    """Each repetition's window, and the rates (throughput, goodput, concurrency) over them."""
    requests, measured, ok_m, rep = run.requests, run.measured, run.ok_measured, run.repetition
    completion, prompt = numeric_column(requests, "completion_tokens"), numeric_column(requests, "prompt_tokens")
    sent, end = numeric_column(requests, "sent_ns"), numeric_column(requests, "end_ns")
    windows: list[WindowFigures] = []
    rate_ids = ["throughput.output_tokens_per_s", "throughput.total_tokens_per_s", "throughput.requests_per_s"]
    kind_rates = [(metric, _column_or_nan(requests, column))
                  for metric, column in _KIND_RATES.get(run.declared.api, ())]
    rate_ids += [metric for metric, _ in kind_rates]
    if meets is not None:
        rate_ids += ["goodput.requests_per_s", "goodput.output_tokens_per_s"]
    rates: dict[str, list[float]] = {k: [] for k in rate_ids}
    conc_means: list[float] = []
    conc_max = 0
    for r in distinct_ints(rep[measured]):
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
            for metric, values in kind_rates:
                rates[metric].append(float(np.nansum(values[good])) / duration_s)
            if meets is not None:
                met = meets & in_rep
                rates["goodput.requests_per_s"].append(float(met.sum()) / duration_s)
                rates["goodput.output_tokens_per_s"].append(float(np.nansum(completion[met])) / duration_s)
        valid = in_rep & np.isfinite(sent) & np.isfinite(end)
        mean_c, max_c = _time_weighted(sent[valid], end[valid], lo, hi)
        conc_means.append(mean_c)
        conc_max = max(conc_max, max_c)
    metrics = {key: _rate_stat(values) for key, values in rates.items()}
    metrics["concurrency"] = _rate_stat(conc_means)
    if conc_means:
        metrics["concurrency"]["max"] = float(conc_max)
    return windows, metrics


def _slo_figures(run: RunData, meets: np.ndarray) -> SloFigures:
    targets = target_results(run.declared.slo, run.latencies, run.ok_measured, run.n_failed, _pooled_itl(run))
    n_measured = int(run.measured.sum())
    return {"targets": targets, "met": all(t["met"] for t in targets), "requests_meeting": int(meets.sum()),
            "requests_measured": n_measured, "attainment": float(meets.sum()) / n_measured if n_measured else None}


def _cache_usage(run: RunData) -> CacheUsageFigures | None:
    """Cached prompt tokens as usage reported them, over successful measured requests."""
    cached = numeric_column(run.requests, "cached_tokens")[run.ok_measured]
    reporting = np.isfinite(cached)
    if not reporting.any():
        return None
    prompt_ok = numeric_column(run.requests, "prompt_tokens")[run.ok_measured]
    total_prompt = float(np.nansum(prompt_ok[reporting]))
    return {"requests_reporting": int(reporting.sum()), "cached_tokens": int(np.nansum(cached)),
            "share_of_prompt_tokens": float(np.nansum(cached)) / total_prompt if total_prompt else None}


def _process_figures(telemetry: pa.Table | None, server: ServerFigures | None,
                     dispatch_p99_s: float | None) -> tuple[PeakMemoryFigures, int | None, ClientFigures]:
    """(peak memory, engine restarts, the client's own figures) from telemetry.parquet."""
    peak: PeakMemoryFigures = {"value_bytes": None, "source": None, "reason": _NO_TIMED_PHASE}
    cpu_mean = cpu_max = lag_p99 = None
    restarts = None
    if telemetry is not None and telemetry.num_rows:
        source, name = object_column(telemetry, "source"), object_column(telemetry, "name")
        value = numeric_column(telemetry, "value")
        rss = value[(source == "engine") & (name == "rss_bytes")]
        launched = bool(((source == "engine") & (name == "launched")).any())
        peak["reason"] = (f"the launched engine's process tree was not sampled and {_NO_GPU}" if launched
                          else _NO_PEAK)
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
    client: ClientFigures = {"cpu_share_mean": cpu_mean, "cpu_share_max": cpu_max, "loop_lag_p99_ms": lag_p99,
                             "dispatch_lag_p99_ms": None if dispatch_p99_s is None else dispatch_p99_s * 1000.0}
    if telemetry is not None and telemetry.num_rows:
        client["pacer"] = _pacer_figures(object_column(telemetry, "name"), numeric_column(telemetry, "value"))
    return peak, restarts, client


def _pacer_figures(name: np.ndarray, value: np.ndarray) -> PacerFigures | None:
    """The pacer's rows (passport.run._phase.record_pacer) summed over workers; None when it
    sent nothing (a closed loop) or left no rows."""
    def total(key: str) -> float:
        return float(value[name == f"pacer_{key}"].sum())

    sends = total("sends_raw") + total("sends_via_loop")
    if not (name == "pacer_sends_raw").any() or sends + total("withdrawn") == 0:
        return None
    cpu_s = total("cpu_s")

    def every(key: str) -> bool | None:  # true in every worker (null: a harness that did not say)
        mine = value[name == f"pacer_{key}"]
        return bool(mine.min() > 0) if len(mine) else None

    return {"sends_raw": int(total("sends_raw")), "sends_via_loop": int(total("sends_via_loop")),
            "withdrawn": int(total("withdrawn")), "armed_late": int(total("armed_late")), "cpu_s": cpu_s,
            "cpu_us_per_send": cpu_s / sends * 1e6 if sends else None, "native": every("native"),
            "realtime": every("realtime")}


def _worker_figures(run: RunData) -> list[WorkerFigures] | None:
    """Each worker's requests, CPU share, loop lag (its own samples) and dispatch lag (measured
    requests it sent), for a run sent by several processes; None for one."""
    if "worker" not in run.requests.column_names:
        return None
    sender = numeric_column(run.requests, "worker")
    if not np.isfinite(sender).any():
        return None
    lag = run.latencies["dispatch_lag"]
    telemetry = run.telemetry
    if telemetry is not None and "worker" in telemetry.column_names:  # columns read once, for every worker
        sampled, value = numeric_column(telemetry, "worker"), numeric_column(telemetry, "value")
        name = object_column(telemetry, "name")
    else:
        sampled, value, name = np.zeros(0), np.zeros(0), np.zeros(0, dtype=object)
    out: list[WorkerFigures] = []
    for k in sorted({int(w) for w in sender[np.isfinite(sender)]}):
        mine = run.measured & (sender == k) & np.isfinite(lag)
        cpu = value[(sampled == k) & (name == "cpu_share")]
        loop_lag = value[(sampled == k) & (name == "loop_lag_ms")]
        out.append({"worker": k, "requests": int((sender == k).sum()),
                    "cpu_share_mean": float(cpu.mean()) if len(cpu) else None,
                    "cpu_share_max": float(cpu.max()) if len(cpu) else None,
                    "loop_lag_p99_ms": float(np.percentile(loop_lag, 99)) if len(loop_lag) else None,
                    "dispatch_lag_p99_ms": float(np.percentile(lag[mine], 99)) * 1000.0 if mine.any() else None})
    return out


def compute_results(source: RunSource | RunData) -> ResultsFigures:
    """Every figure of `results` (see `_types.py`), recomputed from the raw files (a folder, a
    reader of one, or them already read by `read_run`)."""
    run = source if isinstance(source, RunData) else read_run(source)
    metrics, inclusive = _latency_metrics(run)
    meets = None
    if run.declared.slo:
        meets = requests_meeting(run.declared.slo, run.latencies, run.success, run.gaps_by_request,
                                 run.request_ids) & run.measured
    windows, rates = _window_rates(run, meets)
    metrics.update(rates)
    outcome = object_column(run.requests, "outcome")
    outcomes = {str(k): int(v) for k, v in zip(*np.unique(outcome[run.measured].astype(str), return_counts=True))}
    spans = [(float(w["start_ns"]), float(w["end_ns"])) for w in windows
             if w["start_ns"] is not None and w["end_ns"] is not None]
    server = server_summary(run.telemetry, spans)
    peak, restarts, client = _process_figures(run.telemetry, server, metrics["dispatch_lag"].get("p99"))
    workers = _worker_figures(run)
    if workers is not None:
        client["workers"] = workers
    client["headroom"] = headroom_figures(run.requests, read_calibration(run.files))
    accuracy = accuracy_figures(run.accuracy)
    results: ResultsFigures = {
        "metrics": metrics,
        "metrics_failure_inclusive": inclusive,
        "outcomes": outcomes,
        "windows": windows,
        "peak_memory": peak,
        "engine_restarts": restarts,
        "client": client,
        "server": server,
        "prefix_cache_usage": _cache_usage(run),
        "slo": None if meets is None else _slo_figures(run, meets),
        "discard": run.discard if run.discard["rules"] else None,
        "cost": cost_figures(run.declared.cost, run.requests, run.ok_measured, meets, windows),
        "accuracy": accuracy,
        **traffic_results(run.requests, run.measured, run.latencies),
    }
    if accuracy is None:  # only a run that declared accuracy has the key (older passports stay as they were)
        del results["accuracy"]
    return results


def per_request_samples(run: RunSource | RunData, metric_ids: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
    """Samples of each successful measured request of a run (a folder, or one already read) by
    metric id, as the results count them, in the order the requests were sent: one value per
    request (one array of them), or for `itl.chunk` and `itl.token` an array of gaps per request (requests
    without the event omitted)."""
    data = run if isinstance(run, RunData) else read_run(run)
    keep = data.ok_measured
    order = np.argsort(numeric_column(data.requests, "sent_ns")[keep], kind="stable")
    samples: dict[str, list[np.ndarray]] = {}
    for metric in metric_ids:
        if metric in ("itl.chunk", "itl.token"):
            ids = data.request_ids[keep][order]
            by_request = data.gaps_by_request if metric == "itl.chunk" else data.token_gaps_by_request
            samples[metric] = [by_request[int(i)] for i in ids if int(i) in by_request]
        else:
            values = data.latencies[metric][keep][order]
            samples[metric] = [values[np.isfinite(values)]]
    return samples


def tokens_per_s_per_user(requests: pa.Table) -> np.ndarray:
    """tps.user of each successful measured request (finite values only), for plots of a table
    read on its own."""
    ok = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES) & (
        object_column(requests, "phase") == "measure")
    rate = _speeds(requests)[ok]
    return np.asarray(rate[np.isfinite(rate)], dtype=np.float64)
