"""A/A calibration of `passport compare`: runs of one simulator spec compared pairwise, on a quiet
machine and beside a CPU hog.

Every run draws its own scripted delays from the same distribution (TTFT 30 ms +- 5 ms jitter,
ITL 3 ms), so no difference between any two runs is real: each pair with a statistic called
(faster, slower, higher, lower) is a false positive. For each case (`quiet`: nothing else
running; `hog`: one busy process per core beside the simulator and the client, as a shared CI
machine has) prints how many of the independent pairs came out clean, which statistics were
called, how often each was inconclusive (not called, but its interval reached past the 10 %
minimum effect: the runs too short to say "the same"), the smallest p-value seen, the largest
relative differences between two runs (what a level shift between runs can reach, the floor
`--min-effect` guards against) and the time one comparison takes. Acceptance (issues 12 and 28):
at least 19 of 20 pairs clean in each case.

    .venv/bin/python benchmarks/compare_aa.py [--pairs 20] [--requests 150] [--cases quiet,hog]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import free_port
from harness.simulator import cpu_hog
from passport.audit import Trust, open_run
from passport.judge import compare_runs
from passport.model import parse_spec
from passport.run import execute


def _runs(n: int, requests: int, out: Path) -> list[Path]:
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms", "30",
                            "--ttft-jitter-ms", "5", "--itl-ms", "3", "--seed", "7"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    raw = {"name": "aa", "endpoint": {"base_url": f"http://127.0.0.1:{port}/v1"}, "canaries": "none",
           "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 8}},
           "load": {"pattern": "closed", "concurrency": 4, "measure": {"requests": requests}},
           "validity": {"max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000, "max_client_cpu_share": 100}}
    try:
        return [execute(parse_spec(raw), raw, [], out).folder for _ in range(n)]
    finally:
        sim.terminate()
        sim.wait(5)


def _case(name: str, pairs: int, requests: int) -> None:
    hog = cpu_hog() if name == "hog" else contextlib.nullcontext()
    with tempfile.TemporaryDirectory() as tmp, hog:
        runs = _runs(2 * pairs, requests, Path(tmp))
        called: Counter[str] = Counter()
        inconclusive: Counter[str] = Counter()
        clean, smallest_p, largest_rel, seconds = 0, 1.0, {}, []
        for i in range(pairs):
            start = time.perf_counter()
            comparison = compare_runs([open_run(runs[2 * i], Trust()), open_run(runs[2 * i + 1], Trust())])
            seconds.append(time.perf_counter() - start)
            rows = comparison.metrics[0]
            real = [m for m in rows if m.verdict in ("faster", "slower", "higher", "lower")]
            clean += not real
            called.update(f"{m.metric}.{m.stat}" for m in real)
            inconclusive.update(f"{m.metric}.{m.stat}" for m in rows if m.verdict.startswith("inconclusive"))
            for m in rows:
                if m.p is not None:
                    smallest_p = min(smallest_p, m.p)
                if m.base and m.other is not None:
                    key = f"{m.metric}.{m.stat}"
                    largest_rel[key] = max(largest_rel.get(key, 0.0), abs(m.other - m.base) / abs(m.base))
    print(f"[{name}] A/A: {clean} of {pairs} pairs called no difference on any statistic "
          f"({requests} requests per run)")
    print(f"[{name}] statistics called (false positives): {dict(called) or 'none'}")
    print(f"[{name}] inconclusive (pairs of {pairs}): {dict(sorted(inconclusive.items())) or 'none'}")
    print(f"[{name}] smallest p-value seen: {smallest_p:.4g}")
    print(f"[{name}] largest relative difference between two runs: "
          + ", ".join(f"{k} {v:.1%}" for k, v in sorted(largest_rel.items())))
    print(f"[{name}] compare of two {requests}-request runs: median {sorted(seconds)[len(seconds) // 2]:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--cases", default="quiet,hog", help="comma-separated: quiet, hog")
    args = parser.parse_args()
    for name in args.cases.split(","):
        _case(name.strip(), args.pairs, args.requests)


if __name__ == "__main__":
    main()
