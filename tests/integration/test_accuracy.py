"""Acceptance: measured TTFT and ITL agree with the simulator's ground truth at 32 streams.

The simulator stamps each chunk with its own `recv_ns` (request parsed) and `sent_ns` (chunk
written) on CLOCK_MONOTONIC, which the harness shares (`time.perf_counter_ns`), so each
measured figure has a server-side truth to be compared with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_CLIENT, SimFactory, only_run_dir, run_cli

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each


def test_ttft_and_itl_match_ground_truth_within_2ms_median_at_32_streams(
    simulator: SimFactory, write_spec: Callable[[dict[str, object]], Path], tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "60", "--ttft-jitter-ms", "25", "--itl-ms", "12", "--itl-jitter-ms", "5",
                    "--seed", "11")
    spec = write_spec({
        "name": "accuracy", "endpoint": {"base_url": url},
        "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 32},
                     "output_tokens": {"dist": "fixed", "value": 24}},
        "load": {"pattern": "closed", "concurrency": 32, "warmup": {"requests": 32}, "measure": {"requests": 192}},
        "validity": LENIENT_CLIENT,  # the figures below are the test, not the verdict
    })
    out = tmp_path / "out"
    result = run_cli("run", str(spec), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(out)
    passport = json.loads((run / "passport.json").read_text())
    t0 = passport["protocol"]["clock"]["t0_perf_counter_ns"]
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    chunks = pq.read_table(run / "chunks.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert len(measured) == 192 and (measured.outcome == "ok").all()

    ttft_err, itl_err, true_ttfts, signed_err = [], [], [], []
    tokens = chunks[chunks.token_bearing].sort_values(["request_id", "seq"])
    for rid, group in tokens.groupby("request_id"):
        row = measured[measured.request_id == rid]
        if row.empty:
            continue
        sims = [orjson.loads(d)["sim"] for d in group.data]
        true_ttft = sims[0]["sent_ns"] - sims[0]["recv_ns"]
        true_ttfts.append(true_ttft)
        signed_err.append((row.first_token_ns.iloc[0] - row.sent_ns.iloc[0]) - true_ttft)
        ttft_err.append(abs(signed_err[-1]))
        true_gaps = np.diff([s["sent_ns"] for s in sims])
        itl_err.extend(np.abs(np.diff(group.recv_ns.to_numpy()) - true_gaps))
    assert len(ttft_err) == 192 and len(itl_err) == 192 * 23
    assert np.median(ttft_err) < 2e6, np.median(ttft_err)
    assert np.median(itl_err) < 2e6, np.median(itl_err)
    # the passport's median TTFT sits where order statistics put it: each measured TTFT is its true
    # TTFT plus an error in [min, max], so the medians differ by an amount in that same range
    p50_ns = passport["results"]["metrics"]["ttft.any"]["p50"] * 1e9
    truth_ns = float(np.median(true_ttfts))
    assert truth_ns + min(signed_err) - 1e3 <= p50_ns <= truth_ns + max(signed_err) + 1e3
    assert passport["results"]["metrics"]["concurrency"]["max"] == 32
    # and each chunk arrived within a few ms of the moment the server stamped it
    lag = [t0 + recv - orjson.loads(d)["sim"]["sent_ns"] for recv, d in zip(tokens.recv_ns, tokens.data)]
    assert np.median(lag) < 2e6
