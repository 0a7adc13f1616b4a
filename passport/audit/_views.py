"""A run's raw logs summarized under another tool's published definitions, so a passport lines up
with a number from vLLM's `bench serve`, SGLang's `bench_serving`, NVIDIA AIPerf or guidellm.

Each view recomputes that tool's per-request figures from requests.parquet and chunks.parquet
(measured, successful requests), then its summary statistics (mean, median, p99: numpy's linear
percentile, as vLLM, SGLang and AIPerf use; guidellm's own inverse CDF). What each tool measures
differently, read from its source:

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
  (passport's `tpot`), one value a request, each weighing the same; "inter chunk latency" the
  gaps between token-bearing responses (passport's `itl.chunk`).
- guidellm (src/guidellm/schemas/request_stats.py): TTFT at the first token iteration; ITL =
  (last iteration - first) / (output tokens - 1); time per output token = (last iteration -
  start) / output tokens, TTFT included; request latency start to end. Its percentiles (0.8,
  schemas/statistics.py) are the inverse CDF, not interpolated (`inverse_cdf`), and its ITL
  statistics weigh each request by its output tokens - 1, its TPOT by its output tokens
  (benchmark/schemas/metrics.py), so they are statistics over tokens, not requests: ITL's mean
  is passport's `itl.token` mean when each request's first chunk carries one token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from passport._errors import RunFolderError, SpecError
from passport.audit._files import RunFiles, RunSource
from passport.audit._metrics import SUCCESS_OUTCOMES, output_tokens

__all__ = ["TOOLS", "VIEWS", "Tool", "ToolFigure", "ToolTotal", "ToolView", "tool_view", "inverse_cdf"]

Tool = Literal["vllm", "sglang", "aiperf", "guidellm"]
TOOLS: tuple[Tool, ...] = ("vllm", "sglang", "aiperf", "guidellm")
# The endpoint kinds each tool has a client for, and so a view of (vLLM 0.32's backends openai,
# openai-chat, openai-responses, openai-audio, openai-embeddings, vllm-rerank and vllm's score route;
# SGLang's bench_serving: chat and completions; AIPerf and guidellm: the text kinds written here).
# Another kind's view is refused, not guessed.
VIEWS: dict[Tool, tuple[str, ...]] = {
    "vllm": ("chat", "completions", "responses", "audio_transcriptions", "embeddings", "rerank", "score"),
    "sglang": ("chat", "completions"),
    "aiperf": ("chat", "completions", "responses", "anthropic_messages"),
    "guidellm": ("chat", "completions", "responses"),
}
_POOLING = ("embeddings", "rerank", "score")
_CHOICE_KINDS = ("empty", "content", "reasoning", "tool_call")
_TOKEN_KINDS = ("content", "reasoning", "tool_call")


@dataclass(frozen=True)
class ToolFigure:
    """One of the tool's per-request figures: its own name and unit, its summary statistics
    under the tool's own column names (`ToolView.columns`), passport's nearest figure and what
    differs."""

    name: str
    unit: str
    values: dict[str, float | None]
    passport: str
    differs: str
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)  # in `unit`
    # How much each sample weighs in the tool's statistics (guidellm weighs a request's ITL by its
    # output tokens - 1 and its TPOT by its output tokens); None: each the same.
    weights: np.ndarray | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolTotal:
    """One line of the tool's run summary (duration, token totals, throughputs, peaks)."""

    name: str
    value: float
    passport: str
    differs: str


@dataclass(frozen=True)
class ToolView:
    """The run as `tool` summarizes it; `per_request` (vLLM's view) holds its per-request arrays
    as its result JSON writes them: input_lens, output_lens, ttfts (s), itls (s, a list each)."""

    tool: Tool
    requests: int
    columns: tuple[str, ...]
    totals: list[ToolTotal]
    figures: list[ToolFigure]
    per_request: dict[str, list[Any]] = field(default_factory=dict)
    failed: int = 0  # measured requests that failed (no figure counts them)


# The statistics each tool prints per figure, in its order (AIPerf's console table; the others'
# summaries print mean, median and P99).
_COLUMNS: dict[Tool, tuple[str, ...]] = {"vllm": ("mean", "median", "p99"), "sglang": ("mean", "median", "p99"),
                                         "aiperf": ("avg", "min", "max", "p99", "p90", "p75", "std"),
                                         "guidellm": ("mean", "median", "p99")}


def inverse_cdf(values: np.ndarray, q: float, weights: np.ndarray | None = None) -> float:
    """guidellm's percentile (0.8, schemas/statistics.py Percentiles.from_pdf): the smallest
    value whose cumulative share of the samples (of their `weights`, when given) reaches q, no
    interpolation."""
    unique, inverse = np.unique(values, return_inverse=True)
    mass = np.bincount(inverse.ravel(), weights=weights, minlength=len(unique)).astype(float)
    cumulative = np.cumsum(mass / mass.sum())
    return float(unique[min(int(np.searchsorted(cumulative, q, side="left")), len(unique) - 1)])


def _summary(values: np.ndarray, columns: tuple[str, ...], lower: bool = False,
             weights: np.ndarray | None = None) -> dict[str, float | None]:
    """`columns` of the finite `values`; percentiles by numpy's linear interpolation, or with
    `lower` by guidellm's inverse CDF. With `weights`, each value weighs that much (guidellm's
    weighted statistics; a value of weight 0 is left out, as guidellm leaves it)."""
    keep = np.isfinite(values) if weights is None else np.isfinite(values) & (weights > 0)
    values = values[keep]
    w = None if weights is None else weights[keep]
    if not len(values):
        return dict.fromkeys(columns)
    out: dict[str, float | None] = {}
    mean = float(np.average(values, weights=w))
    for column in columns:
        if column in ("mean", "avg"):
            out[column] = mean
        elif column == "median":
            out[column] = inverse_cdf(values, 0.5, w) if lower else float(np.median(values))
        elif column in ("min", "max"):
            out[column] = float(np.min(values) if column == "min" else np.max(values))
        elif column == "std":  # numpy's population std, as all four use
            out[column] = float(np.sqrt(np.average((values - mean) ** 2, weights=w)))
        else:
            q = float(column[1:])
            out[column] = inverse_cdf(values, q / 100, w) if lower else float(np.percentile(values, q))
    return out


def _peaks(event_times: list[np.ndarray], start: np.ndarray, end: np.ndarray) -> tuple[float, float]:
    """vLLM's peaks (vllm/benchmarks/serve.py, 0.32), over 1 s buckets from the first start: the
    most token events in one bucket, and the most requests *touching* one bucket (a request counts
    in every bucket from its start's to its end's, both included). The second is not the most in
    flight at once: two requests one after the other within a second count as two, so a closed
    loop of 2 reads as up to 4."""
    if not len(start):
        return 0.0, 0.0
    t0 = float(np.nanmin(start))
    times = np.concatenate(event_times) if event_times else np.zeros(0)
    buckets = np.bincount(((times - t0) // 1e9).astype(np.int64)) if len(times) else np.zeros(1)
    first = ((start - t0) // 1e9).astype(np.int64)
    last = ((end - t0) // 1e9).astype(np.int64)
    touching = np.zeros(int(last.max()) + 2, dtype=np.int64)
    np.add.at(touching, first, 1)
    np.add.at(touching, last + 1, -1)
    return float(buckets.max()), float(np.cumsum(touching).max())


def _per_request(files: RunFiles) -> tuple[pa.Table, pa.Table, int]:
    """(measured successful requests, chunks, measured requests that failed)."""
    requests = files.table("requests", figures_only=True)
    chunks = files.table("chunks", figures_only=True)
    if requests is None or chunks is None:
        raise RunFolderError(f"{files.folder} has no requests.parquet and chunks.parquet: is it a run folder?")
    window = pc.equal(requests["phase"], "measure")
    if "retry_of" in requests.column_names:  # an attempt a retry superseded is no request of its own
        retried = pc.unique(pc.drop_null(requests["retry_of"]))
        window = pc.and_(window, pc.invert(pc.is_in(requests["request_id"], retried)))
    ok = pc.and_(window, pc.is_in(requests["outcome"], pa.array(SUCCESS_OUTCOMES)))
    failed = int(pc.sum(pc.and_(window, pc.invert(ok))).as_py() or 0)
    return requests.filter(ok), chunks, failed


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


def _column(requests: pa.Table, name: str) -> np.ndarray:
    values: np.ndarray = requests[name].to_numpy(zero_copy_only=False).astype(np.float64)
    return values


_WINDOW = "first send to last end (the tool's clock starts a little earlier)"


@dataclass(frozen=True)
class _Run:
    """A run's successful measured requests as every tool's view reads them: each request's
    start (before connecting) and end, output and prompt tokens (usage, else our count)."""

    requests: pa.Table
    chunks: pa.Table
    failed: int
    columns: tuple[str, ...]
    per_request: dict[str, list[Any]] = field(default_factory=dict)  # filled by a view that has them
    lower: bool = False  # percentiles by guidellm's inverse CDF (`inverse_cdf`)

    @cached_property
    def ids(self) -> np.ndarray:
        ids: np.ndarray = self.requests["request_id"].to_numpy()
        return ids

    @cached_property
    def start(self) -> np.ndarray:
        start: np.ndarray = _column(self.requests, "sent_ns") - np.nan_to_num(_column(self.requests, "connect_ns"))
        return start

    @cached_property
    def end(self) -> np.ndarray:
        return _column(self.requests, "end_ns")

    @cached_property
    def server(self) -> np.ndarray:
        return _column(self.requests, "completion_tokens")

    @cached_property
    def out(self) -> np.ndarray:
        return output_tokens(self.requests)

    @cached_property
    def prompt(self) -> np.ndarray:
        server, client = _column(self.requests, "prompt_tokens"), _column(self.requests, "input_tokens_client")
        prompt: np.ndarray = np.where(np.isfinite(server), server, client)
        return prompt

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def total_in(self) -> float:
        return float(np.nansum(self.prompt))

    @property
    def wall_s(self) -> float:
        return (float(self.end.max() - self.start.min()) / 1e9) if self.n else float("nan")

    def fig(self, name: str, values: np.ndarray, passport: str, differs: str, unit: str = "ms",
            weights: np.ndarray | None = None) -> ToolFigure:
        return ToolFigure(name, unit, _summary(values, self.columns, self.lower, weights), passport, differs, values,
                          weights)

    def firsts_lasts(self, kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
        """Each request's first and last event of `kinds`, the gaps between them, the events."""
        events = _events(self.chunks, self.ids, kinds)
        first = np.array([e[0] if len(e) else np.nan for e in events], dtype=np.float64)
        last = np.array([e[-1] if len(e) else np.nan for e in events], dtype=np.float64)
        gaps = np.concatenate([np.diff(e) for e in events]) if events else np.zeros(0)
        return first, last, gaps.astype(np.float64), events


def _per_token(latency: np.ndarray, ttft: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """(latency - TTFT) / (tokens - 1) of each request with two tokens or more, else NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        values: np.ndarray = np.where(tokens > 1, (latency - ttft) / (tokens - 1), np.nan)
        return values


def tool_view(source: RunSource, tool: Tool, api: str, columns: tuple[str, ...] | None = None) -> ToolView:
    """The run (a folder, or a reader of one) summarized as `tool` would summarize it (see the
    module docstring); `api` is the run's endpoint.api; `columns`: the statistics of each figure
    (mean, median, std, min, max, pNN), the tool's own by default. A kind the tool has no client
    for (`VIEWS`) is refused with a SpecError."""
    if api not in VIEWS[tool]:
        raise SpecError(f"{tool} has no client for endpoint.api {api}, so it defines no view of this run "
                        f"(its views: {', '.join(VIEWS[tool])}); `passport show RUN` gives passport's own figures")
    requests, chunks, failed = _per_request(RunFiles.of(source))
    run = _Run(requests, chunks, failed, columns or _COLUMNS[tool], lower=tool == "guidellm")
    if tool == "vllm" and api in _POOLING:
        totals, figures = _vllm_pooling_view(run)
    elif tool in ("vllm", "sglang"):
        totals, figures = _serving_view(run, tool, api)
    elif tool == "aiperf":
        totals, figures = _aiperf_view(run)
    else:
        totals, figures = _guidellm_view(run)
    return ToolView(tool, run.n, run.columns, totals, figures, run.per_request, run.failed)


def _serving_view(r: _Run, tool: Tool, api: str) -> tuple[list[ToolTotal], list[ToolFigure]]:
    """vLLM's or SGLang's bench summary of the run."""
    start, end, out, n, wall_s, total_in, window = r.start, r.end, r.out, r.n, r.wall_s, r.total_in, _WINDOW
    fig, firsts_lasts, ms = r.fig, r.firsts_lasts, 1e-6
    requests, server, failed = r.requests, r.server, r.failed
    if tool == "vllm":
        # its Responses and audio clients time the events that carry text (output or reasoning
        # deltas; transcript content) and end at the stream's end
        typed = api in ("responses", "audio_transcriptions")
        first, last, gaps, events = firsts_lasts(("content", "reasoning") if typed else _CHOICE_KINDS)
        if api == "chat":  # its chat client stamps every event before [DONE], the usage chunk too
            last = firsts_lasts((*_CHOICE_KINDS, "usage"))[1]
        elif typed:
            last = end
        ttft, e2e, tokens = first - start, last - start, out
        intended = _column(requests, "intended_ns")
        slot = _column(requests, "slot_ns") if "slot_ns" in requests.column_names else np.full(len(intended), np.nan)
        queued = np.where(slot > intended, slot - intended, 0.0) / 1e9  # vLLM's client_queue_time: the cap's wait
        r.per_request.update(request_ids=[int(i) for i in r.ids], input_lens=[int(x) for x in np.nan_to_num(r.prompt)],
                             output_lens=[int(x) for x in np.nan_to_num(tokens)],
                             ttfts=[float(x) / 1e9 for x in ttft], itls=[(np.diff(e) / 1e9).tolist() for e in events],
                             latencies=[float(x) / 1e9 for x in e2e], start_times=[float(x) / 1e9 for x in start],
                             queue_times=[float(x) for x in queued])
        names = ("E2EL", "ttft.any + connect")
        notes = ("starts before connecting; the first event with choices, an empty role delta included",
                 "E2EL to the last event before [DONE] (usage included)",
                 "gaps between events with choices, empty ones included",
                 "ends at the last event before [DONE], not the last byte")
    else:
        first, _, gaps, events = firsts_lasts(("content",))
        tokens = np.where(np.isfinite(server), server, _column(requests, "max_tokens"))
        ttft, e2e = first - start, end - start
        names = ("E2E Latency", "ttft.content + connect")
        notes = ("starts before a new connection (one per request); the first non-empty content, reasoning not "
                 "counted", "E2E to the last line read; tokens from usage, else the requested max_tokens",
                 "gaps between content events only", "ends at the last line read ([DONE] included)")
    generated = float(np.nansum(tokens))
    peak_tokens, peak_requests = _peaks(events, start, start + e2e)
    totals = [
        ToolTotal("Successful requests", n, "outcomes ok + truncated", "measured requests"),
        ToolTotal("Failed requests", failed, "measured - succeeded", "every failure class together"),
        ToolTotal("Benchmark duration (s)", wall_s, "windows duration_s", window),
        ToolTotal("Total input tokens", total_in, "lengths.input_tokens.server",
                  "prompt tokens as the server counted them (the tool sums its own dataset's lengths)"),
        ToolTotal("Total generated tokens", generated, "completion tokens",
                  "usage" if tool == "vllm" else "usage, else the requested max_tokens"),
        ToolTotal("Request throughput (req/s)", n / wall_s, "throughput.requests_per_s", window),
        ToolTotal("Output token throughput (tok/s)", generated / wall_s, "throughput.output_tokens_per_s",
                  window),
        ToolTotal("Peak output token throughput (tok/s)", peak_tokens, "(no passport figure)",
                  "the most streamed events in one second, counted from the first send"),
        ToolTotal("Peak concurrent requests", peak_requests, "(no passport figure; concurrency max is another)",
                  "the most successful requests touching one second, each from its send to its " + names[0]),
        ToolTotal("Total token throughput (tok/s)", (total_in + generated) / wall_s,
                  "throughput.total_tokens_per_s", window),
    ]
    if tool == "sglang":
        totals[6:6] = [ToolTotal("Input token throughput (tok/s)", total_in / wall_s, "(no passport figure)",
                                 window)]
        totals.append(ToolTotal("Concurrency", float(np.nansum(e2e)) / 1e9 / wall_s, "concurrency mean",
                                "the sum of E2E latencies over the duration"))
    figures = [
        fig("TTFT", ttft * ms, names[1], notes[0]),
        fig("TPOT", _per_token(e2e, ttft, tokens) * ms, "tpot", notes[1]),
        fig("ITL", gaps * ms, "itl.chunk", notes[2]),
        fig(names[0], e2e * ms, "e2e + connect", notes[3]),
    ]
    return totals, figures


def _vllm_pooling_view(r: _Run) -> tuple[list[ToolTotal], list[ToolFigure]]:
    """vLLM's summary of an embeddings, rerank or score run (serve.py's EmbedBenchmarkMetrics:
    requests, inputs and input tokens over the duration, and E2EL)."""
    n, wall_s, total_in, window = r.n, r.wall_s, r.total_in, _WINDOW
    inputs = float(np.nansum(_column(r.requests, "n_inputs"))) if "n_inputs" in r.requests.column_names else 0.0
    latency = r.end - r.start
    r.per_request.update(request_ids=[int(i) for i in r.ids], input_lens=[int(x) for x in np.nan_to_num(r.prompt)],
                         latencies=[float(x) / 1e9 for x in latency], queue_times=[0.0] * n)
    totals = [
        ToolTotal("Successful requests", n, "outcomes ok + truncated", "measured requests"),
        ToolTotal("Failed requests", r.failed, "measured - succeeded", "every failure class together"),
        ToolTotal("Benchmark duration (s)", wall_s, "windows duration_s", window),
        ToolTotal("Total input tokens", total_in, "lengths.input_tokens.server",
                  "prompt tokens as the server counted them (the tool sums its own dataset's lengths)"),
        ToolTotal("Total input sequences", inputs, "n_inputs", "inputs (embeddings) or documents (rerank, score)"),
        ToolTotal("Request throughput (req/s)", n / wall_s, "throughput.requests_per_s", window),
        ToolTotal("Input throughput (inputs/s)", inputs / wall_s,
                  "throughput.inputs_per_s or throughput.documents_per_s", window),
        ToolTotal("Total token throughput (tok/s)", total_in / wall_s, "throughput.input_tokens_per_s", window),
    ]
    figures = [r.fig("E2EL", latency * 1e-6, "e2e + connect", "starts before connecting; the whole answer")]
    return totals, figures


def _aiperf_view(r: _Run) -> tuple[list[ToolTotal], list[ToolFigure]]:
    """AIPerf's summary of the run."""
    start, out, n, wall_s, window = r.start, r.out, r.n, r.wall_s, _WINDOW
    fig, firsts_lasts, ms = r.fig, r.firsts_lasts, 1e-6
    prompt = r.prompt
    first, last, gaps, _ = firsts_lasts(_TOKEN_KINDS)
    ttft = first - start
    latency = last - start
    itl = _per_token(latency, ttft, out)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_user = np.where(itl > 0, 1e9 / itl, np.nan)
    generated = float(np.nansum(out))
    totals = [
        ToolTotal("Request Count (requests)", n, "outcomes ok + truncated", "measured successful requests"),
        ToolTotal("Request Throughput (requests/sec)", n / wall_s, "throughput.requests_per_s", window),
        ToolTotal("Output Token Throughput (tokens/sec)", generated / wall_s, "throughput.output_tokens_per_s",
                  window),
    ]
    figures = [
        fig("Time to First Token", ttft * ms, "ttft.any + connect", "starts before the connection is acquired"),
        fig("Inter Token Latency", itl * ms, "tpot", "per request, from its latency and TTFT"),
        fig("Inter Chunk Latency", gaps * ms, "itl.chunk", "the same gaps"),
        fig("Request Latency", latency * ms, "e2e + connect", "ends at the last token-bearing response, not the "
            "last byte"),
        fig("Output Token Throughput Per User", per_user, "tps.user", "1 / its inter token latency: TTFT left "
            "out, as tps.user leaves it", "tokens/sec/user"),
        fig("Output Sequence Length", out, "lengths.output_tokens.realized", "usage, else our count", "tokens"),
        fig("Input Sequence Length", prompt, "lengths.input_tokens.server", "usage, else our count", "tokens"),
    ]
    return totals, figures


def _guidellm_view(r: _Run) -> tuple[list[ToolTotal], list[ToolFigure]]:
    """guidellm's summary of the run."""
    start, end, out, n, wall_s, total_in, window = r.start, r.end, r.out, r.n, r.wall_s, r.total_in, _WINDOW
    fig, firsts_lasts, ms = r.fig, r.firsts_lasts, 1e-6
    first, last, _, token_events = firsts_lasts(_TOKEN_KINDS)
    every = _events(r.chunks, r.ids, tuple(str(k) for k in pc.unique(r.chunks["kind"].cast(pa.string())).to_pylist()))
    r.per_request.update(iterations=[len(e) for e in every], token_iterations=[len(e) for e in token_events])
    with np.errstate(divide="ignore", invalid="ignore"):
        itl = np.where(out > 1, (last - first) / (out - 1), np.nan)
        tpot = np.where(out > 0, (last - start) / out, np.nan)
    generated = float(np.nansum(out))
    totals = [
        ToolTotal("duration (s)", wall_s, "windows duration_s", window),
        ToolTotal("requests_per_second", n / wall_s, "throughput.requests_per_s", window),
        ToolTotal("output_tokens_per_second", generated / wall_s, "throughput.output_tokens_per_s", window),
        ToolTotal("tokens_per_second", (total_in + generated) / wall_s, "throughput.total_tokens_per_s",
                  window + "; prompt and output tokens"),
    ]
    figures = [
        fig("request_latency", (end - start) / 1e9, "e2e + connect", "start to end, in seconds as guidellm "
            "reports it", "s"),
        fig("time_to_first_token_ms", (first - start) * ms, "ttft.any + connect", "starts before connecting"),
        fig("inter_token_latency_ms", itl * ms, "itl.token (mean); tpot per request",
            "first to last token over tokens - 1, each request weighing its tokens - 1", weights=out - 1),
        fig("time_per_output_token_ms", tpot * ms, "(no passport figure)", "TTFT included: start to the last "
            "token over all output tokens, each request weighing its tokens", weights=out),
        fig("prompt_token_count", r.prompt, "lengths.input_tokens.server", "usage, else our count", "tokens"),
        fig("output_token_count", out, "lengths.output_tokens.realized", "usage, else our count", "tokens"),
    ]
    r.per_request.update(start_s=[float(x) / 1e9 for x in start], end_s=[float(x) / 1e9 for x in end])
    return totals, figures
