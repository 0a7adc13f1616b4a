"""Server-side figures from telemetry.parquet, over the measurement windows only.

Gauges (KV-cache usage, requests running and waiting, KV tokens, a reported hit rate): peak and
time-unweighted mean of the samples taken inside a window. Counters (preemptions, prompt and
generation tokens, prefix-cache queries and hits, GPU energy): the increase from the last
sample at or before a window's start (else its first sample inside) to the last sample inside
it, summed over windows. The prefix-cache hit rate is hits / queries of those deltas where the
engine counts both (vLLM; llama.cpp's cached prompt tokens / prompt tokens), else the mean of a
reported rate (SGLang, TRT-LLM). Energy and power only when a GPU source measured them;
otherwise null with the reason. numpy and pyarrow only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from passport.audit._metrics import numeric_column, object_column
from passport.audit._types import ServerFigures

__all__ = ["server_summary", "GAUGES", "COUNTERS"]

GAUGES = ("kv_cache_usage", "requests_running", "requests_waiting", "kv_cache_tokens", "prefix_cache_hit_rate")
COUNTERS = ("preemptions_total", "prompt_tokens_total", "generation_tokens_total", "prefix_cache_queries_total",
            "prefix_cache_hits_total")


def _delta(t: np.ndarray, v: np.ndarray, windows: list[tuple[float, float]]) -> float | None:
    total, seen = 0.0, False
    for lo, hi in windows:
        inside = (t >= lo) & (t <= hi)
        if not inside.any():
            continue
        before = t <= lo
        start = v[before][-1] if before.any() else v[inside][0]
        total += float(v[inside][-1] - start)
        seen = True
    return total if seen else None


def server_summary(telemetry: pa.Table | None, windows: list[tuple[float, float]]) -> ServerFigures | None:
    """The `results.server` section, or None when no server-side series was sampled."""
    if telemetry is None or not telemetry.num_rows or not windows:
        return None
    source, name = object_column(telemetry, "source"), object_column(telemetry, "name")
    t, value = numeric_column(telemetry, "t_ns"), numeric_column(telemetry, "value")
    order = np.argsort(t, kind="stable")
    source, name, t, value = source[order], name[order], t[order], value[order]
    in_window = np.zeros(len(t), dtype=bool)
    for lo, hi in windows:
        in_window |= (t >= lo) & (t <= hi)
    engine = source == "engine"
    gpu = np.array([str(s).startswith("gpu:") for s in source], dtype=bool)
    if not (engine | gpu).any():
        return None
    gauges: dict[str, dict[str, float]] = {}
    for key in GAUGES:
        sel = engine & (name == key) & in_window
        if sel.any():
            gauges[key] = {"peak": float(value[sel].max()), "mean": float(value[sel].mean()), "n": int(sel.sum())}
    deltas: dict[str, float] = {}
    for key in COUNTERS:
        sel = engine & (name == key)
        if sel.any():
            d = _delta(t[sel], value[sel], windows)
            if d is not None:
                deltas[key] = d
    hit_rate = None
    queries, hits = deltas.get("prefix_cache_queries_total"), deltas.get("prefix_cache_hits_total")
    if queries and hits is not None:
        hit_rate = hits / queries
    elif "prefix_cache_hit_rate" in gauges:
        hit_rate = gauges["prefix_cache_hit_rate"]["mean"]
    failures = np.array([str(n).startswith("scrape_failed:") for n in name], dtype=bool) & (source == "sampler")
    out: ServerFigures = {"gauges": gauges, "counter_deltas": deltas, "prefix_cache_hit_rate": hit_rate,
                          "gpu_memory_peak_bytes": None, "gpu_source": None, "gpu_utilization_mean_pct": None,
                          "power_mean_w": None, "energy_j": None,
                          "energy_reason": "no GPU power source was sampled (NVML or a DCGM exporter)",
                          "scrape_failures": int(failures.sum())}
    if gpu.any():
        gpu_sources = sorted({str(s) for s in source[gpu]})
        out["gpu_source"] = ", ".join(gpu_sources)
        mem = gpu & (name == "memory_used_bytes") & in_window
        if mem.any():
            out["gpu_memory_peak_bytes"] = int(value[mem].max())
        util = gpu & (name == "utilization_pct") & in_window
        if util.any():
            out["gpu_utilization_mean_pct"] = float(value[util].mean())
        power = gpu & (name == "power_w") & in_window
        if power.any():
            out["power_mean_w"] = float(value[power].mean())
        energy = gpu & (name == "energy_j_total")
        if energy.any():
            out["energy_j"] = _delta(t[energy], value[energy], windows)
            out["energy_reason"] = None if out["energy_j"] is not None else "no energy sample inside the window"
        else:
            out["energy_reason"] = "the GPU source reports no energy counter"
    return out
