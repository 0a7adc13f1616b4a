"""How faithfully `passport run` replays a trace: inter-arrival times as sent vs as logged.

Writes a Poisson trace at `--rate` requests/s (default 50) for `--seconds` (default 20), starts
the simulated engine (TTFT 5 ms, ITL 2 ms, 8 output tokens) pinned to CPU 1, replays the
trace from a client pinned to CPU 0 with
`load.pattern: trace`, and prints, over consecutive requests, the error of each sent gap
against the logged gap (the change in dispatch lag: sent - intended, less a new connection's
setup) as p50/p99/max, next to the same figure for a Poisson schedule of the same rate built by
passport itself, and for the machine's floor: an event loop on the same CPU that only wakes at
the trace's times (uvloop, the runner's wait-then-spin) and sends nothing. Both baselines are
measured in the same run; the floor shows how much of the error is the machine's (a VM's
scheduler and timer), not the harness's.

    .venv/bin/python benchmarks/trace_replay.py [--rate 50] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gap_errors_ms(run: Path) -> np.ndarray:
    r = pq.read_table(run / "requests.parquet").to_pandas().sort_values("seq")
    lag = (r.sent_ns.to_numpy(float) - r.intended_ns.to_numpy(float) - np.nan_to_num(r.connect_ns.to_numpy(float)))
    return np.abs(np.diff(lag)) / 1e6


def _timer_floor(offsets_s: list[float]) -> list[float]:
    """Lateness (ns) of waking at each offset, the runner's way, with nothing else to do."""
    import asyncio

    import uvloop

    async def main() -> list[float]:
        start = time.perf_counter_ns() + 20_000_000
        late = []
        for offset in offsets_s:
            deadline = start + int(offset * 1e9)
            wait = deadline - time.perf_counter_ns() - 1_000_000
            if wait > 0:
                await asyncio.sleep(wait / 1e9)
            while time.perf_counter_ns() < deadline:
                await asyncio.sleep(0)
            late.append(float(time.perf_counter_ns() - deadline))
        return late

    return uvloop.run(main())


def _run(spec: dict[str, object], folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = folder / name
    subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "passport.cli", "run", str(path), "--out", str(out),
                    "--quiet"], check=False, cwd=ROOT, capture_output=True)
    (run,) = list(out.iterdir())
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--telemetry", default="auto", help="telemetry.metrics of both runs (auto or off)")
    parser.add_argument("--floor-of", type=Path, help=argparse.SUPPRESS)  # internal: the timer floor
    args = parser.parse_args()
    if args.floor_of is not None:
        print(json.dumps(_timer_floor(json.loads(args.floor_of.read_text()))))
        return
    n = int(args.rate * args.seconds)
    port = _free_port()
    sim = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-m", "harness.simulator", "--port", str(port),
                            "--ttft-ms", "5", "--itl-ms", "2"], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            stamps = 1.7e9 + np.cumsum(np.random.default_rng(1).exponential(1 / args.rate, n))
            trace = folder / "trace.jsonl"
            trace.write_text("\n".join(json.dumps({"prompt": f"request {i}", "max_tokens": 8, "timestamp": t})
                                       for i, t in enumerate(stamps.tolist())) + "\n")
            common = {"endpoint": {"base_url": f"http://127.0.0.1:{port}/v1"}, "canaries": "none",
                      "telemetry": {"metrics": args.telemetry},
                      "validity": {"max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000}}
            imported = {"tokenizer": "none", "source": {"path": str(trace)}}
            replay = _run({**common, "name": "replay", "workload": imported,
                           "load": {"pattern": "trace", "measure": {"requests": n}}}, folder, "replay")
            poisson = _run({**common, "name": "poisson", "workload": {"tokenizer": "none",
                                                                      "output_tokens": {"dist": "fixed", "value": 8}},
                            "load": {"pattern": "poisson", "rate_per_s": args.rate, "measure": {"requests": n}}},
                           folder, "poisson")
            offsets = folder / "offsets.json"
            offsets.write_text(json.dumps((stamps - stamps[0]).tolist()))
            floor = subprocess.run(["taskset", "-c", "0", sys.executable, __file__, "--floor-of", str(offsets)],
                                   check=True, cwd=ROOT, capture_output=True, text=True)
            floor_ms = np.abs(np.diff(np.array(json.loads(floor.stdout)))) / 1e6
            print(f"{n} requests at {args.rate:g}/s; |sent gap - intended gap| in ms")
            print(f"{'schedule':<10} {'p50':>8} {'p99':>8} {'max':>8}")
            rows = [("trace", _gap_errors_ms(replay)), ("poisson", _gap_errors_ms(poisson)),
                    ("timer only", floor_ms)]
            for name, err in rows:
                print(f"{name:<10} {np.percentile(err, 50):>8.3f} {np.percentile(err, 99):>8.3f} {err.max():>8.3f}")
    finally:
        sim.terminate()
        sim.wait(5)


if __name__ == "__main__":
    main()
