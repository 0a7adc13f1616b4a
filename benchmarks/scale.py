"""What one and two worker processes hold, in one run: chunks/s at <= 1 ms added p99 lag, and
dispatch lag p99 of a 500 req/s open loop, printed with the two-worker figure as a ratio to one.

The server is the simulated engine (pinned to the last CPU), which stamps every chunk with the
perf_counter time it was written (`sim.sent_ns`, the machine's one monotonic clock); a chunk's
added lag is the client's receive time (chunks.parquet `recv_ns` + the run's t0) minus that
stamp. For `--workers 1` and `2`, a ladder of closed loops of S streams (one chunk per 10 ms per
stream, 100 tokens each) runs for `--seconds`; the figure is the highest ladder level whose
measured chunks' added lag p99 stays <= 1 ms, as achieved chunks/s. Then an open loop at 500
req/s (4 output tokens) gives each setting's dispatch lag p99. Every run is `passport run` as a
user runs it. On a 2-core machine the server, the coordinator and the workers share two cores:
the ratios say what a second process buys here, not on a large host.

    .venv/bin/python benchmarks/scale.py [--streams 32,64,128,256] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.simulator import spawn  # noqa: E402

_SENT = re.compile(rb'"sent_ns":\s*(\d+)')


def _run(url: str, load: dict[str, object], output_tokens: int, workers: int, folder: Path) -> Path:
    spec = {"name": f"scale-w{workers}", "endpoint": {"base_url": url, "api": "completions"}, "canaries": "none",
            "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": output_tokens}},
            "load": {**load, "workers": workers}, "telemetry": {"metrics": "off", "nvml": "off"},
            "validity": {"max_client_cpu_share": 100, "max_loop_lag_p99_ms": 10000,
                         "max_dispatch_lag_p99_ms": 10000, "min_achieved_rate_fraction": 0.01}}
    path = folder / f"spec-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(spec))
    out = folder / f"out-{time.monotonic_ns()}"
    subprocess.run([sys.executable, "-m", "passport.cli", "run", str(path), "--out", str(out), "--quiet"],
                   check=False, capture_output=True, cwd=ROOT)
    return next(out.iterdir())


def _added_lag_p99_ms(run: Path) -> tuple[float, float]:
    """(p99 added lag of measured token chunks in ms, their chunks/s over the window)."""
    t0 = json.loads((run / "passport.json").read_text())["protocol"]["clock"]["t0_perf_counter_ns"]
    requests = pq.read_table(run / "requests.parquet", columns=["request_id", "phase"]).to_pandas()
    measured = set(requests[requests.phase == "measure"].request_id)
    chunks = pq.read_table(run / "chunks.parquet", columns=["request_id", "recv_ns", "token_bearing", "data"])
    frame = chunks.to_pandas()
    frame = frame[frame.token_bearing & frame.request_id.isin(measured)]
    sent = np.array([int(_SENT.search(d).group(1)) for d in frame.data], dtype=np.float64)  # type: ignore[union-attr]
    lag_ms = (frame.recv_ns.to_numpy(dtype=np.float64) + t0 - sent) / 1e6
    span_s = (frame.recv_ns.max() - frame.recv_ns.min()) / 1e9
    return float(np.percentile(lag_ms, 99)), len(frame) / span_s if span_s > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="32,64,128,256")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--lag-ms", type=float, default=1.0, help="the added-lag p99 a level must stay within")
    args = parser.parse_args()
    server, url = spawn("--ttft-ms", "10", "--itl-ms", "10", cpu=max(os.sched_getaffinity(0)))
    try:
        held: dict[int, float] = {1: 0.0, 2: 0.0}
        dispatch: dict[int, float] = {}
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{'streams':>7} {'chunks/s':>10} {'lag p99 ms, 1 worker':>21} {'2 workers':>10} {'ratio':>6}")
            for streams in (int(s) for s in args.streams.split(",")):  # interleaved: drifts land on both
                load = {"pattern": "closed", "concurrency": streams, "warmup": {"requests": streams},
                        "measure": {"duration_s": args.seconds}}
                figures = {w: _added_lag_p99_ms(_run(url, load, 100, w, Path(tmp))) for w in (1, 2)}
                for w, (p99, rate) in figures.items():
                    if p99 <= args.lag_ms:
                        held[w] = max(held[w], rate)
                print(f"{streams:>7} {figures[1][1]:>10,.0f} {figures[1][0]:>21.3f} {figures[2][0]:>10.3f} "
                      f"{figures[2][0] / figures[1][0]:>6.2f}")
            for w in (1, 2):
                load = {"pattern": "poisson", "rate_per_s": 500, "concurrency": 256, "measure": {"requests": 1500}}
                metrics = json.loads((_run(url, load, 4, w, Path(tmp)) / "passport.json").read_text())
                dispatch[w] = metrics["results"]["metrics"]["dispatch_lag"]["p99"] * 1000.0
        print()
        print(f"chunks/s held at <= {args.lag_ms:g} ms added p99 lag: 1 worker {held[1]:,.0f}, 2 workers "
              f"{held[2]:,.0f}" + (f" (ratio {held[2] / held[1]:.2f})" if held[1] else
                                   " (no level of one worker stayed within it here)"))
        print(f"dispatch lag p99 at 500 req/s: 1 worker {dispatch[1]:.3f} ms, 2 workers {dispatch[2]:.3f} ms "
              f"(ratio {dispatch[2] / dispatch[1]:.2f})")
    finally:
        server.terminate()
        server.wait(5)


if __name__ == "__main__":
    main()
