"""The client calibration, measured for real against the simulated engine, and the headroom every
run states from it: recomputed here from requests.parquet by hand (pandas), verified, and caught
when calibration.json is edited afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from harness._pacer import Pacer
from passport.run._calibration import PACING_CPU_SHARE, PACING_CPU_SHARE_REALTIME, _key, _measure
from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # a real calibration (seconds) and whole runs


def test_a_measured_calibration_prices_a_chunk_and_a_request() -> None:
    calibration = _measure(_key())
    slow, fast, long = calibration.points
    assert slow["chunks_per_request"] == fast["chunks_per_request"] < long["chunks_per_request"]
    # at the same request rate, 32-token answers cost more CPU than 1-token ones; three times the
    # rate costs more CPU than one: both terms of the fit are priced above zero
    assert long["cpu_share"] > slow["cpu_share"] and fast["cpu_share"] > slow["cpu_share"]
    assert calibration.cpu_us_per_chunk > 0 and calibration.cpu_us_per_request > 0
    # the fitted line passes through what was measured (three points, three terms)
    for p in calibration.points:
        predicted = (calibration.fixed_cpu_share + p["requests_per_s"] * calibration.cpu_us_per_request / 1e6
                     + p["chunks_per_s"] * calibration.cpu_us_per_chunk / 1e6)
        assert predicted == pytest.approx(p["cpu_share"], abs=0.05)
    # where its pacer was the real-time C thread (no GIL holder delays a send) pacing holds until the
    # core is nearly full; with the Python thread, at about a third of it
    realtime = {p["pacer_realtime"] for p in calibration.points}
    assert realtime in ({0.0}, {1.0}) and Pacer().stats.native >= (realtime == {1.0})
    assert calibration.pacing_cpu_share == (PACING_CPU_SHARE_REALTIME if realtime == {1.0} else PACING_CPU_SHARE)
    for point in calibration.points:  # the simulator kept up: the rates asked for were sent
        assert point["achieved_per_s"] == pytest.approx(point["rate_per_s"], rel=0.1)


def _headroom_by_hand(run: Path) -> dict[str, Any]:
    r = pq.read_table(run / "requests.parquet").to_pandas()
    cal = json.loads((run / "calibration.json").read_text())
    sent = r[r.sent_ns.notna()]
    span_s = (sent[["sent_ns", "end_ns"]].max(axis=1).max() - sent.sent_ns.min()) / 1e9
    per_request = sent.n_chunks.sum() / len(sent)
    ceiling = ((cal["pacing_cpu_share"] - cal["fixed_cpu_share"])
               / ((cal["cpu_us_per_request"] + per_request * cal["cpu_us_per_chunk"]) / 1e6))
    return {"requests_per_s": len(sent) / span_s, "ceiling": ceiling, "factor": ceiling / (len(sent) / span_s)}


def test_every_run_states_its_headroom_and_verify_recomputes_it(
    simulator: SimFactory, write_spec: Any, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "constant", "rate_per_s": 50, "measure": {"requests": 40}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "us CPU per request" in result.stdout + result.stderr  # said before timing
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    assert "calibration.json" in passport["files"]
    headroom = passport["results"]["client"]["headroom"]
    by_hand = _headroom_by_hand(run)
    assert headroom["requests_per_s"] == pytest.approx(by_hand["requests_per_s"], rel=1e-9)
    assert headroom["ceiling_requests_per_s"] == pytest.approx(by_hand["ceiling"], rel=1e-9)
    assert headroom["factor"] == pytest.approx(by_hand["factor"], rel=1e-9)
    assert headroom["requests_per_s"] == pytest.approx(50, rel=0.2)  # what was asked, near enough
    assert "Client headroom:" in (run / "report.md").read_text()
    # the pacer's own account: every request of this open loop written by its thread (no TLS here)
    pacer = passport["results"]["client"]["pacer"]
    sent = int(pq.read_table(run / "requests.parquet").column("sent_ns").drop_null().length())
    assert pacer["sends_raw"] + pacer["sends_via_loop"] == sent and pacer["sends_via_loop"] == 0
    assert pacer["cpu_s"] > 0 and 0 < pacer["cpu_us_per_send"] < 100_000
    assert pacer["native"] == Pacer().stats.native  # the C thread where it can be built, said so
    may_be_realtime = subprocess.run([sys.executable, "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, "
                                      "os.sched_param(1))"], capture_output=True).returncode == 0
    assert pacer["realtime"] is (pacer["native"] and may_be_realtime)  # SCHED_FIFO where this user may ask
    assert ("a C thread" if pacer["native"] else "a Python thread") in (run / "report.md").read_text()
    assert run_cli("verify", str(run)).returncode == 0

    cal = json.loads((run / "calibration.json").read_text())
    (run / "calibration.json").write_text(json.dumps({**cal, "cpu_us_per_request": 1.0}))
    tampered = run_cli("verify", str(run))
    assert tampered.returncode != 0 and "calibration.json" in tampered.stdout + tampered.stderr
