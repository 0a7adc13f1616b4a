"""Plots for reports, as PNG bytes (matplotlib's object API with the Agg canvas: no pyplot state,
no display needed).

- `latency_cdfs`: empirical CDFs of TTFT, ITL and E2E, one curve per run (a run, or the runs of
  a comparison side by side), drawn from the same samples the results count.
- `timeline`: requests in flight, output throughput, and (when sampled) KV-cache usage and engine
  memory over the run's clock, with the measurement windows shaded.
- `sweep_curve`: latency against achieved throughput per load level, the knee and the
  saturation point marked.

A CDF is drawn through at most 2,000 quantiles: exact at screen resolution, cheap for a million
ITL gaps.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from passport.audit import SUCCESS_OUTCOMES, numeric_column, object_column

__all__ = ["CDF_METRICS", "SweepPoint", "latency_cdfs", "timeline", "sweep_curve"]

CDF_METRICS = ("ttft.any", "itl.chunk", "e2e")
_TITLES = {"ttft.any": "TTFT", "itl.chunk": "inter-token latency (chunk gaps)", "e2e": "end-to-end latency"}
_QUANTILES = np.linspace(0.0, 1.0, 2000)


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def latency_cdfs(series: dict[str, dict[str, np.ndarray]]) -> bytes:
    """One panel per metric of CDF_METRICS; `series` maps a run label to samples (seconds) by metric."""
    fig = Figure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, len(CDF_METRICS))
    for ax, metric in zip(axes, CDF_METRICS):
        drawn = False
        for label, samples in series.items():
            values = samples.get(metric)
            if values is None or not len(values):
                continue
            ms = np.quantile(values, _QUANTILES) * 1000.0
            ax.plot(ms, _QUANTILES, label=f"{label} (n={len(values)})", linewidth=1.6)
            drawn = True
        ax.set_title(_TITLES[metric])
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of samples")
        ax.set_ylim(0, 1.0)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


def _in_flight(requests: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    sent, end = numeric_column(requests, "sent_ns"), numeric_column(requests, "end_ns")
    keep = np.isfinite(sent) & np.isfinite(end)
    times = np.concatenate([sent[keep], end[keep]]) / 1e9
    steps = np.concatenate([np.ones(keep.sum()), -np.ones(keep.sum())])
    order = np.lexsort((steps, times))
    return times[order], np.cumsum(steps[order])


def _output_tokens_per_bin(requests: pa.Table, chunks: pa.Table | None, bin_s: float,
                           t_max_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens/s per bin: each successful request's completion tokens spread evenly over
    its token-bearing chunks (a chunk may carry several tokens)."""
    edges = np.arange(0.0, t_max_s + bin_s, bin_s)
    if chunks is None or not chunks.num_rows or len(edges) < 2:
        return edges, np.zeros(max(len(edges) - 1, 0))
    ok = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES)
    rid = numeric_column(requests, "request_id")[ok]
    per_chunk = numeric_column(requests, "completion_tokens")[ok] / np.maximum(
        numeric_column(requests, "n_token_chunks")[ok], 1.0)
    weight_of = dict(zip(rid.tolist(), np.nan_to_num(per_chunk, nan=1.0).tolist()))
    token = np.asarray(chunks.column("token_bearing").to_numpy(zero_copy_only=False), dtype=bool)
    c_rid = numeric_column(chunks, "request_id")[token]
    c_t = numeric_column(chunks, "recv_ns")[token] / 1e9
    weights = np.array([weight_of.get(r, 0.0) for r in c_rid.tolist()])
    counts, _ = np.histogram(c_t, bins=edges, weights=weights)
    return edges, counts / bin_s


def _shade(ax: Axes, windows: Sequence[tuple[float, float]]) -> None:
    for i, (lo, hi) in enumerate(windows):
        ax.axvspan(lo, hi, color="tab:green", alpha=0.08, label="measurement window" if i == 0 else None)


def timeline(requests: pa.Table, chunks: pa.Table | None, telemetry: pa.Table | None,
             windows: Sequence[tuple[float, float]]) -> tuple[bytes, list[str]]:
    """(PNG, notes): stacked panels on the run clock (seconds since t0); notes say what is missing."""
    notes: list[str] = []
    times, level = _in_flight(requests)
    t_max = float(times.max()) if len(times) else 1.0
    panels = ["in_flight", "throughput"]
    kv = rss = None
    if telemetry is not None and telemetry.num_rows:
        name = object_column(telemetry, "name")
        source = object_column(telemetry, "source")
        t = numeric_column(telemetry, "t_ns") / 1e9
        value = numeric_column(telemetry, "value")
        kv_mask = (source == "engine") & (name == "kv_cache_usage")
        rss_mask = (source == "engine") & (name == "rss_bytes")
        if kv_mask.any():
            kv = (t[kv_mask], value[kv_mask])
            panels.append("kv")
        if rss_mask.any():
            rss = (t[rss_mask], value[rss_mask])
            panels.append("rss")
    if kv is None:
        notes.append("the engine's KV-cache usage was not sampled in this run, so it is not plotted")
    fig = Figure(figsize=(12, 2.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    ax = axes[0]
    ax.step(np.r_[0.0, times], np.r_[0.0, level], where="post", linewidth=1.2)
    ax.set_ylabel("requests in flight")
    _shade(ax, windows)
    ax.legend(fontsize=8, loc="upper right")
    bin_s = max(0.1, float(np.ceil(t_max / 80.0 * 10) / 10))
    edges, rate = _output_tokens_per_bin(requests, chunks, bin_s, t_max)
    ax = axes[1]
    if len(rate):
        ax.stairs(rate, edges, fill=True, alpha=0.6)
    ax.set_ylabel(f"output tok/s ({bin_s:g} s bins)")
    _shade(ax, windows)
    index = 2
    if kv is not None:
        ax = axes[index]
        ax.plot(kv[0], kv[1] * (100.0 if np.nanmax(kv[1]) <= 1.0 else 1.0), linewidth=1.2)
        ax.set_ylabel("KV-cache usage (%)")
        _shade(ax, windows)
        index += 1
    if rss is not None:
        ax = axes[index]
        ax.plot(rss[0], rss[1] / 2**20, linewidth=1.2)
        ax.set_ylabel("engine RSS (MiB)")
        _shade(ax, windows)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds since the run's t0")
    return _png(fig), notes


@dataclass(frozen=True)
class SweepPoint:
    """One load level of a sweep: the offered load, what was achieved, and its latencies (s)."""

    load: float
    throughput_rps: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    meets_slo: bool | None


def sweep_curve(points: list[SweepPoint], load_label: str, knee: float | None,
                saturation: float | None) -> bytes:
    """Latency (TTFT p50/p99, ITL p50) against achieved requests/s, one marker per level."""
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax_lat, ax_thr = fig.subplots(1, 2)
    drawn = [p for p in points if p.throughput_rps is not None]
    x = [p.throughput_rps for p in drawn]
    for attr, label in (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"), ("itl_p50_s", "ITL p50")):
        y = [getattr(p, attr) * 1000.0 if getattr(p, attr) is not None else np.nan for p in drawn]
        ax_lat.plot(x, y, marker="o", label=label)
    for p in drawn:
        ax_lat.annotate(f"{p.load:g}", (p.throughput_rps or 0.0, (p.ttft_p99_s or 0.0) * 1000.0), fontsize=7,
                        textcoords="offset points", xytext=(3, 3))
    ax_lat.set_xlabel("achieved throughput (requests/s)")
    ax_lat.set_ylabel("latency (ms)")
    ax_lat.set_yscale("log")
    ax_lat.set_title("latency vs throughput (labels: offered load)")
    ax_lat.legend(fontsize=8)
    loads = [p.load for p in drawn]
    ax_thr.plot(loads, x, marker="o", label="achieved")
    colours = ["tab:green" if p.meets_slo else "tab:red" if p.meets_slo is False else "tab:gray" for p in drawn]
    ax_thr.scatter(loads, x, c=colours, zorder=3)
    if knee is not None:
        ax_thr.axvline(knee, color="tab:green", linestyle="--", label=f"knee (highest load meeting the SLO): {knee:g}")
    if saturation is not None:
        ax_thr.axvline(saturation, color="tab:red", linestyle=":", label=f"saturation: {saturation:g}")
    ax_thr.set_xlabel(load_label)
    ax_thr.set_ylabel("achieved throughput (requests/s)")
    ax_thr.set_title("throughput by load level (green: SLO met)")
    ax_thr.legend(fontsize=8)
    for ax in (ax_lat, ax_thr):
        ax.grid(alpha=0.3)
    return _png(fig)
