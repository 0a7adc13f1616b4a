"""How many concurrent streams one passport worker holds within its own rules, and what a stream
costs in memory: closed loops of S users against the simulated engine, each user's answer 10
tokens one `--itl-ms` apart (so S users make about S / (10 x ITL) requests and S / ITL chunks a
second), S requests of warm-up (every user's first: the burst of S connections at once) and S
measured.

Every run is `passport run` as a user runs it (a subprocess); its peak RSS comes from the kernel
(wait4), so memory per stream is the slope of peak RSS over S between the smallest and each
larger level. Prints per level: the verdict, client_not_bound and dispatch_lag with their
figures, the CPU share (max in the measurement window and over the whole run), TTFT p50 against
the scripted TTFT, and peak RSS.

    .venv/bin/python benchmarks/streams.py [--streams 1000,4000,10000] [--workers 1] [--itl-ms 1000] [--jitter-ms 0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness import free_port

ROOT = Path(__file__).resolve().parent.parent


def streams_spec(url: str, streams: int, workers: int) -> dict[str, Any]:
    """The closed loop of `streams` users (8-token prompts, 10-token answers), a request of
    warm-up and one measured for each user, sent by `workers` processes."""
    return {"name": f"streams-{streams}", "endpoint": {"base_url": url}, "canaries": "none",
            "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 10}},
            "load": {"pattern": "closed", "concurrency": streams, "workers": workers,
                     "warmup": {"requests": streams}, "measure": {"requests": streams}}}


def passport_run(spec: Path, out: Path, cwd: Path = ROOT,
                 around: Callable[[list[str]], list[str]] = list) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak RSS MiB of the run's process tree's largest process) of
    `passport run SPEC --out OUT --quiet`, its command line passed through `around` (e.g. to run
    it on a namespaced host)."""
    start = time.perf_counter()
    argv = around([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(out), "--quiet"])
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, time.perf_counter() - start, usage.ru_maxrss / 1024


def passport_of(out: Path) -> dict[str, Any] | None:
    """The passport a run wrote under `out`, or None where it wrote none."""
    folders = [p for p in out.iterdir() if (p / "passport.json").is_file()] if out.is_dir() else []
    return json.loads((folders[0] / "passport.json").read_text()) if folders else None


def _rule(passport: dict[str, Any], name: str) -> dict[str, Any]:
    return next((r for r in passport["validity"]["rules"] if r["name"] == name), {"status": "-", "message": ""})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1000,4000,10000")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--itl-ms", type=float, default=1000.0)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0,
                        help="the simulator's TTFT and ITL jitter: users whose answers take the same time stay in "
                             "step (a burst of completions each round); jitter spreads them, as an engine does")
    args = parser.parse_args()
    levels = [int(s) for s in args.streams.split(",")]
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms",
                            str(args.ttft_ms), "--itl-ms", str(args.itl_ms), "--ttft-jitter-ms", str(args.jitter_ms),
                            "--itl-jitter-ms", str(args.jitter_ms)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    url = f"http://127.0.0.1:{port}/v1"
    rss: dict[int, float] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for streams in levels:
                spec = Path(tmp) / f"s{streams}.yaml"
                spec.write_text(yaml.safe_dump(streams_spec(url, streams, args.workers)))
                out = Path(tmp) / f"s{streams}"
                code, wall_s, rss[streams] = passport_run(spec, out)
                passport = passport_of(out)
                if passport is None:
                    print(f"{streams:>6} streams: no passport (exit {code})")
                    continue
                client = passport["results"]["client"]
                ttft = passport["results"]["metrics"]["ttft.any"]["p50"] or float("nan")
                counts = passport["validity"]["counts"]
                bound, lag = _rule(passport, "client_not_bound"), _rule(passport, "dispatch_lag")
                slope = "" if streams == levels[0] else \
                    f", {(rss[streams] - rss[levels[0]]) * 1024 / (streams - levels[0]):.1f} KiB per stream"
                print(f"{streams:>6} streams, {args.workers} worker(s): {passport['verdict']} (exit {code}) in "
                      f"{wall_s:.0f} s; {counts.get('succeeded')} of {counts.get('measured')} succeeded; "
                      f"TTFT p50 {ttft * 1e3:.1f} ms (scripted {args.ttft_ms:g}); CPU share max "
                      f"{client['cpu_share_max'] or 0:.2f} over the run; peak RSS {rss[streams]:.0f} MiB{slope}")
                print(f"       client_not_bound {bound['status']}: {bound['message']}")
                print(f"       dispatch_lag {lag['status']}: {lag['message']}")
    finally:
        sim.terminate()
        sim.wait(5)


if __name__ == "__main__":
    main()
