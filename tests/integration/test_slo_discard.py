"""SLO goodput and pre-registered discard rules, end to end against the simulated engine."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
# 3 repetitions of 10 requests, one at a time: request k (1-based) is the k-th the simulator
# sees, so `--fault http500:25` fails exactly one request, the 5th of repetition 2.
LOAD = {"pattern": "closed", "concurrency": 1, "measure": {"requests": 10}, "repetitions": 3}


def _run(url: str, write_spec: WriteSpec, out: Path, **extra: object) -> tuple[Path, dict[str, object]]:
    spec = write_spec(_spec(url, LOAD, **extra), name=f"{out.name}.yaml")
    result = run_cli("run", str(spec), "--out", str(out), "--quiet")
    run = only_run_dir(out)
    return run, {"rc": result.returncode, "stdout": result.stdout,
                 "passport": json.loads((run / "passport.json").read_text())}


def test_a_pre_registered_rule_discards_the_failing_repetition_and_verify_agrees(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--fault", "http500:25")
    _, plain = _run(url, write_spec, tmp_path / "plain")
    assert plain["rc"] == 1 and "FAIL: error_rate" in str(plain["stdout"])  # 1 of 30 failed > 1 %

    url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--fault", "http500:25")
    run, ruled = _run(url, write_spec, tmp_path / "ruled", discard=["error_rate > 5%", "engine_exited"],
                      slo={"ttft.any.p99": "500ms"})
    p = ruled["passport"]
    assert isinstance(p, dict)
    assert ruled["rc"] == 0 and p["verdict"] == "VALID"
    (gone,) = p["results"]["discard"]["discarded"]
    assert gone["repetition"] == 2 and gone["rule"] == "error_rate > 5%" and gone["measured"] == 0.1
    assert p["validity"]["counts"]["measured"] == 20 and p["results"]["outcomes"] == {"ok": 20}
    assert [w["repetition"] for w in p["results"]["windows"]] == [0, 1]
    rule = next(r for r in p["validity"]["rules"] if r["name"] == "discard_rules")
    assert rule["status"] == "WARN" and "repetition 2 by 'error_rate > 5%'" in rule["message"]
    assert "discarded by `error_rate > 5%`" in (run / "report.md").read_text()
    assert p["results"]["slo"]["met"] is True and p["results"]["slo"]["requests_meeting"] == 20
    assert p["protocol"]["declared"]["sha256"] == p["files"]["declared.json"]["sha256"]
    assert run_cli("verify", str(run)).stdout.startswith("verified")


def test_a_rule_added_after_the_run_discards_nothing(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--fault", "http500:25")
    run, _ = _run(url, write_spec, tmp_path / "out")
    path = run / "passport.json"
    edited = json.loads(path.read_text())
    edited["protocol"]["effective"]["discard"] = ["error_rate > 5%"]
    path.write_text(json.dumps(edited))
    result = run_cli("verify", str(run))
    assert result.returncode == 1
    assert "protocol.effective.discard is ['error_rate > 5%'] but declared.json" in result.stdout
    assert "rules added after the run are not applied" in result.stdout
    declared = run / "declared.json"
    frozen = json.loads(declared.read_text())
    frozen["spec"]["discard"] = ["error_rate > 5%"]
    declared.write_text(json.dumps(frozen))
    result = run_cli("verify", str(run))
    assert "declared.json: sha256 differs from the passport" in result.stdout
    assert "results.outcomes" in result.stdout  # recomputed with the forged rule, the figures no longer match


def test_goodput_is_zero_when_no_request_meets_the_slo(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "20", "--itl-ms", "1")
    _, out = _run(url, write_spec, tmp_path / "out", slo={"ttft.any.p50": "5ms", "tpot.p99": "1s"})
    p = out["passport"]
    assert isinstance(p, dict)
    slo = p["results"]["slo"]
    assert slo["met"] is False and slo["requests_meeting"] == 0 and slo["attainment"] == 0.0
    assert {t["name"]: t["met"] for t in slo["targets"]} == {"ttft.any.p50": False, "tpot.p99": True}
    assert p["results"]["metrics"]["goodput.requests_per_s"]["mean"] == 0.0
    assert "SLO NOT met: " in str(out["stdout"]) and "ttft.any.p50 " in str(out["stdout"])
    gate = run_cli("gate", str(next((tmp_path / "out").iterdir())), "--require", "goodput.requests_per_s.mean > 0",
                   "--require", "slo == met", "--require", "slo != met")
    assert gate.returncode == 1
    assert [line.split()[0] for line in gate.stdout.splitlines()[:3]] == ["FAIL", "FAIL", "PASS"]
