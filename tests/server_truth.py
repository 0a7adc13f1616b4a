"""The simulated engine's own record of a run: what the server did, read from the `sim` stamps it
puts in every event it streams (`recv_ns`: the request parsed; `sent_ns`: the event written, both
on the CLOCK_MONOTONIC the client shares), which passport keeps byte for byte in chunks.parquet.

A test of a judgment over timed runs (compare, a gate, a campaign) takes its truth from here
where the machine's load can move the server itself: on a busy machine two runs of one spec
really are served at different speeds, and a call that the server's own record shows too is
right, not a false positive. Statistics as compare computes them: quantiles of per-request
values, `itl.chunk` pooled over every gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq

from passport.judge import MIN_EFFECT

__all__ = ["server_samples", "server_statistic", "server_moved", "server_shows", "THROUGHPUT_FROM", "CALLED"]

# compare's words for a called difference
CALLED = ("faster", "slower", "higher", "lower")

# A throughput's truth is the server's mean end-to-end time: a closed loop's rate is its
# concurrency over it, so the rate moves by the inverse of the mean's change
THROUGHPUT_FROM = "e2e"


def server_samples(run: Path) -> dict[str, np.ndarray]:
    """Per successful measured request, in seconds: the server's time to first token (ttft.any,
    and ttft.content alike: the simulator's first token is content), end to end to its last token
    (e2e), time per output token after the first (tpot); `itl.chunk`: every gap between two
    token-bearing events of one request, pooled."""
    requests = pq.read_table(run / "requests.parquet", columns=["request_id", "phase", "outcome"]).to_pandas()
    kept = set(requests.request_id[(requests.phase == "measure") & (requests.outcome == "ok")])
    chunks = pq.read_table(run / "chunks.parquet", columns=["request_id", "seq", "token_bearing", "data"]).to_pandas()
    chunks = chunks[chunks.token_bearing & chunks.request_id.isin(kept)].sort_values(["request_id", "seq"])
    ttft, e2e, tpot, gaps = [], [], [], []
    for _, group in chunks.groupby("request_id"):
        sims = [orjson.loads(d)["sim"] for d in group.data]
        sent = np.array([s["sent_ns"] for s in sims], dtype=np.float64)
        recv = float(sims[0]["recv_ns"])
        tokens = sum(int(s.get("tokens") or 1) for s in sims)
        ttft.append((sent[0] - recv) / 1e9)
        e2e.append((sent[-1] - recv) / 1e9)
        if tokens > 1:
            tpot.append((sent[-1] - sent[0]) / 1e9 / (tokens - 1))
        gaps.extend(np.diff(sent) / 1e9)
    return {"ttft.any": np.array(ttft), "ttft.content": np.array(ttft), "e2e": np.array(e2e),
            "tpot": np.array(tpot), "itl.chunk": np.array(gaps)}


def server_statistic(samples: dict[str, np.ndarray], metric: str, stat: str) -> float:
    """One statistic of the server's record as compare names it: `p50`, `p95`, `p99_9` ... of a latency, or
    `mean` of a throughput (the inverse of the mean end-to-end time; see THROUGHPUT_FROM)."""
    if metric.startswith(("throughput", "goodput")):
        return 1.0 / float(np.mean(samples[THROUGHPUT_FROM]))
    return float(np.quantile(samples[metric], float(stat.removeprefix("p").replace("_", ".")) / 100))


def server_moved(base: dict[str, np.ndarray], other: dict[str, np.ndarray], metric: str, stat: str,
                 verdict: str) -> float:
    """How far the server's own statistic moved from `base` to `other`, relative to base, signed so
    that a move the way compare's `verdict` says is positive."""
    before, after = server_statistic(base, metric, stat), server_statistic(other, metric, stat)
    change = (after - before) / before
    return change if verdict in ("slower", "higher") else -change


def server_shows(base: dict[str, np.ndarray], other: dict[str, np.ndarray], metric: str, stat: str,
                 verdict: str) -> bool:
    """Whether the server's own record makes compare's call too: the statistic moved the way the
    verdict says by at least half the minimum effect compare calls."""
    return server_moved(base, other, metric, stat, verdict) >= MIN_EFFECT / 2
