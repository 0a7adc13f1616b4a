"""How long the auditor's tools take on large runs: verify and compare of 100,000-request folders.

The folders are real runs, not synthesized: the simulated engine answers at a high rate (TTFT and
ITL 0.5 ms, 4 output tokens) to a closed loop of 32 users until 100,000 requests are measured
(about a minute each on 2 cores). Prints the time of `verify_run` (the auditor's library: results,
counts, canaries, rules, verdict, hashes), of the whole `passport verify` (plus re-rendered reports
and replayed identity), and of `passport compare` of two such runs, beside the same for two
150-request runs in the same session.

    .venv/bin/python benchmarks/audit_large.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import free_port
from passport.audit import verify_run
from passport.model import parse_spec
from passport.run import execute


def _run(url: str, requests: int, out: Path) -> Path:
    raw = {"name": f"large-{requests}", "endpoint": {"base_url": url}, "canaries": "none",
           "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4}},
           "load": {"pattern": "closed", "concurrency": 32, "measure": {"requests": requests}},
           "validity": {"max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000}}
    return execute(parse_spec(raw), raw, [], out).folder


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "passport.cli", *argv], check=False, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms", "0.5",
                            "--itl-ms", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sizes = (150, args.requests)
            runs = {}
            for n in sizes:
                start = time.perf_counter()
                runs[n] = (_run(url, n, Path(tmp) / "a"), _run(url, n, Path(tmp) / "b"))
                print(f"recorded two {n:,}-request runs in {time.perf_counter() - start:.0f} s")
        finally:
            sim.terminate()
            sim.wait(5)
        for n in sizes:
            a, b = runs[n]
            start = time.perf_counter()
            problems = verify_run(a).problems
            library_s = time.perf_counter() - start
            print(f"{n:>7,} requests: verify_run {library_s:.2f} s ({'verified' if not problems else problems[:2]}), "
                  f"passport verify {_timed(['verify', str(a)]):.2f} s, "
                  f"passport compare {_timed(['compare', str(a), str(b)]):.2f} s")


if __name__ == "__main__":
    main()
