"""A run that fails after its timed phase loses nothing, and no traceback reaches the user.

Each test makes one stage after timing fail in a real run against the simulated engine
(`tests/inject.py` replaces the stage's function with one that raises), then checks what the user
sees (a short message naming the stage, where the records are, the recover command; exit 3; the
traceback in error.log, not on the terminal), what is kept (the raw tables and the draft), and
that `passport recover` finishes a passport that keeps the run's real verdict and verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_FLAGS, REPO, SimFactory, only_run_dir, run_cli
from tests.faults import fault

FLAGS = ("--concurrency", "2", "--num-prompts", "6", "--input-len", "8", "--output-len", "4", "--set", "canaries=none",
         "--set", "workload.tokenizer=none", "--quiet", *LENIENT_FLAGS)


def _run_failing(targets: tuple[str, ...], url: str, out: Path, *extra: str,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.inject", *targets, "--", "run", "--endpoint", url, *FLAGS,
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=180, cwd=REPO,
                          env={**os.environ, **(env or {})})


STAGES = [
    ("passport.run._assemble:sign_content", "signing the passport"),
    ("passport.report._plots:latency_cdfs", "writing the report and plots"),
    ("passport.report._doc:write_reports", "writing the report and plots"),
    ("passport.run._assemble:derive", "deriving the results and the verdict"),
]


@fault("a defect after the timed phase (signing, plots, the report, deriving the results)",
       "exit 3 and a short message naming the stage, where the records are and the `passport recover` command; the "
       "traceback goes to the run folder's error.log, never the terminal (unless --debug); the raw tables and the "
       "draft stay, and recover writes the passport with the run's real verdict, which verifies")
@pytest.mark.slow
@pytest.mark.parametrize(("target", "stage"), STAGES, ids=[s[0].split(":")[1] for s in STAGES])
def test_a_failure_after_timing_keeps_every_record_and_recover_keeps_the_verdict(
    simulator: SimFactory, tmp_path: Path, target: str, stage: str
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    failed = _run_failing((target,), url, tmp_path / "out")
    run = only_run_dir(tmp_path / "out")
    assert failed.returncode == 3, failed.stderr
    assert "Traceback" not in failed.stderr and "Traceback" not in failed.stdout
    lines = failed.stderr.strip().splitlines()
    assert lines[0] == f"ERROR: passport run failed while {stage}: RuntimeError: injected failure", failed.stderr
    assert f"  finish its passport with: passport recover {run}" in lines
    assert f"  the full traceback is in {run / 'error.log'} (--debug prints it here)" in lines
    log = (run / "error.log").read_text()
    assert "Traceback (most recent call last)" in log and "RuntimeError: injected failure" in log
    # every record kept: the raw tables with every request, the draft with how timing ended
    assert not (run / "passport.json").exists()
    assert pq.read_table(run / "requests.parquet").num_rows == 6
    assert pq.read_table(run / "chunks.parquet").num_rows > 0
    draft = json.loads((run / "passport.draft.json").read_text())
    assert draft["timing_end"]["complete"] is True and draft["timing_end"]["incomplete_reason"] is None
    recovered = run_cli("recover", str(run))
    assert recovered.returncode == 0 and "Result is: VALID" in recovered.stdout, recovered.stdout + recovered.stderr
    passport = json.loads((run / "passport.json").read_text())
    assert passport["verdict"] == "VALID" and passport["validity"]["complete"] is True
    assert passport["validity"]["recovered"].startswith("the run ended its timed phase at "
                                                        f"{draft['timing_end']['finished_utc']}")
    assert passport["protocol"]["finished_utc"] == draft["timing_end"]["finished_utc"]
    assert f"**Recovered:** {passport['validity']['recovered']}." in (run / "report.md").read_text()
    verified = run_cli("verify", str(run))
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.slow
def test_debug_prints_the_traceback_too(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    for args, env in ((("--debug",), None), ((), {"PASSPORT_DEBUG": "1"})):
        out = tmp_path / f"out{len(args)}"
        failed = _run_failing(("passport.run._assemble:sign_content",), url, out, *args, env=env)
        assert failed.returncode == 3
        assert "Traceback (most recent call last)" in failed.stderr
        assert "RuntimeError: injected failure" in failed.stderr
        assert "(--debug prints it here)" not in failed.stderr
        assert (only_run_dir(out) / "error.log").is_file()


@fault("a defect while adding a finished run to the ledger (--ledger)",
       "exit 3; the message says the passport was written and gives the `passport ledger add` command; no traceback")
@pytest.mark.slow
def test_a_ledger_failure_after_the_passport_says_it_is_written(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    ledger = tmp_path / "ledger"
    failed = _run_failing(("passport.ledger:add",), url, tmp_path / "out", "--ledger", str(ledger),
                          env={"TMPDIR": str(tmp_path)})
    run = only_run_dir(tmp_path / "out")
    assert failed.returncode == 3 and "Traceback" not in failed.stderr, failed.stderr
    assert "failed while adding the run to the ledger: RuntimeError: injected failure" in failed.stderr
    assert f"the passport was written: {run / 'passport.json'}" in failed.stderr
    assert f"add it to the ledger later with: passport ledger add {run}" in failed.stderr
    # the sealed run folder is not written to: the traceback went to the temporary folder
    assert not (run / "error.log").exists() and len(list((tmp_path / "passport-errors").glob("run-*.log"))) == 1
    assert run_cli("verify", str(run)).returncode == 0
    added = run_cli("ledger", "add", str(run), "--ledger", str(ledger))
    assert added.returncode == 0, added.stderr


@fault("the run is killed during its timed phase", "recover says INCOMPLETE with how many requests were kept, and "
       "says in validity.recovered how the passport was written")
@pytest.mark.slow
def test_a_failure_during_timing_is_recovered_as_incomplete(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    failed = _run_failing(("passport.run._execute:_timed_or_interrupted",), url, tmp_path / "out")
    run = only_run_dir(tmp_path / "out")
    assert failed.returncode == 3 and "while running the timed phase: RuntimeError" in failed.stderr, failed.stderr
    assert f"passport recover {run}" in failed.stderr and "Traceback" not in failed.stderr
    recovered = run_cli("recover", str(run))
    assert recovered.returncode == 1 and "Result is: INCOMPLETE" in recovered.stdout
    passport = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["recovered"].startswith("the run stopped during its timed phase")
    assert run_cli("verify", str(run)).returncode == 0
