"""`engine.launch` end to end, with the simulator as the launched engine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.conftest import LENIENT_CLIENT, REPO, only_run_dir, run_cli
from tests.integration.test_faults import SMALL, _wait_for_rows

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

LAUNCH = f"{sys.executable} -m harness.simulator --host {{host}} --port {{port}} --ttft-ms 5 --itl-ms 2"


def test_launched_engine_is_recorded_watched_and_stopped(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec({"name": "launched", "engine": {"launch": LAUNCH}, "workload": SMALL,
                       "identity": {"weights_format": "none"}, "validity": LENIENT_CLIENT,
                       "load": {"pattern": "closed", "concurrency": 2, "measure": {"requests": 20}}})
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "passport: starting the engine:" in result.stderr
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    ident = passport["identity"]
    assert ident["engine.command"]["source"] == "launcher" and "harness.simulator" in ident["engine.command"]["value"]
    assert ident["engine.name"] == {"value": "passport-simulator", "source": "probed", "via": "/v1/models owned_by"}
    assert ident["declared.weights_format"] == {"value": "none", "source": "declared", "via": "identity.weights_format"}
    peak = passport["results"]["peak_memory"]
    assert peak["value_bytes"] > 10 * 2**20 and "RSS" in peak["source"]
    assert passport["results"]["engine_restarts"] == 0
    assert "engine.log" in passport["files"]
    port = ident["engine.command"]["value"].split("--port ")[1].split()[0]
    assert not [p for p in psutil.process_iter(["cmdline"]) if f"--port {port}" in " ".join(p.info["cmdline"] or [])]


def test_engine_dying_mid_run_ends_the_run_incomplete(write_spec: Callable[..., Path], tmp_path: Path) -> None:
    spec = write_spec({"name": "dies", "engine": {"launch": LAUNCH}, "workload": SMALL,
                       "load": {"pattern": "closed", "concurrency": 2, "measure": {"duration_s": 60}}})
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(tmp_path / "out"),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    run = _wait_for_rows(tmp_path / "out")
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if "harness.simulator" in cmdline and p.parent() is not None and p.parent().pid == proc.pid:
            p.kill()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    passport = json.loads((run / "passport.json").read_text())
    assert passport["verdict"] == "INCOMPLETE"
    assert "the launched engine exited" in passport["validity"]["incomplete_reason"]
    rules = {r["name"]: r for r in passport["validity"]["rules"]}
    assert rules["engine_alive"]["status"] == "FAIL" and passport["results"]["engine_restarts"] == 1
