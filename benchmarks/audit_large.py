"""How long the auditor's tools take on large runs: the workers' merge, verify and compare of
100,000-request (or 1,000,000-request) folders.

The folders are real runs, not synthesized: the simulated engine answers at a high rate (TTFT and
ITL 0.5 ms, 4 output tokens) to a closed loop of 32 users until the requests are measured (about
a minute per 100,000 on 2 cores). Prints, per size:
- the merge of the workers' shards into the run folder (with `--workers` above 1), timed inside
  the run;
- `verify_run` (the auditor's library: results, counts, canaries, rules, verdict, hashes), timed
  in a fresh process after its imports, so no cache the run warmed is counted;
- the whole `passport verify` (plus re-rendered reports and replayed identity) and `passport
  compare` of two such runs (not with `--single`), each a fresh process, imports included;
beside the same for 150-request runs in the same session.

    .venv/bin/python benchmarks/audit_large.py [--requests 100000] [--workers 2] [--single]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import passport.run._workers as workers_backend
from harness import free_port
from passport.model import parse_spec
from passport.run import execute

_VERIFY_RUN = ("import sys, time\nfrom pathlib import Path\nfrom passport.audit import verify_run\n"
               "start = time.perf_counter()\nproblems = verify_run(Path(sys.argv[1])).problems\n"
               "print(time.perf_counter() - start, len(problems))\n")


def _run(url: str, requests: int, workers: int, out: Path) -> tuple[Path, float | None]:
    raw = {"name": f"large-{requests}", "endpoint": {"base_url": url}, "canaries": "none",
           "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 4}},
           "load": {"pattern": "closed", "concurrency": 32, "measure": {"requests": requests}, "workers": workers},
           "validity": {"max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000}}
    merged: list[float] = []
    merge = workers_backend.merge_shards

    def timed_merge(*args: Any) -> None:
        start = time.perf_counter()
        merge(*args)
        merged.append(time.perf_counter() - start)

    workers_backend.merge_shards = timed_merge  # type: ignore[assignment]
    try:
        folder = execute(parse_spec(raw), raw, [], out).folder
    finally:
        workers_backend.merge_shards = merge  # type: ignore[assignment]
    return folder, (merged[0] if merged else None)


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "passport.cli", *argv], check=False, capture_output=True)
    return time.perf_counter() - start


def _verify_run(folder: Path) -> str:
    done = subprocess.run([sys.executable, "-c", _VERIFY_RUN, str(folder)], capture_output=True, text=True,
                          check=False)
    if done.returncode:
        return f"failed: {done.stderr.strip().splitlines()[-1:]}"
    seconds, problems = done.stdout.split()
    return f"{float(seconds):.2f} s ({'verified' if problems == '0' else problems + ' problems'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=1, help="load.workers (the merge is timed above 1)")
    parser.add_argument("--single", action="store_true", help="one run per size, no compare")
    args = parser.parse_args()
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms", "0.5",
                            "--itl-ms", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[int, list[tuple[Path, float | None]]] = {}
        try:
            for n in (150, args.requests):
                start = time.perf_counter()
                names = ["a"] if args.single else ["a", "b"]
                runs[n] = [_run(url, n, args.workers, Path(tmp) / name) for name in names]
                print(f"recorded {len(runs[n])} {n:,}-request run(s) with {args.workers} worker(s) in "
                      f"{time.perf_counter() - start:.0f} s")
        finally:
            sim.terminate()
            sim.wait(5)
        for n, folders in runs.items():
            (a, merge_s), *rest = folders
            merge = f"merge {merge_s:.2f} s, " if merge_s is not None else ""
            compare = f", passport compare {_timed(['compare', str(a), str(rest[0][0])]):.2f} s" if rest else ""
            print(f"{n:>9,} requests: {merge}verify_run {_verify_run(a)}, passport verify "
                  f"{_timed(['verify', str(a)]):.2f} s{compare}")


if __name__ == "__main__":
    main()
