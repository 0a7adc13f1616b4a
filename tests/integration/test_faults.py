"""Bad input and faults, each through the CLI as a user meets them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from passport.audit import RunFiles
from tests.conftest import LENIENT_CLIENT, REPO, SimFactory, closed_port, only_run_dir, run_cli
from tests.faults import fault

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
SMALL = {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
         "output_tokens": {"dist": "fixed", "value": 8}}


def _spec(url: str, load: dict[str, object], **extra: Any) -> dict[str, object]:
    """A small spec against `url`. Canaries are off unless asked for: the simulator's faults hit
    every k-th request it sees, and canary requests would shift them."""
    extra["validity"] = {**LENIENT_CLIENT, **extra.get("validity", {})}
    extra.setdefault("canaries", "none")
    return {"name": "faults", "endpoint": {"base_url": url}, "workload": SMALL, "load": load, **extra}


def _expected_faults(faults: dict[str, int], n: int) -> dict[str, int]:
    """The simulator's rule: request k (1-based) gets the first listed fault whose period divides k."""
    counts = {kind: 0 for kind in faults}
    for k in range(1, n + 1):
        for kind, every in faults.items():
            if k % every == 0:
                counts[kind] += 1
                break
    return counts


@fault("the server drops the connection mid-stream",
       "`stream_error` (\"server closed the connection after N events\"); the run goes on")
@fault("HTTP 429 with Retry-After, HTTP 500",
       "`rejected` (Retry-After kept) and `http_error`, counted apart; the run goes on")
@fault("a malformed SSE event, an error event mid-stream", "`stream_error` naming it; the run goes on")
def test_each_fault_lands_in_its_outcome_class_and_the_run_goes_on(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    faults = {"disconnect": 5, "reject": 7, "http500": 11, "malformed": 13, "error_event": 17}
    url = simulator("--ttft-ms", "5", "--itl-ms", "1", *[a for k, v in faults.items() for a in ("--fault", f"{k}:{v}")])
    n = 120
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": n}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 1  # error rate above 1 %: INVALID, not a crash
    assert "Result is: INVALID" in result.stdout and "FAIL: error_rate" in result.stdout
    run = only_run_dir(tmp_path / "out")
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    expected = _expected_faults(faults, n)
    assert len(requests) == n
    assert (requests.outcome == "rejected").sum() == expected["reject"]
    assert (requests.outcome == "http_error").sum() == expected["http500"]
    stream_faults = expected["disconnect"] + expected["malformed"] + expected["error_event"]
    assert (requests.outcome == "stream_error").sum() == stream_faults
    assert (requests.outcome == "ok").sum() == n - sum(expected.values())
    rejected = requests[requests.outcome == "rejected"]
    assert (rejected.retry_after == "1").all() and (rejected.http_status == 429).all()
    http = requests[requests.outcome == "http_error"]
    assert http.error.str.contains("HTTP 500: .*simulated failure").all()
    errors = requests[requests.outcome == "stream_error"].error
    assert errors.str.contains("server closed the connection after").sum() == expected["disconnect"]
    assert errors.str.contains("malformed event").sum() == expected["malformed"]
    assert errors.str.contains("error event: simulated mid-stream failure").sum() == expected["error_event"]
    passport = json.loads((run / "passport.json").read_text())
    counts = passport["validity"]["counts"]
    assert counts["rejections"] == expected["reject"] and counts["http_errors"] == expected["http500"]
    assert passport["results"]["metrics_failure_inclusive"]["ttft.any"]["n_failed"] == sum(expected.values())


@fault("a stream that stops sending", "`timeout` (kind `stall`) at `timeouts.stall_s`, not at the end of the stall")
def test_stalled_stream_is_a_stall_timeout(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--fault", "stall:2", "--stall-s", "3")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 4}},
                            timeouts={"stall_s": 0.3}, validity={"max_error_rate": 1.0}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    requests = pq.read_table(only_run_dir(tmp_path / "out") / "requests.parquet").to_pandas()
    stalled = requests[requests.outcome == "timeout"]
    assert len(stalled) == 2 and (stalled.timeout_kind == "stall").all()
    assert ((stalled.end_ns - stalled.first_byte_ns) / 1e9 < 2.0).all()  # cut at ~0.3 s, not after the 3 s stall


@fault("an unreachable endpoint",
       "exit 2 before any timing: \"cannot reach URL ... Is the server running\"; no run folder content")
def test_unreachable_endpoint_fails_before_timing_and_writes_nothing(write_spec: WriteSpec, tmp_path: Path) -> None:
    spec = write_spec(_spec(f"http://127.0.0.1:{closed_port()}/v1", {"pattern": "closed", "concurrency": 1}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("ERROR: cannot reach http://127.0.0.1:")
    assert "Is the server running" in result.stderr
    assert not any((tmp_path / "out").iterdir())


def test_bad_spec_names_the_field_and_writes_nothing(write_spec: WriteSpec, tmp_path: Path) -> None:
    spec = write_spec({"endpoint": {"base_url": "http://x/v1"}, "load": {"pattern": "closed", "concurency": 2}})
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and result.stdout == ""
    assert "load.concurency: unknown field; did you mean 'concurrency'?" in result.stderr
    assert not (tmp_path / "out").exists()


def test_api_key_never_lands_in_any_output_file(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-passport-test-7f3a9c1e5b"
    monkeypatch.setenv("MY_KEY", secret)  # the simulator answers 401 to a request without it
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--api-key-env", "MY_KEY")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 6}}))
    refused = run_cli("run", str(spec), "--out", str(tmp_path / "no-key"))
    assert refused.returncode == 1
    statuses = pq.read_table(only_run_dir(tmp_path / "no-key") / "requests.parquet").column("http_status").to_pylist()
    assert statuses == [401] * 6
    assert secret not in refused.stdout + refused.stderr  # the 401's body does not quote it either
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet", "--api-key-env", "MY_KEY",
                     env={"MY_KEY": secret})
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout + result.stderr
    run = only_run_dir(tmp_path / "out")
    for path in (p for p in run.rglob("*") if p.is_file()):  # plots/ too
        assert secret.encode() not in path.read_bytes(), path
        if path.suffix == ".parquet":  # compressed pages could hide it: look at the decoded values too
            assert secret not in str(pq.read_table(path).to_pylist()), path
    passport = json.loads((run / "passport.json").read_text())
    assert passport["protocol"]["overrides"] == [{"field": "endpoint.api_key_env", "value": "MY_KEY",
                                                  "source": "--api-key-env"}]


@fault("`api_key_env` names an unset variable", "exit 2: \"export NAME=<your key>\"")
def test_missing_api_key_variable_is_a_clear_error(write_spec: WriteSpec, tmp_path: Path) -> None:
    spec = write_spec(_spec("http://127.0.0.1:9/v1", {"pattern": "closed", "concurrency": 1}))
    env = {k: v for k, v in os.environ.items() if k != "NOT_SET_KEY"}
    result = subprocess.run([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(tmp_path / "o"),
                             "--api-key-env", "NOT_SET_KEY"], capture_output=True, text=True, env=env, cwd=REPO)
    assert result.returncode == 2
    assert "'NOT_SET_KEY', which is not set; export NOT_SET_KEY=<your key>" in result.stderr


def _start_long_run(url: str, write_spec: WriteSpec, out: Path, duration_s: float = 60,
                    concurrency: int = 4) -> subprocess.Popen[str]:
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": concurrency,
                                  "measure": {"duration_s": duration_s}}))
    return subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def _long_run(simulator: SimFactory, write_spec: WriteSpec, out: Path) -> tuple[str, subprocess.Popen[str], Path]:
    """A simulator, a 60 s run against it, and its run folder once rows have been flushed."""
    url = simulator("--ttft-ms", "5", "--itl-ms", "5")
    proc = _start_long_run(url, write_spec, out)
    return url, proc, _wait_for_rows(out)


def _wait_for_rows(out: Path, timeout_s: float = 20.0) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = [p for p in out.iterdir()] if out.exists() else []
        # part-000000 is the empty table every parts folder starts with
        if runs and list((runs[0] / "requests.parts").glob("part-*.parquet"))[1:]:
            return runs[0]
        time.sleep(0.1)
    raise AssertionError("no rows were flushed")


@fault("Ctrl-C during the timed phase", "in-flight requests recorded as interrupted, an INCOMPLETE passport, exit 1")
def test_ctrl_c_flushes_files_and_writes_an_incomplete_passport(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    _, proc, run = _long_run(simulator, write_spec, tmp_path / "out")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1, stderr
    assert "Result is: INCOMPLETE" in stdout
    passport = json.loads((run / "passport.json").read_text())
    assert passport["verdict"] == "INCOMPLETE" and passport["validity"]["complete"] is False
    assert passport["validity"]["incomplete_reason"] == "interrupted by SIGINT"
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    assert len(requests) > 0 and not (run / "requests.parts").exists()
    assert run_cli("verify", str(run)).returncode == 0


@fault("Ctrl-C while a closed loop's users wait at the warm-up barrier",
       "INCOMPLETE with the reason, exit 1, no asyncio traceback on stderr")
def test_ctrl_c_at_the_warm_up_barrier_says_no_traceback(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    """Two users hold warm-up answers that stall; the other two wait at the barrier. The stop
    cancelled them and left their gathering future's CancelledError unretrieved, which asyncio
    printed as a traceback (found stopping a 10,000-user closed loop)."""
    url = simulator("--ttft-ms", "5", "--itl-ms", "5", "--fault", "stall:1", "--stall-s", "30")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 4, "warmup": {"requests": 2},
                                  "measure": {"requests": 8}}))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 20
    while not (out.exists() and any((p / "requests.parts").is_dir() for p in out.iterdir())):
        assert time.monotonic() < deadline, "the run never reached its timed phase"
        time.sleep(0.1)
    time.sleep(1.5)  # the stalled answers have begun, the other users wait at the barrier
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
    passport = json.loads((only_run_dir(out) / "passport.json").read_text())
    assert passport["validity"]["incomplete_reason"] == "interrupted by SIGINT"


@fault("the harness killed (SIGKILL, OOM)",
       "every flushed `*.parts/part-*.parquet` reads; `passport recover` writes the passport")
def test_killed_run_leaves_readable_parts(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    _, proc, run = _long_run(simulator, write_spec, tmp_path / "out")
    proc.kill()
    proc.communicate(timeout=10)
    table = RunFiles(run).table("requests")
    assert table is not None and table.num_rows > 0
    assert set(table.column("outcome").to_pylist()) == {"ok"}


@fault("the server dies mid-run",
       "the run stops after repeated connection failures: INCOMPLETE with the reason, exit 1")
def test_server_that_dies_mid_run_stops_the_run_with_a_reason(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    port_url, proc, run = _long_run(simulator, write_spec, tmp_path / "out")
    port = int(port_url.rsplit(":", 1)[1].split("/")[0])
    subprocess.run(["pkill", "-f", f"harness.simulator --port {port}"], check=False)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    passport = json.loads((run / "passport.json").read_text())
    assert passport["verdict"] == "INCOMPLETE"
    assert "connection attempts in a row failed" in passport["validity"]["incomplete_reason"]
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    assert (requests.outcome == "ok").sum() > 0 and (requests.outcome == "stream_error").sum() >= 20


def test_verify_catches_a_tampered_row_and_an_edited_figure(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 10}}))
    assert run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet").returncode == 0
    run = only_run_dir(tmp_path / "out")
    assert run_cli("verify", str(run)).stdout.startswith("verified")
    passport_path = run / "passport.json"
    original = passport_path.read_text()
    edited = json.loads(original)
    edited["results"]["metrics"]["ttft.any"]["p99"] *= 0.5
    passport_path.write_text(json.dumps(edited))
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "results.metrics.ttft.any.p99: passport says" in result.stdout
    passport_path.write_text(original)
    table = pq.read_table(run / "requests.parquet")
    end = table.column("end_ns").to_pylist()
    end[3] += 5_000_000_000
    pq.write_table(table.set_column(table.schema.get_field_index("end_ns"), "end_ns",
                                    __import__("pyarrow").array(end)), run / "requests.parquet")
    result = run_cli("verify", str(run))
    assert result.returncode == 1
    assert "requests.parquet: sha256 differs" in result.stdout and "results.metrics.e2e" in result.stdout


@pytest.mark.parametrize("pattern", ["constant", "poisson", "gamma"])
def test_open_loop_runs_are_valid_for_every_pattern(
    pattern: str, simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "2")
    spec = write_spec(_spec(url, {"pattern": pattern, "rate_per_s": 40, "burstiness": 0.5,
                                  "warmup": {"requests": 4}, "measure": {"duration_s": 1.5}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    passport = json.loads((only_run_dir(tmp_path / "out") / "passport.json").read_text())
    assert passport["validity"]["counts"]["measured"] == passport["protocol"]["schedule"]["n_scheduled"] - 4
    assert passport["results"]["client"]["dispatch_lag_p99_ms"] < 50


@fault("a reused keep-alive connection the server closed",
       "the request is resent once on a new connection (`resent`), and reuse stops")
def test_request_on_a_keepalive_connection_the_server_dropped_is_resent_once(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--drop-reused")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 12}}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    requests = pq.read_table(only_run_dir(tmp_path / "out") / "requests.parquet").to_pandas()
    assert (requests.outcome == "ok").all()
    # the preconnected pair each served one request; the next request on each was dropped
    # unanswered and resent on a new connection, after which no connection is reused
    assert requests.resent.sum() >= 1
    assert requests[requests.resent].new_connection.all()
    assert requests.sort_values("seq").new_connection.iloc[4:].all()
