"""Plots for reports, as PNG bytes (matplotlib's object API with the Agg canvas: no pyplot state,
no display needed).

- `latency_cdfs`: step ECDFs of TTFT, ITL and E2E with p50/p90/p99 marked, one curve per run (a
  run, or the runs of a comparison side by side), drawn from the same samples the results count.
- `per_request`: each successful measured request as a point: TTFT and TPOT over the run, TTFT
  against input length, and the ECDF of tokens/s per user (completion tokens / (e2e - TTFT)).
- `timeline`: requests in flight, output throughput, and (when sampled) KV-cache usage and engine
  memory over the run's clock, with the measurement windows shaded.
- `sweep_curve`: latency by load level, throughput by load level with the knee and the
  saturation point drawn apart, and throughput against tokens/s per user (the trade-off).
- `campaign_chart`: a campaign's objective per arm (unranked arms marked, never drawn as a value)
  and TTFT p99 against throughput per arm.

An ECDF is exact (one step per sample) up to 4,000 samples, and drawn through 2,000 quantiles
beyond: exact at screen resolution, cheap for a million ITL gaps. Percentile markers use numpy's
linear percentile, as the results do.
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

from passport.audit import SUCCESS_OUTCOMES, numeric_column, object_column, tokens_per_s_per_user

__all__ = ["CDF_METRICS", "SweepPoint", "ArmPoint", "latency_cdfs", "per_request", "timeline", "sweep_curve",
           "campaign_chart"]

CDF_METRICS = ("ttft.any", "itl.chunk", "e2e")
_TITLES = {"ttft.any": "TTFT", "itl.chunk": "inter-token latency (chunk gaps)", "e2e": "end-to-end latency"}
_QUANTILES = np.linspace(0.0, 1.0, 2000)
_EXACT_ECDF = 4000
_MARKED = (50, 90, 99)


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the empirical CDF as steps: y jumps to k/n at the k-th smallest value."""
    if len(values) <= _EXACT_ECDF:
        x = np.sort(values)
        y = np.arange(1, len(x) + 1) / len(x)
    else:
        x = np.quantile(values, _QUANTILES, method="inverted_cdf")
        y = _QUANTILES
    return np.r_[x[0], x], np.r_[0.0, y]


def _step_ecdf(ax: Axes, values: np.ndarray, label: str, unit: str, marked: tuple[int, ...] = _MARKED) -> None:
    x, y = _ecdf(values)
    (line,) = ax.step(x, y, where="post", label=f"{label} (n={len(values)})", linewidth=1.4)
    for p in marked:
        v = float(np.percentile(values, p))
        ax.plot([v], [p / 100.0], marker="o", markersize=4, color=line.get_color())
        ax.annotate(f"p{p} {v:.3g} {unit}", (v, p / 100.0), fontsize=7, textcoords="offset points",
                    xytext=(4, -9 if p == 99 else -3), color=line.get_color())


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
            _step_ecdf(ax, values * 1000.0, label, "ms")
            drawn = True
        ax.set_title(_TITLES[metric])
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of samples")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    return _png(fig)


def per_request(requests: pa.Table) -> bytes:
    """Four panels of successful measured requests: TTFT and TPOT against send time, TTFT against
    input tokens (server-counted, else the client's count, else the target), and the ECDF of
    tokens/s per user with p10/p50/p90 marked (the slow tail is the low one)."""
    ok = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES) & (
        object_column(requests, "phase") == "measure")
    sent = numeric_column(requests, "sent_ns")[ok]
    first = numeric_column(requests, "first_token_ns")[ok]
    last = numeric_column(requests, "last_token_ns")[ok]
    tokens = numeric_column(requests, "completion_tokens")[ok]
    ttft_ms = (first - sent) / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot_ms = np.where(tokens > 1, (last - first) / (tokens - 1) / 1e6, np.nan)
    inputs = numeric_column(requests, "prompt_tokens")[ok]
    for fallback in ("input_tokens_client", "input_tokens_target"):
        inputs = np.where(np.isfinite(inputs), inputs, numeric_column(requests, fallback)[ok])
    fig = Figure(figsize=(12, 6.4), layout="constrained")
    (ax_ttft, ax_tpot), (ax_len, ax_tps) = fig.subplots(2, 2)
    t_s = sent / 1e9
    ax_ttft.scatter(t_s, ttft_ms, s=6, alpha=0.6)
    ax_ttft.set(title="TTFT of each request", xlabel="sent (s since t0)", ylabel="TTFT (ms)")
    ax_tpot.scatter(t_s, tpot_ms, s=6, alpha=0.6, color="tab:orange")
    ax_tpot.set(title="TPOT of each request", xlabel="sent (s since t0)", ylabel="TPOT (ms per token)")
    ax_len.scatter(inputs, ttft_ms, s=6, alpha=0.6, color="tab:purple")
    ax_len.set(title="TTFT against input length", xlabel="input tokens", ylabel="TTFT (ms)")
    rate = tokens_per_s_per_user(requests)
    if len(rate):
        _step_ecdf(ax_tps, rate, "requests", "tok/s", marked=(10, 50, 90))
        ax_tps.legend(fontsize=8, loc="lower right")
    else:
        ax_tps.text(0.5, 0.5, "no request with two or more tokens", ha="center", va="center",
                    transform=ax_tps.transAxes)
    ax_tps.set(title="tokens/s per user: completion tokens / (e2e - TTFT)", xlabel="tokens/s",
               ylabel="fraction of requests", ylim=(0, 1.02))
    for ax in (ax_ttft, ax_tpot, ax_len, ax_tps):
        ax.grid(alpha=0.3)
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
    if ax.get_legend_handles_labels()[0]:  # a held run has no window to label
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
    """One load level of a sweep: the offered load, what was achieved, its latencies (s) and the
    median tokens/s per user."""

    load: float
    throughput_rps: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    meets_slo: bool | None
    tokens_per_s_per_user_p50: float | None = None


def sweep_curve(points: list[SweepPoint], load_label: str, knee: float | None,
                saturation: float | None) -> bytes:
    """Three panels, levels in load order: latency by offered load (it cannot fold back, as a
    curve against achieved throughput does past saturation); throughput by load with the knee
    (green dashed, triangle) and saturation (red dotted, square) drawn apart even on one level;
    throughput against median tokens/s per user, each point labelled with its load."""
    fig = Figure(figsize=(15, 4.4), layout="constrained")
    ax_lat, ax_thr, ax_trade = fig.subplots(1, 3)
    drawn = sorted((p for p in points if p.throughput_rps is not None), key=lambda p: p.load)
    loads = [p.load for p in drawn]
    x = [p.throughput_rps for p in drawn]
    for attr, label in (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"), ("itl_p50_s", "ITL p50")):
        y = [getattr(p, attr) * 1000.0 if getattr(p, attr) is not None else np.nan for p in drawn]
        ax_lat.plot(loads, y, marker="o", label=label)
    ax_lat.set(xlabel=load_label, ylabel="latency (ms)", yscale="log", title="latency by load level")
    ax_lat.legend(fontsize=8)
    ax_thr.plot(loads, x, marker="o", color="tab:blue", zorder=2, label="achieved")
    colours = ["tab:green" if p.meets_slo else "tab:red" if p.meets_slo is False else "tab:gray" for p in drawn]
    ax_thr.scatter(loads, x, c=colours, zorder=3)
    by_load = {p.load: p.throughput_rps for p in drawn}
    if knee is not None:
        ax_thr.axvline(knee, color="tab:green", linestyle="--", linewidth=1.4)
        ax_thr.plot([knee], [by_load.get(knee, np.nan)], marker="^", markersize=13, color="tab:green",
                    linestyle="none", zorder=4, label=f"knee (highest load meeting the SLO): {knee:g}")
    if saturation is not None:
        ax_thr.axvline(saturation, color="tab:red", linestyle=":", linewidth=2.0)
        ax_thr.plot([saturation], [by_load.get(saturation, np.nan)], marker="s", markersize=8, color="tab:red",
                    markerfacecolor="none", markeredgewidth=2, linestyle="none", zorder=5,
                    label=f"saturation: {saturation:g}")
    ax_thr.set(xlabel=load_label, ylabel="achieved throughput (requests/s)",
               title="throughput by load level (green: SLO met)")
    ax_thr.legend(fontsize=8)
    trade = [p for p in drawn if p.tokens_per_s_per_user_p50 is not None]
    if trade:
        ax_trade.plot([p.tokens_per_s_per_user_p50 for p in trade], [p.throughput_rps for p in trade], marker="o")
        for p in trade:
            ax_trade.annotate(f"{p.load:g}", (p.tokens_per_s_per_user_p50 or 0.0, p.throughput_rps or 0.0),
                              fontsize=8, textcoords="offset points", xytext=(4, 4))
    else:
        ax_trade.text(0.5, 0.5, "no level with tokens/s per user", ha="center", va="center",
                      transform=ax_trade.transAxes)
    ax_trade.set(xlabel="tokens/s per user (median)", ylabel="achieved throughput (requests/s)",
                 title="throughput against speed per user (labels: load)")
    for ax in (ax_lat, ax_thr, ax_trade):
        ax.grid(alpha=0.3)
    return _png(fig)


@dataclass(frozen=True)
class ArmPoint:
    """One campaign arm, for `campaign_chart`: its objective value (None: not ranked) with its
    95 % interval over repetitions (None: one repetition), its rank group, TTFT p99 and
    throughput, and why it is not ranked."""

    name: str
    status: str
    objective: float | None
    ttft_p99_s: float | None
    throughput_rps: float | None
    low: float | None = None
    high: float | None = None
    rank: int | None = None


def campaign_chart(arms: list[ArmPoint], objective: str) -> bytes:
    """Two panels: the objective per arm with its 95 % interval (ranked arms coloured by rank
    group, so arms that tie share a colour; unranked in grey with their status, so an unranked
    arm is never read as a zero), and TTFT p99 against throughput per arm (down and to the right
    is better)."""
    fig = Figure(figsize=(12, 4.4), layout="constrained")
    ax_obj, ax_trade = fig.subplots(1, 2)
    names = [a.name for a in arms]
    values = [a.objective if a.status == "ranked" and a.objective is not None else 0.0 for a in arms]
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
    colours = [palette[(a.rank - 1) % len(palette)] if a.status == "ranked" and a.rank else "tab:gray" for a in arms]
    errors = np.array([[v - a.low, a.high - v] if a.low is not None and a.high is not None and a.status == "ranked"
                       else [0.0, 0.0] for a, v in zip(arms, values, strict=True)]).T
    ax_obj.barh(names, values, color=colours, xerr=errors if len(arms) else None, capsize=4)
    for i, a in enumerate(arms):
        text = (f"{a.objective:.4g} (rank {a.rank})" if a.status == "ranked" and a.objective is not None
                else a.status.replace("_", " "))
        ax_obj.annotate(text, (values[i] + float(errors[1][i]) if len(arms) else 0.0, i), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
    ax_obj.invert_yaxis()
    ax_obj.set(xlabel=objective, title=f"{objective} by arm, 95 % intervals (a colour: a rank group; grey: not "
                                        "ranked)")
    shown = [a for a in arms if a.ttft_p99_s is not None and a.throughput_rps is not None]
    for a in shown:
        colour = "tab:blue" if a.status == "ranked" else "tab:gray"
        ax_trade.scatter([a.throughput_rps], [(a.ttft_p99_s or 0.0) * 1000.0], color=colour, zorder=3)
        ax_trade.annotate(a.name, (a.throughput_rps or 0.0, (a.ttft_p99_s or 0.0) * 1000.0), fontsize=8,
                          textcoords="offset points", xytext=(4, 4))
    if not shown:
        ax_trade.text(0.5, 0.5, "no arm was timed", ha="center", va="center", transform=ax_trade.transAxes)
    ax_trade.set(xlabel="throughput (requests/s)", ylabel="TTFT p99 (ms)",
                 title="tail latency against throughput (better: lower right)")
    for ax in (ax_obj, ax_trade):
        ax.grid(alpha=0.3)
    return _png(fig)
