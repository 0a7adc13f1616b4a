"""`passport sweep` against a simulated engine with a known saturation point.

The simulator with `--slots 2`, TTFT 20 ms and ITL 4 ms serves 8-token answers in 48 ms per
slot: at most 2 / 0.048 = 41.7 requests/s. Below that it keeps up; above it requests queue.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import LENIENT_CLIENT, REPO, SimFactory, run_cli
from tests.integration.test_report_html import browser_probe

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
SIM = ("--slots", "2", "--ttft-ms", "20", "--itl-ms", "4")
WORKLOAD = {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
            "output_tokens": {"dist": "fixed", "value": 8}}


def _sweep_dir(out: Path) -> Path:
    (folder,) = [p for p in out.iterdir() if "-sweep-" in p.name]
    return folder


def test_rate_sweep_finds_the_knee_saturation_and_stops_when_over_saturated(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator(*SIM)
    spec = write_spec({
        "name": "rates", "endpoint": {"base_url": url}, "workload": WORKLOAD,
        # 40 requests a level: a p90 target needs 35 to be called met (passport.judge._level_noise)
        "load": {"pattern": "poisson", "rate_per_s": 1, "warmup": {"requests": 2}, "measure": {"requests": 40}},
        # 20 ms to the first token below capacity; far beyond 100 ms once requests queue past it
        "slo": {"ttft.any.p90": "100ms"}, "validity": LENIENT_CLIENT,
        "sweep": {"vary": "rate", "levels": [10, 20, 60, 120, 240], "stop_when": {"achieved_fraction_below": 0.6}},
    })
    result = run_cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = _sweep_dir(tmp_path / "out")
    summary = json.loads((folder / "sweep.json").read_text())
    levels = {lv["load"]: lv for lv in summary["levels"]}
    assert sorted(levels) == [10, 20, 60, 120] and summary["not_run"] == [240]
    assert "achieved_fraction_below" in summary["stopped_early"]
    assert summary["knee"] == 20 and levels[20]["slo_met"] and not levels[60]["slo_met"]
    calls = {lv["load"]: lv["slo_targets"][0]["call"] for lv in summary["levels"]}
    assert calls == {10: "met", 20: "met", 60: "missed", 120: "missed"}
    assert "95% interval" in summary["saturation_note"] and summary["sweep_version"] == 2
    assert summary["saturation"] == 60
    # past saturation the achieved throughput is the engine's capacity, 41.7 requests/s
    assert 30 < levels[120]["throughput_rps"] < 44
    assert levels[10]["verdict"] == "VALID" and levels[120]["verdict"] == "INVALID"
    for lv in summary["levels"]:
        run = folder / "levels" / lv["run"]
        assert json.loads((run / "passport.json").read_text())["protocol"]["effective"]["load"]["rate_per_s"] == \
            lv["load"]
        assert run_cli("verify", str(run)).returncode == 0
    assert "knee: 20 req/s" in result.stdout and "stopped early: over-saturated at 120" in result.stdout
    fields = browser_probe(folder / "report.html", tmp_path)
    assert fields["images"] == "1" and fields["loaded"] == "1" and fields["errors"] == "0"


def test_auto_concurrency_sweep_doubles_until_throughput_stops_growing(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator(*SIM)
    spec = write_spec({
        "name": "users", "endpoint": {"base_url": url}, "workload": WORKLOAD,
        # three repetitions a level: 24 requests alone are too few for ten time slices to tell a flat
        # step from a 10 % gain (each slice holds 2 or 4 completions); see the test below
        "load": {"pattern": "closed", "concurrency": 1, "measure": {"requests": 24}, "repetitions": 3},
        "validity": LENIENT_CLIENT, "sweep": {"vary": "concurrency", "levels": "auto", "auto": {"max_levels": 6}},
    })
    result = run_cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr  # no SLO declared: no knee, not a failure
    summary = json.loads((_sweep_dir(tmp_path / "out") / "sweep.json").read_text())
    thr = {lv["load"]: lv["throughput_rps"] for lv in summary["levels"]}
    assert list(thr) == [1, 2, 4]  # 4 adds nothing over 2: saturation confirmed, 8..32 not run
    assert summary["not_run"] == [8, 16, 32]
    assert 17 < thr[1] < 21.5 and 34 < thr[2] < 43 and thr[4] < thr[2] * 1.1
    assert summary["saturation"] == 2 and summary["knee"] is None and "no SLO declared" in summary["knee_note"]
    assert {lv["repetitions"] for lv in summary["levels"]} == {3}
    assert {lv["throughput_basis"] for lv in summary["levels"]} == {"repetitions"}


def test_one_short_window_a_level_calls_no_saturation_and_says_what_would(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    """The same engine and levels, one window of 24 requests each: the flat step 2 -> 4 is inside
    the noise of ten slices of 2 or 4 completions, so saturation is not called (it was, on these
    single noisy runs, before sweep version 2) and the summary says what would tell."""
    url = simulator(*SIM)
    spec = write_spec({
        "name": "short", "endpoint": {"base_url": url}, "workload": WORKLOAD,
        "load": {"pattern": "closed", "concurrency": 1, "measure": {"requests": 24}}, "validity": LENIENT_CLIENT,
        "sweep": {"vary": "concurrency", "levels": [1, 2, 4]},
    })
    result = run_cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((_sweep_dir(tmp_path / "out") / "sweep.json").read_text())
    assert summary["saturation"] is None
    assert summary["saturation_note"].startswith("not called: going from concurrency 2 to 4")
    assert "load.repetitions: 3 would tell" in summary["saturation_note"]
    assert "saturation: none called (not called: going from concurrency 2 to 4" in result.stdout


def test_sweep_levels_are_validated(write_spec: WriteSpec, tmp_path: Path) -> None:
    spec = write_spec({"name": "bad", "endpoint": {"base_url": "http://127.0.0.1:9/v1"},
                       "load": {"pattern": "closed", "concurrency": 1}, "sweep": {"levels": [4, 2]}})
    result = run_cli("sweep", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "levels must be positive, distinct and ascending" in result.stderr
    good = write_spec({"name": "good", "endpoint": {"base_url": "http://127.0.0.1:9/v1"},
                       "load": {"pattern": "closed", "concurrency": 1}}, name="good.yaml")
    result = run_cli("sweep", str(good), "--levels", "1,x")
    assert result.returncode == 2 and "--levels '1,x'" in result.stderr
    result = run_cli("sweep", str(good), "--levels", "1.5,3")
    assert result.returncode == 2 and "whole numbers" in result.stderr


def test_ctrl_c_in_the_second_level_judges_only_what_completed(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator(*SIM)
    spec = write_spec({
        "name": "cut", "endpoint": {"base_url": url}, "workload": WORKLOAD, "slo": {"ttft.any.p90": "10s"},
        "load": {"pattern": "closed", "concurrency": 1, "measure": {"duration_s": 4}}, "validity": LENIENT_CLIENT,
        "sweep": {"vary": "concurrency", "levels": [1, 2, 4]},
    })
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "sweep", str(spec), "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # the status lines, until the second level starts
        said.append(line)
        if line.startswith("passport: sweep level cut-c2"):
            break
    time.sleep(1.5)  # inside level 2's timed phase
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)
    assert any(x.startswith("passport: sweep level cut-c1 (level 1 of 3)") for x in said)
    assert "(level 2 of 3; about " in said[-1] and "left at the pace so far" in said[-1]
    assert proc.returncode == 1, stdout  # the sweep did not finish: not a success
    summary = json.loads((_sweep_dir(tmp_path / "out") / "sweep.json").read_text())
    cut = summary["levels"][1]
    assert (cut["load"], cut["complete"], cut["slo_met"]) == (2, False, None)
    assert summary["not_run"] == [4] and summary["saturation"] is None and summary["knee"] == 1
    assert "concurrency        2: INCOMPLETE" in stdout and "SLO unknown (incomplete)" in stdout
    assert "saturation: unknown (not judged: 1 complete level, a trend needs two" in stdout
    assert "throughput still grew" not in stdout


def test_a_rate_level_past_saturation_stops_itself_within_seconds_and_names_the_saturation(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator(*SIM)  # serves at most 41.7 requests/s
    spec = write_spec({
        "name": "watch", "endpoint": {"base_url": url}, "workload": WORKLOAD,
        "load": {"pattern": "poisson", "rate_per_s": 1, "warmup": {"requests": 0}, "measure": {"duration_s": 20}},
        "slo": {"ttft.any.p90": "100ms"}, "validity": LENIENT_CLIENT,
        "sweep": {"vary": "rate", "levels": [10, 120, 240]},
    })
    result = run_cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr  # a sweep that found its saturation
    folder = _sweep_dir(tmp_path / "out")
    summary = json.loads((folder / "sweep.json").read_text())
    levels = {lv["load"]: lv for lv in summary["levels"]}
    assert sorted(levels) == [10, 120] and summary["not_run"] == [240]
    assert levels[10]["verdict"] == "VALID" and levels[10]["complete"]  # 20 s at 10/s: kept up, never stopped
    assert levels[120]["verdict"] == "SATURATED" and "stopped itself" in summary["stopped_early"]
    assert summary["saturation"] == 120 and "stopped itself saturated" in summary["saturation_note"]
    assert summary["knee"] == 10
    run = folder / "levels" / levels[120]["run"]
    passport = json.loads((run / "passport.json").read_text())
    rule = next(r for r in passport["validity"]["rules"] if r["name"] == "run_complete")
    assert rule["message"].startswith("the run stopped early: saturated: ") and "requests in flight rose" in \
        rule["message"]
    # 20 s at 120/s schedules about 2,400 requests; the watch stopped it seconds in
    assert passport["validity"]["counts"]["measured"] < 1200, passport["validity"]["counts"]
    assert run_cli("verify", str(run)).returncode == 0
    shown = run_cli("show", str(run))
    assert "Result is: SATURATED" in shown.stdout
    gate = run_cli("gate", str(run), "--require", "verdict == SATURATED")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # as a campaign arm it is left unranked with its reason, as an arm that did not finish is
    from passport.judge._campaign import summarize_arm
    from passport.model import read_passport
    from passport.model._campaign import ArmSpec

    row = summarize_arm(ArmSpec(name="x", endpoint={"base_url": url}), run.name, read_passport(run / "passport.json"),
                        None, "throughput.requests_per_s")
    assert row.status == "incomplete" and str(row.reason).startswith("saturated: ")
