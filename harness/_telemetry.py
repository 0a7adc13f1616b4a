"""Server telemetry on the run's clock: engine /metrics, GPU memory/utilization/power, into
telemetry.parquet beside the client's own samples.

Sources, each scraped every `interval_s` on a worker thread (never on the event loop, so a slow
or failing endpoint cannot delay a request; a scrape still running when the next is due is
skipped, and failures are counted, not raised):
- `PrometheusSource`: an engine's Prometheus text (vLLM, SGLang, llama.cpp, TGI, TRT-LLM's
  /prometheus/metrics) or a DCGM exporter. Every non-bucket sample is kept raw (source
  `metrics` or `dcgm`, name = `metric{labels}`), and the series a benchmark needs are also
  written under normalized names (source `engine`: `kv_cache_usage` 0..1, `requests_running`,
  `requests_waiting`, `preemptions_total`, `prefix_cache_queries_total`,
  `prefix_cache_hits_total`, `prefix_cache_hit_rate`, `prompt_tokens_total`,
  `generation_tokens_total`, `kv_cache_tokens`; source `gpu:dcgm` for DCGM: `memory_used_bytes`,
  `utilization_pct`, `power_w`, `energy_j_total`).
- `TrtllmJsonSource`: TensorRT-LLM's JSON /metrics (iteration stats, drained when read);
  `gpuMemUsage` as `gpu:trtllm memory_used_bytes`.
- `NvmlSource`: every GPU through NVML (`pynvml`), when a driver is present (source `gpu:nvml`).
A failed scrape is a row (source `sampler`, name `scrape_failed:<source>`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import httpx

from harness import engines
from harness._control import ControlClient
from harness._loadspec import CONTROL_BYTES
from harness._prom import samples
from harness._recorder import TableWriter

__all__ = ["TelemetrySource", "PrometheusSource", "TrtllmJsonSource", "NvmlSource", "TelemetrySampler",
           "engine_series", "nvml_devices", "BRACKET_COUNTERS", "read_counters", "close_sources"]

Row = tuple[str, str, float]  # (source, name, value)

# normalized name -> how the label sets of one metric combine; which metrics feed each name is
# in the engine profiles (harness.engines), tried in registration order.
_COMBINE: dict[str, str] = {
    "kv_cache_usage": "mean", "requests_running": "sum", "requests_waiting": "sum", "preemptions_total": "sum",
    "prefix_cache_queries_total": "sum", "prefix_cache_hits_total": "sum", "prefix_cache_hit_rate": "mean",
    "prompt_tokens_total": "sum", "generation_tokens_total": "sum", "kv_cache_tokens": "sum",
    "requests_finished_total": "sum",
}
# The engine's own totals read right before the timed phase's first send and right after its
# last answer (the bracket), for the client's totals to be held against, and the prefix cache's
# (a run too short for a sample inside its window still has its hits).
BRACKET_COUNTERS = ("requests_finished_total", "generation_tokens_total", "prompt_tokens_total",
                    "prefix_cache_queries_total", "prefix_cache_hits_total")
_DCGM: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", 2.0**20),  # MiB
    "DCGM_FI_DEV_GPU_UTIL": ("utilization_pct", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j_total", 1e-3),  # mJ
}


class TelemetrySource(Protocol):
    name: str

    def scrape(self) -> list[Row]: ...


def _ok_text(client: ControlClient, url: str) -> str:
    """The whole body of a 200 answer, within the client's time and size bounds; raises otherwise
    (a failed scrape is counted by the sampler)."""
    answer = client.fetch("GET", url)
    if answer.status_code != 200:
        raise httpx.HTTPStatusError(f"{url} answered {answer.status_code}", request=httpx.Request("GET", url),
                                    response=httpx.Response(answer.status_code))
    return answer.text


def engine_series() -> dict[str, tuple[tuple[str, ...], str]]:
    """normalized name -> (every registered engine's metric names in preference order, how
    label sets combine)."""
    return {name: (tuple(metric for p in engines.profiles() for metric in p.series.get(name, ())), combine)
            for name, combine in _COMBINE.items()}


def _normalize(values: dict[str, list[float]]) -> list[Row]:
    rows: list[Row] = []
    for p in engines.profiles():
        if p.derive_series is not None:
            rows += [("engine", name, value) for name, value in p.derive_series(values)]
    for normalized, (names, combine) in engine_series().items():
        for metric in names:
            found = values.get(metric)
            if found:
                rows.append(("engine", normalized, sum(found) / len(found) if combine == "mean" else sum(found)))
                break
    return rows


class PrometheusSource:
    """An engine's (or a DCGM exporter's, `dcgm=True`) Prometheus text endpoint."""

    def __init__(self, url: str, timeout_s: float = 2.0, dcgm: bool = False, headers: dict[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, max_bytes: int = CONTROL_BYTES) -> None:
        self.name = "dcgm" if dcgm else "metrics"
        self.url = url
        self._dcgm = dcgm
        self._client = ControlClient(url, headers, timeout_s=timeout_s, transport=transport, max_bytes=max_bytes)

    def scrape(self) -> list[Row]:
        parsed = samples(_ok_text(self._client, self.url))
        rows: list[Row] = [(self.name, s.key, s.value) for s in parsed]
        by_name: dict[str, list[float]] = {}
        for s in parsed:
            by_name.setdefault(s.name, []).append(s.value)
        if self._dcgm:
            for metric, (normalized, scale) in _DCGM.items():
                # the parser names a counter's samples <name>_total
                for value in by_name.get(metric, []) + by_name.get(f"{metric}_total", []):
                    rows.append(("gpu:dcgm", normalized, value * scale))
        else:
            rows += _normalize(by_name)
        return rows

    def close(self) -> None:
        self._client.close()


class TrtllmJsonSource:
    """TensorRT-LLM's JSON /metrics: iteration stats, removed from the server's queue when read."""

    name = "trtllm"

    def __init__(self, url: str, timeout_s: float = 2.0, transport: httpx.BaseTransport | None = None,
                 max_bytes: int = CONTROL_BYTES) -> None:
        self.url = url
        self._client = ControlClient(url, timeout_s=timeout_s, transport=transport, max_bytes=max_bytes)

    def scrape(self) -> list[Row]:
        stats = json.loads(_ok_text(self._client, self.url))
        rows: list[Row] = []
        for it in stats if isinstance(stats, list) else []:
            kv = it.get("kvCacheStats") or {}
            if kv.get("maxNumBlocks"):
                rows.append(("engine", "kv_cache_usage", float(kv.get("usedNumBlocks", 0)) / float(kv["maxNumBlocks"])))
            if "cacheHitRate" in kv:
                rows.append(("engine", "prefix_cache_hit_rate", float(kv["cacheHitRate"])))
            for key, name in (("numActiveRequests", "requests_running"), ("numQueuedRequests", "requests_waiting")):
                if key in it:
                    rows.append(("engine", name, float(it[key])))
            if "gpuMemUsage" in it:
                rows.append(("gpu:trtllm", "memory_used_bytes", float(it["gpuMemUsage"])))
        return rows

    def close(self) -> None:
        self._client.close()


def nvml_devices() -> list[dict[str, Any]]:
    """GPU model, memory, driver and CUDA versions through NVML; [] without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver, no GPU: all mean "none"
        return []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append({"index": i, "name": pynvml.nvmlDeviceGetName(handle),
                        "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                        "driver": driver, "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}"})
        return out
    finally:
        pynvml.nvmlShutdown()


class NvmlSource:
    """Memory used, utilization, power and the energy counter of every GPU (summed over GPUs)."""

    name = "nvml"

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def scrape(self) -> list[Row]:
        nv = self._nvml
        used = util = power = energy = 0.0
        energy_ok = True
        for h in self._handles:
            used += nv.nvmlDeviceGetMemoryInfo(h).used
            util += nv.nvmlDeviceGetUtilizationRates(h).gpu / len(self._handles)
            power += nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            try:
                energy += nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
            except nv.NVMLError:
                energy_ok = False
        rows: list[Row] = [("gpu:nvml", "memory_used_bytes", used), ("gpu:nvml", "utilization_pct", util),
                           ("gpu:nvml", "power_w", power)]
        if energy_ok:
            rows.append(("gpu:nvml", "energy_j_total", energy))
        return rows

    def close(self) -> None:
        self._nvml.nvmlShutdown()


def close_sources(sources: list[Any]) -> None:
    """Close every source that holds a connection."""
    for source in sources:
        close = getattr(source, "close", None)
        if close is not None:
            close()


def read_counters(sources: list[Any], settle_s: float = 0.0) -> list[Row]:
    """The engine's counters named in BRACKET_COUNTERS, read now from every engine Prometheus
    source (source `engine`; a source that fails is left out, so an engine without counters
    gives []). With `settle_s` > 0 they are read again every 0.1 s until two reads agree, for at
    most `settle_s`: an engine may count an answer a moment after sending it."""
    engines_ = [s for s in sources if isinstance(s, PrometheusSource) and s.name == "metrics"]

    def once() -> list[Row]:
        rows: list[Row] = []
        for source in engines_:
            try:
                rows += [r for r in source.scrape() if r[0] == "engine" and r[1] in BRACKET_COUNTERS]
            except Exception:  # noqa: BLE001 - a failed read is a missing bracket, never fatal
                continue
        return rows

    rows = once()
    deadline = time.monotonic() + settle_s
    while rows and time.monotonic() < deadline:
        time.sleep(0.1)
        again = once()
        if again == rows:
            break
        rows = again
    return rows


class TelemetrySampler:
    """Runs every source each `interval_s` on worker threads and writes rows on the run clock.
    The sources stay open: whoever opened them closes them (`close_sources`)."""

    def __init__(self, sources: list[Any], writer: TableWriter, t0_ns: int, interval_s: float = 1.0,
                 now: Callable[[], int] = time.perf_counter_ns) -> None:
        self.sources = sources
        self.writer = writer
        self.t0_ns = t0_ns
        self.interval_s = interval_s
        self.now = now
        self.failures: dict[str, int] = {}
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(sources)), thread_name_prefix="telemetry")
        self._pending: dict[int, Future[list[Row]]] = {}
        self._started: dict[int, int] = {}

    def _collect(self) -> None:
        for i, future in list(self._pending.items()):
            if not future.done():
                continue
            del self._pending[i]
            source = self.sources[i]
            try:
                rows = future.result()
            except Exception:  # noqa: BLE001 - a failing source is counted, never fatal
                self.failures[source.name] = self.failures.get(source.name, 0) + 1
                self.writer.append_row({"t_ns": self._started[i] - self.t0_ns, "source": "sampler",
                                        "name": f"scrape_failed:{source.name}", "value": 1.0})
                continue
            t = self._started[i] - self.t0_ns
            for src, name, value in rows:
                self.writer.append_row({"t_ns": t, "source": src, "name": name, "value": value})

    def tick(self) -> None:
        """Collect finished scrapes, start the sources that are idle."""
        self._collect()
        for i, source in enumerate(self.sources):
            if i in self._pending:
                continue  # still scraping: skip rather than queue
            self._started[i] = self.now()
            self._pending[i] = self._pool.submit(source.scrape)

    async def run(self) -> None:
        """Tick every interval until cancelled; a last collection on the way out."""
        try:
            while True:
                self.tick()
                await asyncio.sleep(self.interval_s)
        finally:
            for future in self._pending.values():
                future.cancel()
            await asyncio.sleep(0)
            self._collect()
            self._pool.shutdown(wait=False, cancel_futures=True)
