"""A/A for accuracy under load: a server as often wrong loaded as alone, run again and again. The
right answer every time is "no drop" (rule accuracy_drop PASS).

The simulated engine answers every item of four bundled sets (arithmetic, choice, extraction,
recall; 25 items each) right, except that each reply is garbled with chance 0.1 whatever the load
(`--wrong-rate 0.1`, a new seed each run): a noisy server whose noise does not depend on load.
Each run scores every item alone, then sends a quarter of a 400-request closed loop of six users'
completions as items beside the load. Printed: each run's verdict, its accuracy_drop status and the
worst set's sign-test p; then the count of false WARNs (the issue's bar: at most 1 of 20). Then a
control: a server that garbles answers while four or more others stream must be flagged every
time, or the A/A says nothing.

    .venv/bin/python benchmarks/accuracy_aa.py [--runs 20] [--controls 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from canaries import load_accuracy_set  # noqa: E402
from harness.simulator import spawn  # noqa: E402
from tests.accuracy_script import answer_script  # noqa: E402

SETS = [{"set": name, "items": 25} for name in ("arithmetic", "choice", "extraction", "recall")]


def _run(url: str, work: Path, name: str) -> dict[str, object]:
    spec = {"name": name, "endpoint": {"base_url": url, "api": "chat"}, "canaries": "none",
            "workload": {"input_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"pattern": "closed", "concurrency": 6, "measure": {"requests": 400}},
            "accuracy": {"sets": SETS, "share": 0.25}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = work / name
    done = subprocess.run([sys.executable, "-m", "passport.cli", "run", str(path), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    folders = [p for p in out.iterdir() if (p / "passport.json").is_file()] if out.is_dir() else []
    if not folders:
        raise SystemExit(f"run {name} wrote no passport (exit {done.returncode}):\n{done.stderr[-2000:]}")
    passport = json.loads((folders[0] / "passport.json").read_text())
    rule = next(r for r in passport["validity"]["rules"] if r["name"] == "accuracy_drop")
    worst = min((s["paired"]["p_value"] for s in passport["results"]["accuracy"].values() if s["paired"]),
                default=None)
    return {"verdict": passport["verdict"], "status": rule["status"], "worst_p": worst}


def _series(script: Path, work: Path, label: str, fault: list[str], runs: int, seed: int) -> int:
    """`runs` runs, each against a fresh simulator with `fault`; returns how many were flagged."""
    flagged = 0
    for k in range(runs):
        server, url = spawn("--ttft-ms", "5", "--itl-ms", "1", "--script", str(script), *fault,
                            "--seed", str(seed + k))
        try:
            found = _run(url, work, f"{label.replace('/', '')}{k}")
        finally:
            server.terminate()
        flagged += found["status"] != "PASS"
        print(f"{label} run {k + 1:>2}: {found['verdict']:<8} accuracy_drop {found['status']:<5} "
              f"worst sign-test p {found['worst_p']:.3g}", flush=True)
    return flagged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--controls", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="accuracy-aa-"))
    script = work / "answers.yaml"
    script.write_text(yaml.safe_dump(answer_script(*(load_accuracy_set(s["set"], items=25) for s in SETS))))
    flagged = _series(script, work, "A/A", ["--wrong-rate", "0.1"], args.runs, 100)
    print(f"A/A: {flagged} of {args.runs} runs flagged a drop (bar: at most 1)")
    caught = _series(script, work, "control", ["--garble-above", "4"], args.controls, 200)
    print(f"control: {caught} of {args.controls} runs of a server wrong under load flagged (bar: all)")


if __name__ == "__main__":
    main()
