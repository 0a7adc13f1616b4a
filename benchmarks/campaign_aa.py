"""A/A and A/B calibration of campaign ranking: twin arms must tie, a 2x difference must not.

Two simulated engines are started per case, each in its own process, and attached as the two arms
of a campaign (`repetitions` rounds, rotating). `twins`: both script the same timings (TTFT 20 ms,
ITL 3 ms, jittered), so no difference between the arms is real and naming a best arm is a false
positive. `double`: the second arm's per-token time is twice the first's (6 ms), a difference a
campaign must always separate. Each case runs `--campaigns` campaigns and prints how often a best
arm was named, the largest relative difference between the twins' means, the smallest Holm-adjusted
p-value, and the time one campaign took. Acceptance (issue 23): best is null in at least 19 of 20
twin campaigns, and the doubled arm is separated (best is the faster arm) in 20 of 20.

    .venv/bin/python benchmarks/campaign_aa.py [--campaigns 20] [--repetitions 3] [--requests 40]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import free_port
from passport.model import parse_campaign
from passport.run import run_campaign

_LENIENT = {"max_loop_lag_p99_ms": 1000.0, "max_dispatch_lag_p99_ms": 1000.0, "max_client_cpu_share": 100.0,
            "max_lag_share": 1000.0, "lag_ceiling_ms": 60_000.0}


def _simulator(itl_ms: float, seed: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms", "20",
                             "--ttft-jitter-ms", "4", "--itl-ms", str(itl_ms), "--itl-jitter-ms", "1",
                             "--seed", str(seed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}/v1"


def _campaign(urls: list[str], repetitions: int, requests: int) -> dict[str, Any]:
    return {
        "name": "aa", "objective": "throughput.requests_per_s", "repetitions": repetitions,
        "run": {"workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 16},
                             "output_tokens": {"dist": "fixed", "value": 8}},
                "load": {"pattern": "closed", "concurrency": 4, "measure": {"requests": requests}},
                "canaries": "none", "validity": _LENIENT},
        "arms": [{"name": "a", "endpoint": {"base_url": urls[0]}}, {"name": "b", "endpoint": {"base_url": urls[1]}}],
    }


def _case(name: str, itl_b_ms: float, campaigns: int, repetitions: int, requests: int, out: Path) -> None:
    sims = [_simulator(3.0, 1), _simulator(itl_b_ms, 2)]
    time.sleep(1.5)
    try:
        raw = _campaign([url for _, url in sims], repetitions, requests)
        campaign, specs = parse_campaign(raw)
        bests: list[str | None] = []
        gaps: list[float] = []
        p_min = 1.0
        start = time.perf_counter()
        for _ in range(campaigns):
            record = run_campaign(campaign, specs, raw, out).record
            bests.append(record["best"])
            pair = record["comparisons"][0]
            gaps.append(pair["relative"])
            if pair["p_holm"] is not None:
                p_min = min(p_min, pair["p_holm"])
        per_s = (time.perf_counter() - start) / campaigns
    finally:
        for proc, _ in sims:
            proc.terminate()
            proc.wait(5)
    named = sum(b is not None for b in bests)
    print(f"{name:>7}: best named in {named} of {campaigns} ({', '.join(str(b) for b in bests if b)}); "
          f"largest gap between the arms' means {max(gaps):.1%}, smallest {min(gaps):.1%}; smallest Holm p "
          f"{p_min:.3g}; {per_s:.1f} s per campaign of 2 arms x {repetitions} rounds x {requests} requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaigns", type=int, default=20)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--cases", default="twins,double")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            _case(case, {"twins": 3.0, "double": 6.0}[case], args.campaigns, args.repetitions, args.requests,
                  Path(tmp) / case)


if __name__ == "__main__":
    main()
