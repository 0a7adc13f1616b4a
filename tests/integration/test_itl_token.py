"""itl.token against the simulator sending several tokens per chunk (speculative decoding's shape:
the prefill's one token, then K a chunk, one ITL apart), with the simulator's own stamps and token
counts per chunk as ground truth; and the guidellm and AIPerf views, whose ITLs are per-request
averages (guidellm's weighing each request by its tokens - 1), against it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_CLIENT, SimFactory, only_run_dir, run_cli

pytestmark = pytest.mark.slow  # a whole run against the simulated engine


def test_itl_token_shares_each_chunk_gap_over_the_tokens_it_carries(
    simulator: SimFactory, write_spec: Callable[[dict[str, object]], Path], tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "30", "--itl-ms", "12", "--tokens-per-chunk", "4", "--seed", "5")
    spec = write_spec({
        "name": "itl-token", "endpoint": {"base_url": url},
        "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 16},
                     "output_tokens": {"dist": "uniform", "low": 2, "high": 30}, "seed": 3},
        "load": {"pattern": "closed", "concurrency": 4, "warmup": {"requests": 0}, "measure": {"requests": 40}},
        "validity": LENIENT_CLIENT,  # the figures are the test, not the verdict
    })
    out = tmp_path / "out"
    done = run_cli("run", str(spec), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    run = only_run_dir(out)
    passport = json.loads((run / "passport.json").read_text())
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    chunks = pq.read_table(run / "chunks.parquet").to_pandas()
    measured = requests[(requests.phase == "measure") & (requests.outcome == "ok")]
    assert len(measured) == 40 and measured.completion_tokens.nunique() > 5  # lengths vary: weights matter

    truth, measured_by_token = [], []
    for rid, group in chunks[chunks.token_bearing].sort_values(["request_id", "seq"]).groupby("request_id"):
        if rid not in set(measured.request_id):
            continue
        sims = [orjson.loads(d)["sim"] for d in group.data]
        carried = np.array([s["tokens"] for s in sims])
        assert carried[0] == 1 and (carried[1:-1] == 4).all()  # the shape asked of the simulator
        true_gaps = np.diff([s["sent_ns"] for s in sims]) / 1e9
        truth.extend(np.repeat(true_gaps / carried[1:], carried[1:]))
        measured_by_token.extend(np.repeat(np.diff(group.recv_ns.to_numpy()) / 1e9 / carried[1:], carried[1:]))
    token = passport["results"]["metrics"]["itl.token"]
    chunk = passport["results"]["metrics"]["itl.chunk"]
    # one sample per token after the first: sum(N - 1) over the requests
    assert token["n"] == int((measured.completion_tokens - 1).sum()) == len(truth)
    # the per-chunk token counts read from characters are the simulator's: the samples are the ones
    # its own counts give, to the float
    assert token["mean"] == pytest.approx(float(np.mean(measured_by_token)), rel=1e-9)
    assert token["p50"] == pytest.approx(float(np.median(measured_by_token)), rel=1e-9)
    # and within half a millisecond of the server's own gaps over its own counts (12 ms / 4 = 3 ms)
    assert abs(token["p50"] - float(np.median(truth))) < 0.5e-3 and abs(float(np.median(truth)) - 0.003) < 0.5e-3
    assert abs(chunk["p50"] - 0.012) < 1.5e-3  # a chunk's gap is four tokens'

    # guidellm's ITL: per request (last - first) / (N - 1), weighing each request by N - 1, so its
    # mean is the tokens' mean: itl.token's, since every first chunk carries one token
    guidellm = json.loads(run_cli("show", str(run), "--as", "guidellm", "--json").stdout)
    itl = guidellm["benchmarks"][0]["metrics"]["inter_token_latency_ms"]["successful"]
    assert itl["mean"] == pytest.approx(token["mean"] * 1e3, rel=1e-6)
    assert itl["count"] == token["n"]
    per_request = (measured.last_token_ns - measured.first_token_ns) / (measured.completion_tokens - 1) / 1e6
    # unweighted it would not be: a short answer ends on a short chunk (2 tokens: one 12 ms gap over one
    # token; 6 tokens: 1 + 4 + 1, two gaps over five tokens, 4.8 ms each), and counts as much as a long one
    weights = measured.completion_tokens - 1
    assert itl["mean"] == pytest.approx(float((per_request * weights).sum() / weights.sum()), rel=1e-6)
    # the weighted check above (to 1e-6) tells the two apart whenever they differ by more than that,
    # as they do whatever the machine's timing (a busy one brought them within 0.4 %)
    assert float(per_request.mean()) != pytest.approx(itl["mean"], rel=1e-4)
    # AIPerf's ITL: (latency - TTFT) / (OSL - 1), one value a request, each weighing the same
    aiperf = json.loads(run_cli("show", str(run), "--as", "aiperf", "--json").stdout)
    assert aiperf["inter_token_latency"]["avg"] == pytest.approx(float(per_request.mean()), rel=1e-6)
    assert run_cli("verify", str(run)).returncode == 0
