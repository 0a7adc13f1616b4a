"""Peak memory of the harness under hostile streams, against an ordinary run of the same length.

Four users in a closed loop for `--seconds` each, against the simulated engine: an ordinary run
(16-token answers), then runs where every answer is hostile: `flood` (body bytes without a line
end, forever), `huge_event` (one event of `--event-mib` MiB) and `huge_headers` (a header block
that never ends). The spec's limits are the defaults (`limits:` unset), so this measures what a
user gets. Prints each run's peak RSS (the `passport run` process's own ru_maxrss, from wait4),
its requests and outcomes, and the ratio to the ordinary run measured in the same session.

Before the limits, one flooding stream took the harness to 4 GB in 5 s and a 200 MB event to
5.5 GB.

    .venv/bin/python benchmarks/hostile_rss.py [--seconds 10] [--event-mib 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from harness import free_port


def _simulator(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), "--ttft-ms", "2",
                             "--itl-ms", "1", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    return proc, f"http://127.0.0.1:{port}/v1"


def _peak_rss(url: str, seconds: float, out: Path) -> tuple[float, str]:
    """(peak RSS in MiB of one `passport run`, a line on what it recorded)."""
    spec = {"name": "rss", "endpoint": {"base_url": url}, "canaries": "none",
            "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 16}},
            "load": {"pattern": "closed", "concurrency": 4, "measure": {"duration_s": seconds}},
            "validity": {"max_error_rate": 1.0, "max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000}}
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(path), "--out", str(out), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    requests = pq.read_table(next(out.iterdir()) / "requests.parquet").to_pandas()
    outcomes = ", ".join(f"{k} {v}" for k, v in requests.outcome.value_counts().items())
    errors = set(requests.error.dropna())
    said = f"; {sorted(errors)[0]}" if errors else ""
    return usage.ru_maxrss / 1024, f"{len(requests)} requests ({outcomes}){said}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--event-mib", type=int, default=200)
    args = parser.parse_args()
    cases = {"ordinary": [], "flood": ["--fault", "flood:1"],
             "huge_event": ["--fault", "huge_event:1", "--huge-event-mib", str(args.event_mib)],
             "huge_headers": ["--fault", "huge_headers:1"]}
    baseline = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, sim_args in cases.items():
            sim, url = _simulator(*sim_args)
            try:
                rss_mib, said = _peak_rss(url, args.seconds, Path(tmp) / name)
            finally:
                sim.terminate()
                sim.wait(5)
            baseline = baseline or rss_mib
            print(f"{name:>12}: peak RSS {rss_mib:6.0f} MiB ({rss_mib / baseline:4.2f}x ordinary); {said}")


if __name__ == "__main__":
    main()
