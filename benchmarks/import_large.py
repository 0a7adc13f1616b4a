"""Importing a large request log: time and peak memory of materializing it.

Writes `--lines` (default 1,000,000) OpenAI-format JSONL requests (a system and a user message,
a budget, a timestamp; ~230 bytes a line), then materializes them in a fresh process with the
`none` tokenizer, as `passport run` does for `load.pattern: trace`, and prints the file size,
the time, the peak RSS of that process, and the Arrow table's size; the same for a tenth of the
lines, measured in the same run, shows how memory grows with what is kept.

    .venv/bin/python benchmarks/import_large.py [--lines 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from workloads import ImportSpec, WorkloadSpec, load_tokenizer, materialize
start = time.perf_counter()
spec = WorkloadSpec(tokenizer="none", source=ImportSpec(path={path!r}))
rs = materialize(spec, None, load_tokenizer("none"), seed=0)
print(len(rs), time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      rs.table.nbytes)
"""


def _write(path: Path, lines: int) -> None:
    with path.open("w") as out:
        for i in range(lines):
            out.write(json.dumps({"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                               {"role": "user", "content": f"Question {i}: summarize the "
                                                                           "history of the harbour town."}],
                                  "max_tokens": 64 + i % 64, "timestamp": 1.7e9 + i * 0.01}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"{'lines':>10} {'file MiB':>9} {'seconds':>8} {'lines/s':>10} {'peak RSS MiB':>13} {'table MiB':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for lines in (args.lines // 10, args.lines):
            path = Path(tmp) / f"log-{lines}.jsonl"
            _write(path, lines)
            code = _CHILD.format(root=str(ROOT), path=str(path))
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            n, seconds, rss, table = out.split()
            print(f"{int(n):>10,} {path.stat().st_size / 2**20:>9.1f} {float(seconds):>8.1f} "
                  f"{int(n) / float(seconds):>10,.0f} {int(rss) / 2**20:>13.0f} {int(table) / 2**20:>10.1f}")


if __name__ == "__main__":
    main()
