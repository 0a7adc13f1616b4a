"""A/A for the release gate and the history's change detector: an unchanged build, run again and
again, gated against the ledger's baseline. The right answer every time is "no regression".

One simulated engine (the README tutorial's build v1: TTFT 20 ms, ITL 2 ms, the canary answered
right) serves every run; the first run is the baseline, added to a fresh ledger; each of the next
`--runs` runs (the same spec, the same build) is added and gated with the tutorial's conditions
(`ttft.any.p95 regression < 10%`, `throughput.output_tokens_per_s.mean regression < 10%`,
`canaries no_new_failures`, `--inconclusive fail`). Printed: how many gates passed (the issue's
bar: at least 19 of 20), each one's regressions, and how many runs the history flagged as moved
(its false alarms on an unchanged build). Then one control: a build made slower (TTFT 30 ms) must
fail, or the A/A says nothing.

    .venv/bin/python benchmarks/gate_aa.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.simulator import spawn  # noqa: E402

SPEC = ROOT / "specs" / "ledger-tutorial" / "spec.yaml"
CONDITIONS = ["--require", "ttft.any.p95 regression < 10%", "--require",
              "throughput.output_tokens_per_s.mean regression < 10%", "--require", "canaries no_new_failures"]


def _passport(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "passport.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False)


def _run(url: str, out: Path, ledger: Path) -> Path:
    done = _passport("run", str(SPEC), "--endpoint", url, "--out", str(out), "--quiet", "--ledger", str(ledger))
    if done.returncode != 0:
        raise SystemExit(f"a run failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return next(p for p in out.iterdir() if (p / "passport.json").is_file())


def _gate(run: Path, ledger: Path) -> tuple[int, list[str]]:
    done = _passport("gate", str(run), "--baseline", f"ledger:{ledger}", "--where", "engine.build=v1", *CONDITIONS)
    lines = [line for line in done.stdout.splitlines() if "regression <" in line]
    return done.returncode, [re.sub(r"\s+", " ", line)[:150] for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    script = ROOT / "specs" / "ledger-tutorial" / "right.yaml"
    work = Path(tempfile.mkdtemp(prefix="gate-aa-"))
    ledger = work / "ledger"
    server, url = spawn("--ttft-ms", "20", "--itl-ms", "2", "--build", "v1", "--script", str(script))
    try:
        _run(url, work / "base", ledger)
        passed = 0
        for k in range(args.runs):
            code, lines = _gate(_run(url, work / f"aa{k}", ledger), ledger)
            passed += code == 0
            print(f"A/A {k + 1:2}: exit {code}  " + " | ".join(line.split(" baseline ")[1][:90] for line in lines))
        history = _passport("history", "--ledger", str(ledger), "--metric", "ttft.any.p95", "--json", "--html",
                            str(work / "history.html"))
        flagged = sum(p["flagged"] for p in json.loads(history.stdout))
    finally:
        server.terminate()
        server.wait(5)
    slow, slow_url = spawn("--ttft-ms", "30", "--itl-ms", "2", "--build", "v1", "--script", str(script))
    try:
        control, _ = _gate(_run(slow_url, work / "slow", ledger), ledger)
    finally:
        slow.terminate()
        slow.wait(5)
    print(f"unchanged build: {passed} of {args.runs} gates passed (bar: {args.runs - args.runs // 20}); the history "
          f"flagged {flagged} of {args.runs + 1} runs as moved; control (TTFT 20 -> 30 ms): gate exit {control} "
          f"({'failed, as it must' if control == 1 else 'DID NOT FAIL'}); ledger: {ledger}")


if __name__ == "__main__":
    main()
