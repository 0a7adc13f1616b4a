"""Server telemetry on the run's clock, against the simulated engine's vLLM-named /metrics."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
LOAD = {"pattern": "closed", "concurrency": 4, "measure": {"duration_s": 2.5}}


def _run(url: str, write_spec: WriteSpec, out: Path, **extra: object) -> dict[str, object]:
    spec = write_spec(_spec(url, LOAD, telemetry={"interval_s": 0.2}, **extra), name=f"{out.name}.yaml")
    result = run_cli("run", str(spec), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((only_run_dir(out) / "passport.json").read_text())  # type: ignore[no-any-return]


def test_engine_series_are_sampled_and_summarized_over_the_window(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "2", "--slots", "2")
    passport = _run(url, write_spec, tmp_path / "out")
    server = passport["results"]["server"]  # type: ignore[index]
    gauges = server["gauges"]
    # four users, two slots: two generate while two wait, nearly all the time
    assert gauges["requests_running"]["peak"] == 2 and gauges["requests_waiting"]["peak"] == 2
    assert gauges["kv_cache_usage"]["peak"] == 1.0 and gauges["kv_cache_usage"]["n"] >= 8
    window_tokens = passport["results"]["metrics"]["throughput.output_tokens_per_s"]["mean"] * \
        passport["results"]["windows"][0]["duration_s"]  # type: ignore[index]
    # the counter's increase between samples 0.2 s apart brackets the tokens the client saw
    assert abs(server["counter_deltas"]["generation_tokens_total"] - window_tokens) < 0.25 * window_tokens
    assert server["energy_j"] is None and "no GPU power source" in server["energy_reason"]
    assert passport["protocol"]["telemetry"]["sources"][0].startswith("prometheus http://127.0.0.1:")  # type: ignore[index]
    run = only_run_dir(tmp_path / "out")
    assert "KV-cache usage was not sampled" not in (run / "report.md").read_text()
    assert run_cli("verify", str(run)).returncode == 0


def test_a_slow_metrics_endpoint_never_delays_requests(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "2", "--metrics-delay-s", "1.5")
    passport = _run(url, write_spec, tmp_path / "out", validity={"max_dispatch_lag_p99_ms": 10.0})
    lag = passport["results"]["metrics"]["dispatch_lag"]  # type: ignore[index]
    assert lag["p99"] < 0.010
    telemetry = pq.read_table(only_run_dir(tmp_path / "out") / "telemetry.parquet").to_pandas()
    scrapes = telemetry[(telemetry.source == "engine") & (telemetry.name == "requests_running")]
    assert 1 <= len(scrapes) <= 3  # one 1.5 s scrape at a time over 2.5 s, not one per 0.2 s tick
