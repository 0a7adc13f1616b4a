"""A run's raw logs summarized under another tool's published definitions, so a passport lines up
with a number from vLLM's `bench serve`, SGLang's `bench_serving`, NVIDIA AIPerf or guidellm.

Each view recomputes that tool's per-request figures from requests.parquet and chunks.parquet
(measured, successful requests), then its summary statistics (mean, median, p99 with numpy's
linear percentile, as all four use). What each tool measures differently, read from its source:

- start: all four start the clock before the connection is acquired, so a new connection's TCP
  (and TLS) setup is inside their TTFT and latency; passport's `sent_ns` is after it, so the
  views start at `sent_ns - connect_ns`.
- vLLM (vllm/benchmarks/lib/endpoint_request_func.py, serve.py): TTFT at the first event with
  `choices` (an empty role delta counts); ITL every gap between such events; E2EL at the last
  such event (completions) or the last event before [DONE] (chat, the usage chunk included);
  TPOT = (E2EL - TTFT) / (output tokens - 1), output tokens from usage; throughput over the
  benchmark's wall time, first send to last end.
- SGLang (python/sglang/bench_serving.py): TTFT at the first event with non-empty text (reasoning
  not counted); ITL the gaps between such events; E2E latency at the last line read ([DONE]
  included); output tokens from usage, else the requested max_tokens; TPOT as vLLM's.
- AIPerf (aiperf/metrics/types/*): TTFT at the first token-bearing response; request latency at
  the last one (not the last byte); "inter token latency" = (latency - TTFT) / (output tokens - 1)
  (passport's `tpot`); "inter chunk latency" the gaps between token-bearing responses
  (passport's `itl.chunk`).
- guidellm (src/guidellm/schemas/request_stats.py): TTFT at the first token iteration; ITL =
  (last iteration - first) / (output tokens - 1); time per output token = (last iteration -
  start) / output tokens, TTFT included; request latency start to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from passport._errors import RunFolderError
from passport.audit._files import load_table
from passport.audit._metrics import SUCCESS_OUTCOMES

__all__ = ["TOOLS", "Tool", "ToolFigure", "ToolView", "tool_view"]

Tool = Literal["vllm", "sglang", "aiperf", "guidellm"]
TOOLS: tuple[Tool, ...] = ("vllm", "sglang", "aiperf", "guidellm")
_CHOICE_KINDS = ("empty", "content", "reasoning", "tool_call")
_TOKEN_KINDS = ("content", "reasoning", "tool_call")


@dataclass(frozen=True)
class ToolFigure:
    """One of the tool's figures: its own name, summary statistics in ms (or the unit named),
    passport's nearest figure and what differs."""

    name: str
    unit: str
    mean: float | None
    median: float | None
    p99: float | None
    passport: str
    differs: str


@dataclass(frozen=True)
class ToolView:
    tool: Tool
    requests: int
    figures: list[ToolFigure]


def _stats(name: str, values: np.ndarray, passport: str, differs: str, unit: str = "ms") -> ToolFigure:
    values = values[np.isfinite(values)]
    if not len(values):
        return ToolFigure(name, unit, None, None, None, passport, differs)
    return ToolFigure(name, unit, float(np.mean(values)), float(np.median(values)),
                      float(np.percentile(values, 99)), passport, differs)


def _rate(name: str, value: float, passport: str, differs: str, unit: str) -> ToolFigure:
    return ToolFigure(name, unit, value, None, None, passport, differs)


def _bench_serving(ttft_ms: np.ndarray, tpot_ms: np.ndarray, itl_ms: np.ndarray, e2e_ms: np.ndarray, n: int,
                   output_tokens: float, wall_s: float, names: tuple[str, str],
                   notes: tuple[str, str, str, str, str]) -> list[ToolFigure]:
    """The figures vLLM's and SGLang's bench scripts print (SGLang's derives from vLLM's), under
    each one's names (`names`: its end-to-end figure, passport's nearest TTFT) and notes."""
    e2e_name, ttft_twin = names
    return [
        _stats("TTFT", ttft_ms, ttft_twin, notes[0]),
        _stats("TPOT", tpot_ms, "tpot", notes[1]),
        _stats("ITL", itl_ms, "itl.chunk", notes[2]),
        _stats(e2e_name, e2e_ms, "e2e + connect", notes[3]),
        _rate("Request throughput", n / wall_s, "throughput req/s", "over first send to last end", "req/s"),
        _rate("Output token throughput", output_tokens / wall_s, "throughput output tok/s", notes[4], "tok/s"),
    ]


def _per_request(run_dir: Path) -> tuple[pa.Table, pa.Table]:
    requests = load_table(run_dir, "requests", figures_only=True)
    chunks = load_table(run_dir, "chunks", figures_only=True)
    if requests is None or chunks is None:
        raise RunFolderError(f"{run_dir} has no requests.parquet and chunks.parquet: is it a run folder?")
    measured = pc.and_(pc.equal(requests["phase"], "measure"), pc.is_in(requests["outcome"],
                                                                         pa.array(SUCCESS_OUTCOMES)))
    if "retry_of" in requests.column_names:  # an attempt a retry superseded is no request of its own
        retried = pc.unique(pc.drop_null(requests["retry_of"]))
        measured = pc.and_(measured, pc.invert(pc.is_in(requests["request_id"], retried)))
    return requests.filter(measured), chunks


def _events(chunks: pa.Table, ids: np.ndarray, kinds: tuple[str, ...]) -> list[np.ndarray]:
    """Receive times of each request's events of `kinds`, in request order."""
    picked = chunks.filter(pc.is_in(chunks["kind"].cast(pa.string()), pa.array(kinds)))
    rid = picked["request_id"].to_numpy()
    t = picked["recv_ns"].to_numpy()
    order = np.lexsort((t, rid))
    rid, t = rid[order], t[order]
    starts = np.searchsorted(rid, ids, side="left")
    ends = np.searchsorted(rid, ids, side="right")
    return [t[a:b] for a, b in zip(starts, ends)]


def tool_view(run_dir: Path, tool: Tool, api: str) -> ToolView:
    """The run summarized as `tool` would summarize it (see the module docstring); `api` is the
    run's endpoint.api (chat or completions)."""
    requests, chunks = _per_request(Path(run_dir))
    ids = requests["request_id"].to_numpy()
    connect = requests["connect_ns"].fill_null(0).to_numpy().astype(np.float64)
    start = requests["sent_ns"].to_numpy().astype(np.float64) - connect
    end = requests["end_ns"].to_numpy().astype(np.float64)
    server = requests["completion_tokens"].to_numpy(zero_copy_only=False).astype(np.float64)
    client = requests["completion_tokens_client"].to_numpy(zero_copy_only=False).astype(np.float64)
    out = np.where(np.isfinite(server), server, client)
    ms = 1e-6
    wall_s = (float(end.max() - start.min()) / 1e9) if len(ids) else float("nan")

    def firsts_lasts(kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        events = _events(chunks, ids, kinds)
        first = np.array([e[0] if len(e) else np.nan for e in events], dtype=np.float64)
        last = np.array([e[-1] if len(e) else np.nan for e in events], dtype=np.float64)
        gaps = np.concatenate([np.diff(e) for e in events]) if events else np.zeros(0)
        return first, last, gaps.astype(np.float64)

    def per_token(latency: np.ndarray, ttft: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(tokens > 1, (latency - ttft) / (tokens - 1), np.nan)

    figures: list[ToolFigure]
    if tool == "vllm":
        first, last, gaps = firsts_lasts(_CHOICE_KINDS)
        if api == "chat":  # its chat client stamps every event before [DONE], the usage chunk too
            last = firsts_lasts((*_CHOICE_KINDS, "usage"))[1]
        ttft, e2e = first - start, last - start
        figures = _bench_serving(
            ttft * ms, per_token(e2e, ttft, out) * ms, gaps * ms, e2e * ms, len(ids), float(np.nansum(out)), wall_s,
            ("E2EL", "ttft.any + connect"),
            ("starts before connecting; the first event with choices, an empty role delta included",
             "E2EL to the last event before [DONE] (usage included)",
             "gaps between events with choices, empty ones included",
             "ends at the last event before [DONE], not the last byte",
             "usage completion_tokens over the same window"))
    elif tool == "sglang":
        first, _, gaps = firsts_lasts(("content",))
        requested = requests["max_tokens"].to_numpy(zero_copy_only=False).astype(np.float64)
        tokens = np.where(np.isfinite(server), server, requested)
        ttft, e2e = first - start, end - start
        figures = _bench_serving(
            ttft * ms, per_token(e2e, ttft, tokens) * ms, gaps * ms, e2e * ms, len(ids), float(np.nansum(tokens)),
            wall_s, ("E2E Latency", "ttft.content + connect"),
            ("starts before a new connection (one per request); the first non-empty content, reasoning not counted",
             "E2E to the last line read; tokens from usage, else the requested max_tokens",
             "gaps between content events only",
             "ends at the last line read ([DONE] included)",
             "usage, else the requested max_tokens"))
    elif tool == "aiperf":
        first, last, gaps = firsts_lasts(_TOKEN_KINDS)
        ttft = first - start
        latency = last - start
        figures = [
            _stats("Time to First Token", ttft * ms, "ttft.any + connect", "starts before the connection is acquired"),
            _stats("Inter Token Latency", per_token(latency, ttft, out) * ms, "tpot", "per request, from its latency "
                   "and TTFT"),
            _stats("Inter Chunk Latency", gaps * ms, "itl.chunk", "the same gaps"),
            _stats("Request Latency", latency * ms, "e2e + connect", "ends at the last token-bearing response, not "
                   "the last byte"),
            _rate("Request Throughput", len(ids) / wall_s, "throughput req/s", "over first send to last end", "req/s"),
        ]
    else:
        first, last, _ = firsts_lasts(_TOKEN_KINDS)
        with np.errstate(divide="ignore", invalid="ignore"):
            itl = np.where(out > 1, (last - first) / (out - 1), np.nan)
            tpot = np.where(out > 0, (last - start) / out, np.nan)
        figures = [
            _stats("time_to_first_token_ms", (first - start) * ms, "ttft.any + connect", "starts before connecting"),
            _stats("inter_token_latency_ms", itl * ms, "tpot", "first to last token over tokens - 1"),
            _stats("time_per_output_token_ms", tpot * ms, "(no passport figure)", "TTFT included: start to the last "
                   "token over all output tokens"),
            _stats("request_latency", (end - start) * ms, "e2e + connect", "start to end"),
            _rate("requests_per_second", len(ids) / wall_s, "throughput req/s", "over first send to last end",
                  "req/s"),
        ]
    return ToolView(tool, len(ids), figures)
