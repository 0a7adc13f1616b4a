"""verify, compare and gate on run folders recorded once against the simulated engine and kept in
tests/data/runs/ (tests/data/record_runs.sh): one per passport schema version, each recorded by a
version of passport that wrote it, which verify must keep reproducing; and what compare and gate
must say about them, derived by hand from the simulator's script (tests/data/expected-verdicts.yaml),
never recorded from passport's own output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.integration.test_report_html import browser_probe

DATA = REPO / "tests" / "data"
RUNS = DATA / "runs"
EXPECTED = yaml.safe_load((DATA / "expected-verdicts.yaml").read_text())
BY_VERSION = {"1.0": "v1.0", "1.1": "base", "1.2": "v1.2", "1.3": "v1.3", "1.4": "v1.4"}


def test_there_is_a_pinned_run_for_every_schema_version_passport_reads() -> None:
    from passport.audit import SUPPORTED_SCHEMA_VERSIONS

    assert set(BY_VERSION) == set(SUPPORTED_SCHEMA_VERSIONS)
    for version, run in BY_VERSION.items():
        assert json.loads((RUNS / run / "passport.json").read_text())["schema_version"] == version


@pytest.mark.parametrize("run", sorted(p.name for p in RUNS.iterdir()))
def test_every_pinned_run_verifies(run: str) -> None:
    result = run_cli("verify", str(RUNS / run))
    assert result.returncode == 0 and result.stdout.startswith("verified"), result.stdout + result.stderr
    signed = json.loads((RUNS / run / "passport.json").read_text()).get("signature") is not None
    assert result.stdout.startswith("verified, UNSIGNED") != signed, result.stdout


@pytest.mark.parametrize("command", [["compare", "runs/base", "runs/same"], ["show", "runs/base"],
                                     ["export", "runs/base"], ["gate", "runs/base", "--require", "verdict == VALID"]])
def test_an_unsigned_passport_is_acted_on_only_when_the_user_says_it_is_an_old_one(command: list[str]) -> None:
    refused = run_cli(*command, cwd=DATA)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "it is unsigned (schema 1.1): pass --allow-unsigned" in refused.stderr and not refused.stdout
    assert run_cli(*command, "--allow-unsigned", cwd=DATA).returncode == 0


def _verdicts(stdout: str, other: str) -> dict[str, str]:
    table = stdout.split(f"{other} against base\n")[1].split("\n\n")[0].splitlines()[1:]
    rows = {}
    for line in table:
        if line.startswith("Verdicts:"):
            break
        name = line.split()[0]
        verdict = line.split("  ")[-1].strip() if "too few" not in line else line[line.index("too few"):]
        # "inconclusive (interval reaches +14.7%, beyond --min-effect 10%)": the word is what the
        # expectations derive; the reach, a figure, is not theirs to state
        rows[name] = "inconclusive" if verdict.startswith("inconclusive (interval reaches ") else verdict
    return rows


def test_compare_says_what_the_simulators_script_implies() -> None:
    result = run_cli("compare", "runs/base", "runs/same", "runs/slow", "--allow-unsigned", cwd=DATA)
    assert result.returncode == 0 and result.stdout.rstrip().endswith("Result: COMPARABLE"), result.stderr
    for other in ("same", "slow"):
        got = _verdicts(result.stdout, other)
        for stat, expected in EXPECTED["compare"][other].items():
            allowed = expected if isinstance(expected, list) else [expected]
            assert got[stat] in allowed, (other, stat, got[stat])
    assert "Holm-corrected across the 13 statistics at a family-wise error rate of 5%" in result.stdout


def test_gate_says_what_the_simulators_script_implies() -> None:
    conditions = EXPECTED["gate_slow"]
    args = [a for c in conditions for a in ("--require", c)]
    result = run_cli("gate", "runs/slow", *args, "--allow-unsigned", cwd=DATA)
    lines = result.stdout.splitlines()
    for line, (condition, verdict) in zip(lines, conditions.items()):
        assert line.startswith(f"{verdict}  {condition}"), line
    failed = sum(v == "FAIL" for v in conditions.values())
    assert result.returncode == (1 if failed else 0)
    assert lines[-1] == f"Gate: FAILED ({len(conditions) - failed} of {len(conditions)} conditions met)"


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
    result = run_cli("compare", str(RUNS / "base"), str(RUNS / "slow"), "--report", str(tmp_path / "cmp"),
                     "--allow-unsigned")
    assert result.returncode == 0 and f"report: {tmp_path / 'cmp' / 'report.html'}" in result.stdout
    page = tmp_path / "cmp" / "report.html"
    fields = browser_probe(page, tmp_path)
    assert fields == {"images": "1", "loaded": "1", "errors": "0", "verdict": "Result is: COMPARABLE"}
    assert "<strong>slower</strong>" in page.read_text()
    passport = json.loads((RUNS / "slow" / "passport.json").read_text())
    assert passport["results"]["slo"]["met"] is False  # the pinned gate's slo condition rests on this


def test_reports_of_an_earlier_layout_are_checked_by_hash_and_said_not_re_rendered(tmp_path: Path) -> None:
    result = run_cli("verify", str(RUNS / "v1.3"))
    assert "note: reports laid out by an earlier passport (report layout 1; this is 2)" in result.stdout
    copy = tmp_path / "v1.3"
    shutil.copytree(RUNS / "v1.3", copy)
    with (copy / "report.md").open("a") as report:
        report.write("\nVerdict: VALID\n")  # an edit the hash still catches
    result = run_cli("verify", str(copy))
    assert result.returncode == 1 and "report.md: sha256 differs" in result.stdout
