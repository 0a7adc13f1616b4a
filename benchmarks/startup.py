"""Wall time of commands around a run, from process start to exit: what a user waits for.

Each command is run `--repeats` times; prints the median and the minimum in seconds. The run
folder for `show`, `gate`, `verify` and `compare` is the pinned schema-1.3 run (150 requests).

    .venv/bin/python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "runs" / "v1.3"
COMMANDS = [
    ["--help"],
    ["run", "--help"],
    ["capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "32768"],
    ["workload", "--presets"],
    ["show", str(RUN)],
    ["gate", str(RUN), "--require", "verdict == VALID"],
    ["verify", str(RUN)],
    ["compare", str(ROOT / "tests" / "data" / "runs" / "base"), str(ROOT / "tests" / "data" / "runs" / "same")],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'command':<40} {'median s':>9} {'min s':>7}")
    for argv in COMMANDS:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "passport.cli", *argv], cwd=ROOT, capture_output=True, check=False)
            times.append(time.perf_counter() - start)
        label = " ".join(a if "/" not in a else Path(a).name for a in argv)[:40]
        print(f"{label:<40} {statistics.median(times):>9.2f} {min(times):>7.2f}")


if __name__ == "__main__":
    main()
