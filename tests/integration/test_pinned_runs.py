"""verify, compare and gate on run folders recorded once against the simulated engine and kept
in tests/data/runs/ (tests/data/record_runs.sh re-records them). Their expected outputs are
pinned beside them: a change to a metric definition, to the bootstrap or to the output format
shows up here as a diff, not silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import REPO, run_cli
from tests.integration.test_report_html import browser_probe

DATA = REPO / "tests" / "data"
RUNS = DATA / "runs"


def test_every_pinned_run_verifies() -> None:
    for run in ("base", "same", "slow"):
        result = run_cli("verify", str(RUNS / run))
        assert result.returncode == 0 and result.stdout.startswith("verified"), result.stdout


def test_compare_output_is_pinned() -> None:
    result = run_cli("compare", "runs/base", "runs/same", "runs/slow", cwd=DATA)
    assert result.returncode == 0
    assert result.stdout == (DATA / "expected-compare.txt").read_text()
    # the ground truth scripted into the simulator: 45 ms TTFT against 30 ms is slower; 30 against
    # 30 is not
    rows = {line.split()[0]: line for line in result.stdout.split("slow against base")[1].splitlines()[2:12]}
    assert rows["ttft.any.p50"].endswith("slower") and rows["e2e.p50"].endswith("slower")
    same = result.stdout.split("same against base")[1].split("slow against base")[0]
    assert "ttft.any.p50" in same and same.split("ttft.any.p50")[1].splitlines()[0].endswith(
        "no significant difference")


def test_gate_output_is_pinned() -> None:
    result = run_cli("gate", "runs/slow", "--require", "ttft.any.p50 < 40ms", "--require", "slo == met",
                     "--require", "error_rate < 0.5%", cwd=DATA)
    assert result.returncode == 1
    assert result.stdout == (DATA / "expected-gate-slow.txt").read_text()


def test_a_tampered_copy_of_a_pinned_run_is_caught(tmp_path: Path) -> None:
    run = shutil.copytree(RUNS / "base", tmp_path / "base")
    table = pq.read_table(run / "requests.parquet")
    first = table.column("first_token_ns").to_pylist()
    first[5] -= 10_000_000  # one request's TTFT 10 ms better
    index = table.schema.get_field_index("first_token_ns")
    pq.write_table(table.set_column(index, "first_token_ns", pa.array(first, pa.int64())), run / "requests.parquet")
    result = run_cli("verify", str(run))
    assert result.returncode == 1
    assert "requests.parquet: sha256 differs" in result.stdout and "results.metrics.ttft.any" in result.stdout


def test_comparison_report_renders_with_side_by_side_cdfs(tmp_path: Path) -> None:
    result = run_cli("compare", str(RUNS / "base"), str(RUNS / "slow"), "--report", str(tmp_path / "cmp"))
    assert result.returncode == 0 and f"report: {tmp_path / 'cmp' / 'report.html'}" in result.stdout
    page = tmp_path / "cmp" / "report.html"
    fields = browser_probe(page, tmp_path)
    assert fields == {"images": "1", "loaded": "1", "errors": "0", "verdict": "Result is: COMPARABLE"}
    assert "<strong>slower</strong>" in page.read_text()
    passport = json.loads((RUNS / "slow" / "passport.json").read_text())
    assert passport["results"]["slo"]["met"] is False  # the pinned gate's slo condition rests on this
