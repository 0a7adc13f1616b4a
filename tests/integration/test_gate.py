"""`passport gate` on a real run against the simulator, as a CI job would call it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each


def test_gate_passes_fails_and_writes_junit(
    simulator: SimFactory, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "40", "--itl-ms", "2")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 10}}))
    assert run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet").returncode == 0
    run = str(only_run_dir(tmp_path / "out"))

    ok = run_cli("gate", run, "--require", "ttft.any.p50 < 1s", "--require", "error_rate < 0.5%",
                 "--require", "verdict == VALID")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["PASS", "PASS", "PASS"]
    assert lines[-1] == "Gate: PASSED (3 of 3 conditions met)"

    junit = tmp_path / "gate.xml"
    gate_file = tmp_path / "gate.yaml"
    gate_file.write_text("require:\n  - ttft.any.p50 < 10ms\n  - canaries == pass\n")
    failed = run_cli("gate", run, "--file", str(gate_file), "--require", "tpot.p99 < 1s", "--junit", str(junit))
    assert failed.returncode == 1
    assert failed.stdout.splitlines()[-1] == "Gate: FAILED (1 of 3 conditions met)"
    assert "FAIL  ttft.any.p50 < 10ms" in failed.stdout and "measured 4" in failed.stdout  # ~40 ms scripted
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")

    unknown = run_cli("gate", run, "--require", "ttft.p99 < 2s")
    assert unknown.returncode == 2 and "unknown gate name 'ttft.p99'" in unknown.stderr
    none = run_cli("gate", run)
    assert none.returncode == 2 and "no conditions" in none.stderr
