"""vLLM's `bench serve --save-result` JSON, written from a run's raw logs under vLLM's own
definitions (`tool_view(..., "vllm")`), so the scripts and dashboards that read vLLM's result
files read a passport run's.

The keys and units are vLLM's (vllm/benchmarks/serve.py, 0.32): the run's settings (`date`
as %Y%m%d-%H%M%S, `backend` and `endpoint_type`, `label`, `model_id`, `tokenizer_id`,
`num_prompts`, `request_rate` ("inf" or a number), `burstiness`, `max_concurrency`), its totals
(`duration` s, `completed`, `failed`, `total_input_tokens`, `total_output_tokens`,
`request_throughput`, `request_goodput` (null: vLLM's goodput is not asked for),
`output_throughput`, `total_token_throughput`, `max_output_tokens_per_s`,
`max_concurrent_requests`, `rtfx` (0: no audio), and per request `latencies` (s) and
`queue_times` (s: the wait for the in-flight cap, passport's slot_wait, 0 for a request that found a
slot), which vLLM 0.32 keeps even without --save-detailed) and for each metric of
`percentile_metrics` (ttft, tpot, itl, e2el)
`mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms` and `p<P>_<m>_ms` for each percentile (`p99`,
`p99.9`: vLLM's spelling). With `detailed` (vLLM's --save-detailed) the per-request arrays:
`input_lens`, `output_lens`, `start_times` (s on passport's clock, from protocol.clock.t0, where
vLLM's are its process's perf_counter), `ttfts` (s), `itls` (s, one list per request),
`generated_texts`, `errors`; passport lists the measured requests that succeeded (vLLM lists every request, a
failed one with zeros and its error): `failed` counts the others. Beside vLLM's keys, `passport`
names the run folder and the passport's content hash this file was derived from.

An embeddings, rerank or score run gets serve.py's other result (its EmbedBenchmarkMetrics):
`duration`, `completed`, `failed`, `total_input_tokens`, `total_input_sequences`,
`request_throughput`, `input_sequence_throughput`, `total_token_throughput`, `input_lens`,
`latencies`, `queue_times`, `errors` and the e2el statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from passport.audit._views import ToolView

__all__ = ["vllm_result", "vllm_result_name", "VLLM_METRIC_FIGURES"]

# vLLM's metric attribute names, by the figure of its summary they are
VLLM_METRIC_FIGURES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
_TOTALS = {"duration": "Benchmark duration (s)", "completed": "Successful requests", "failed": "Failed requests",
           "total_input_tokens": "Total input tokens", "total_output_tokens": "Total generated tokens",
           "request_throughput": "Request throughput (req/s)", "output_throughput": "Output token throughput (tok/s)",
           "total_token_throughput": "Total token throughput (tok/s)",
           "max_output_tokens_per_s": "Peak output token throughput (tok/s)",
           "max_concurrent_requests": "Peak concurrent requests"}
_COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrent_requests")
# An embeddings, rerank or score run's totals (serve.py's EmbedBenchmarkMetrics result)
_POOLING_TOTALS = {"duration": "Benchmark duration (s)", "completed": "Successful requests",
                   "failed": "Failed requests", "total_input_tokens": "Total input tokens",
                   "total_input_sequences": "Total input sequences", "request_throughput": "Request throughput (req/s)",
                   "input_sequence_throughput": "Input throughput (inputs/s)",
                   "total_token_throughput": "Total token throughput (tok/s)"}


def percentile_word(p: float) -> str:
    """vLLM's spelling of a percentile in a key: 99 -> "99", 99.9 -> "99.9"."""
    return str(int(p)) if int(p) == p else str(p)


def vllm_result(view: ToolView, settings: dict[str, Any], metrics: tuple[str, ...], percentiles: tuple[float, ...],
                detailed: bool, texts: list[str] | None = None) -> dict[str, Any]:
    """The result JSON (see the module docstring) of a vLLM `view` computed with the columns
    mean, median, std and p<P> for `percentiles`; `settings` are the run's settings keys."""
    if view.tool != "vllm":
        raise ValueError(f"a vLLM result is written from vLLM's view, not {view.tool}'s")
    totals = {t.name: t.value for t in view.totals}
    out: dict[str, Any] = dict(settings)
    if "Input throughput (inputs/s)" in totals:  # a pooling run: serve.py's embeddings keys
        return _pooling_result(view, totals, out, metrics, percentiles)
    for key, name in _TOTALS.items():
        value = totals.get(name)
        out[key] = (int(value) if key in _COUNTS and value is not None else value)
    out["request_goodput"] = None
    lists = view.per_request
    out.update(rtfx=0.0, latencies=lists.get("latencies", []), queue_times=lists.get("queue_times", []))
    if detailed:
        out.update(input_lens=lists.get("input_lens", []), output_lens=lists.get("output_lens", []),
                   start_times=lists.get("start_times", []), ttfts=lists.get("ttfts", []), itls=lists.get("itls", []),
                   generated_texts=texts if texts is not None else [""] * view.requests,
                   errors=[""] * view.requests)
    figures = {f.name: f for f in view.figures}
    for metric in metrics:
        figure = figures[VLLM_METRIC_FIGURES[metric]]
        out[f"mean_{metric}_ms"] = figure.values.get("mean")
        out[f"median_{metric}_ms"] = figure.values.get("median")
        out[f"std_{metric}_ms"] = figure.values.get("std")
        for p in percentiles:
            out[f"p{percentile_word(p)}_{metric}_ms"] = figure.values.get(f"p{percentile_word(p)}")
    return out


def _pooling_result(view: ToolView, totals: Mapping[str, float | None], out: dict[str, Any], metrics: tuple[str, ...],
                    percentiles: tuple[float, ...]) -> dict[str, Any]:
    """serve.py's result of an embeddings, rerank or score run (its `else` branch: no output
    tokens, no TTFT), with the e2el statistics asked for (the only latency it has)."""
    for key, name in _POOLING_TOTALS.items():
        value = totals.get(name)
        out[key] = int(value) if key in _COUNTS + ("total_input_sequences",) and value is not None else value
    lists = view.per_request
    out.update(input_lens=lists.get("input_lens", []), latencies=lists.get("latencies", []),
               queue_times=lists.get("queue_times", []), errors=[""] * view.requests)
    figure = next(f for f in view.figures if f.name == "E2EL")
    if "e2el" in metrics:
        out.update(mean_e2el_ms=figure.values.get("mean"), median_e2el_ms=figure.values.get("median"),
                   std_e2el_ms=figure.values.get("std"))
        for p in percentiles:
            out[f"p{percentile_word(p)}_e2el_ms"] = figure.values.get(f"p{percentile_word(p)}")
    return out


def vllm_result_name(label: str, request_rate: float | str, max_concurrency: int | None, model_id: str,
                     date: str) -> str:
    """vLLM's default file name: `{label}-{request_rate}qps[-concurrency{N}]-{model}-{date}.json`."""
    concurrency = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    return f"{label}-{request_rate}qps{concurrency}-{model_id.split('/')[-1]}-{date}.json"
