"""Own traffic against the simulated engine: a logged request's own messages are what is sent,
and a trace is replayed at its recorded times."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]


def test_logged_messages_are_sent_as_logged_under_a_declared_arrival_pattern(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    rows = [{"messages": [{"role": "system", "content": "You answer with a colour."},
                          {"role": "user", "content": f"Question {i}: what colour is the sky?"}], "max_tokens": 6}
            for i in range(12)]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    script = tmp_path / "script.yaml"
    # answers only when the system message arrived too: the whole logged conversation was sent
    script.write_text(yaml.safe_dump([{"match": "what colour is the sky", "recall": "(You answer with a colour)",
                                       "reply": "Blue. ({0})"}]))
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--script", str(script))
    spec = write_spec(_spec(url, {"pattern": "poisson", "rate_per_s": 40, "measure": {"requests": 12}},
                            workload={"tokenizer": "none", "source": {"path": str(log)}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    requests = pq.read_table(only_run_dir(tmp_path / "out") / "requests.parquet").to_pandas()
    assert (requests.response_text == "Blue. (You answer with a colour)").all()
    assert (requests.max_tokens == 6).all()


def test_a_trace_is_replayed_at_its_recorded_times_scaled(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    rng = np.random.default_rng(5)
    stamps = 1_000_000.0 + np.cumsum(rng.exponential(0.04, 60))  # ~25 arrivals/s in the log
    log = tmp_path / "trace.jsonl"
    order = rng.permutation(60)  # lines out of time order: replay sorts by timestamp
    log.write_text("\n".join(json.dumps({"prompt": f"request {i}", "max_tokens": 3, "timestamp": float(stamps[i])})
                             for i in order) + "\n")
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "trace", "time_scale": 2.0, "measure": {"requests": 60}},
                            workload={"tokenizer": "none", "source": {"path": str(log)}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(tmp_path / "out")
    requests = pq.read_table(run / "requests.parquet").to_pandas().sort_values("seq")
    intended = requests.intended_ns.to_numpy(dtype=float)
    expected = (np.sort(stamps) - stamps.min()) / 2.0 * 1e9
    assert np.allclose(intended - intended[0], expected, atol=1.0)  # the log's gaps, halved
    # each gap as sent vs as logged: the change in dispatch lag (sent - intended, less a new
    # connection's setup, as the passport defines it) from one request to the next
    connect = np.nan_to_num(requests.connect_ns.to_numpy(dtype=float))
    lag = requests.sent_ns.to_numpy(dtype=float) - intended - connect
    # the fidelity figures (p90, p99 at 50 req/s) are benchmarks/trace_replay.py's: the tail is the machine's
    # scheduling (p90 3.7 ms beside a CPU hog); a test checks the typical gap is kept (55 us there)
    errors = np.abs(np.diff(lag))
    assert np.median(errors) < 1e6
    assert [p.split()[1] for p in requests.prompt] == [str(i) for i in np.argsort(stamps, kind="stable")]
    passport = json.loads((run / "passport.json").read_text())
    assert passport["protocol"]["schedule"]["pattern"] == "trace x2"
