"""Telemetry sources and the server summary, on fixtures and hand-made samples."""

from __future__ import annotations

import json
import time

import httpx
import pyarrow as pa
import pytest

from harness import TELEMETRY_SCHEMA, PrometheusSource, TelemetrySampler, TrtllmJsonSource, read_counters
from passport.audit import server_summary
from tests.conftest import REPO

ENGINES = REPO / "tests" / "data" / "engines"


def _transport(body: str | object, status: int = 200, delay_s: float = 0.0) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        time.sleep(delay_s)
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("fixture, kv, running", [("vllm-v1", 0.25, 12.0), ("vllm-dev-mode", 0.5, 4.0)])
def test_vllm_old_and_new_metric_names_normalize_to_the_same_series(fixture: str, kv: float, running: float) -> None:
    text = json.loads((ENGINES / f"{fixture}.json").read_text())["routes"]["GET /metrics"]["text"]
    rows = PrometheusSource("http://x/metrics", transport=_transport(text)).scrape()
    engine = {name: value for source, name, value in rows if source == "engine"}
    assert engine["kv_cache_usage"] == kv and engine["requests_running"] == running
    raw = {name for source, name, _ in rows if source == "metrics"}
    assert not any("_bucket" in name for name in raw)  # histogram buckets are left out


def test_trtllm_json_stats_become_kv_usage_queue_and_gpu_memory() -> None:
    stats = json.loads((ENGINES / "trtllm.json").read_text())["routes"]["GET /metrics"]["json"]
    rows = TrtllmJsonSource("http://x/metrics", transport=_transport(stats)).scrape()
    assert ("engine", "kv_cache_usage", 1096 / 4096) in rows and ("engine", "requests_running", 3.0) in rows
    assert ("gpu:trtllm", "memory_used_bytes", 70e9) in rows


def test_the_bracket_reads_the_vllm_counters_summed_over_reasons_and_waits_for_them_to_settle() -> None:
    served = iter([4, 5, 6, 6, 6])  # the engine counts its last answers a moment after sending them

    def handle(request: httpx.Request) -> httpx.Response:
        n = next(served)
        return httpx.Response(200, text=f'vllm:request_success_total{{finished_reason="stop"}} {n}\n'
                                        'vllm:request_success_total{finished_reason="length"} 10\n'
                                        f"vllm:generation_tokens_total {n * 8}\nvllm:num_requests_running 1\n")

    engine = PrometheusSource("http://x/metrics", transport=httpx.MockTransport(handle))
    down = PrometheusSource("http://down/metrics", transport=_transport("", status=503))
    assert read_counters([engine, down], settle_s=2.0) == [("engine", "generation_tokens_total", 48.0),
                                                           ("engine", "requests_finished_total", 16.0)]
    assert next(served) == 6  # read until two reads agreed (the fourth), not to the deadline
    assert read_counters([down], settle_s=2.0) == []  # no counters: no bracket, and no waiting


class _Writer:
    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def append_row(self, row: dict[str, object]) -> None:
        self.rows.append(row)


def test_a_failing_or_slow_source_is_counted_and_skipped_never_waited_for() -> None:
    writer = _Writer()
    slow = PrometheusSource("http://slow/metrics", transport=_transport("up 1\n", delay_s=0.5))
    failing = PrometheusSource("http://down/metrics", transport=_transport("", status=503))
    sampler = TelemetrySampler([slow, failing], writer, t0_ns=0, interval_s=0.05)  # type: ignore[arg-type]
    start = time.perf_counter()
    for _ in range(5):
        sampler.tick()  # returns at once: scrapes run on worker threads
        time.sleep(0.05)
    assert time.perf_counter() - start < 0.45
    time.sleep(0.6)
    sampler.tick()
    names = [r["name"] for r in writer.rows]
    assert names.count("scrape_failed:metrics") >= 4  # the 503 source, every tick
    assert sum(1 for r in writer.rows if r["name"] == "up") <= 2  # the slow one was skipped while busy


def test_server_summary_counts_counters_and_gauges_inside_the_window_only() -> None:
    s = 1_000_000_000
    rows = [(0, "engine", "generation_tokens_total", 100.0), (1 * s, "engine", "generation_tokens_total", 150.0),
            (2 * s, "engine", "generation_tokens_total", 260.0), (3 * s, "engine", "generation_tokens_total", 400.0),
            (1 * s, "engine", "kv_cache_usage", 0.2), (2 * s, "engine", "kv_cache_usage", 0.6),
            (3 * s, "engine", "kv_cache_usage", 0.9),
            (1 * s, "engine", "prefix_cache_queries_total", 10.0),
            (2 * s, "engine", "prefix_cache_queries_total", 110.0),
            (1 * s, "engine", "prefix_cache_hits_total", 0.0), (2 * s, "engine", "prefix_cache_hits_total", 25.0),
            (1 * s, "gpu:nvml", "memory_used_bytes", 5e9), (2 * s, "gpu:nvml", "memory_used_bytes", 7e9),
            (1 * s, "gpu:nvml", "energy_j_total", 1000.0), (2 * s, "gpu:nvml", "energy_j_total", 1450.0)]
    table = pa.table({"t_ns": [r[0] for r in rows], "source": [r[1] for r in rows], "name": [r[2] for r in rows],
                      "value": [r[3] for r in rows], "worker": [None] * len(rows)}, schema=TELEMETRY_SCHEMA)
    out = server_summary(table, [(1.0 * s, 2.5 * s)])
    assert out is not None
    assert out["counter_deltas"]["generation_tokens_total"] == 110.0  # 150 at the start, 260 the last inside
    assert out["gauges"]["kv_cache_usage"] == {"peak": 0.6, "mean": pytest.approx(0.4), "n": 2}
    assert out["prefix_cache_hit_rate"] == 0.25
    assert out["gpu_memory_peak_bytes"] == 7_000_000_000 and out["energy_j"] == 450.0
    assert server_summary(table.filter(pa.compute.equal(table.column("source"), "gpu:nvml")),
                          [(0.0, 0.5 * s)])["energy_j"] is None  # type: ignore[index]


def test_dcgm_exporter_series_become_gpu_memory_power_and_energy() -> None:
    text = ("# TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{gpu=\"0\"} 40960\n"
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 350.5\n"
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 123456789\n")
    rows = PrometheusSource("http://dcgm:9400/metrics", dcgm=True, transport=_transport(text)).scrape()
    gpu = {name: value for source, name, value in rows if source == "gpu:dcgm"}
    assert gpu == {"memory_used_bytes": 40960 * 2**20, "power_w": 350.5, "energy_j_total": 123456.789}


def test_llama_cpp_cache_queries_add_the_cached_tokens_it_does_not_count_as_processed() -> None:
    text = ("# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n"
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 60\n"
            "# TYPE llamacpp:prompt_tokens_cached_total counter\nllamacpp:prompt_tokens_cached_total 140\n")
    rows = PrometheusSource("http://x/metrics", transport=_transport(text)).scrape()
    engine = {name: value for source, name, value in rows if source == "engine"}
    assert engine["prefix_cache_queries_total"] == 200 and engine["prefix_cache_hits_total"] == 140
