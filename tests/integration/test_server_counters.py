"""The engine's own counters read around the timed phase, held against the client's log (issue
22): the simulated engine counts what it finished and generated; a second client, a log with
rows removed and a log with inflated token counts each meet the bound they break."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.faults import fault
from tests.forgery import rederive_and_reseal
from tests.integration.test_faults import WriteSpec, _spec, _start_long_run, _wait_for_rows

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

# 30 requests of 8 tokens; the simulator disconnects every 7th after 3 tokens (requests 7, 14,
# 21, 28): 26 answered with 8 tokens each, 4 cut with 3 tokens generated.
N, TOKENS, EVERY, CUT_AFTER = 30, 8, 7, 3
N_CUT = N // EVERY


def _rule(passport: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in passport["validity"]["rules"] if r["name"] == "server_counters")


def _honest_run(simulator: SimFactory, write_spec: WriteSpec, out: Path) -> Path:
    url = simulator("--ttft-ms", "3", "--itl-ms", "1", "--fault", f"disconnect:{EVERY}")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": N}},
                            validity={"max_error_rate": 0.5}))
    result = run_cli("run", str(spec), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr  # VALID: the cut requests are within max_error_rate
    return only_run_dir(out)


@fault("requests removed from requests.parquet, or token counts inflated in it, with every figure and hash "
       "recomputed to match", "the engine's own counters read before and after the timed phase disagree: inflated "
       "counts are a FAIL of `server_counters` (the run is INVALID), missing rows a WARN naming them")
def test_the_engines_counters_bound_the_log_and_catch_what_recomputation_cannot(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    run = _honest_run(simulator, write_spec, tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    telemetry = pq.read_table(run / "telemetry.parquet").to_pandas()
    reads = telemetry[telemetry.source.str.startswith("counters:")].set_index(["source", "name"]).value
    finished = reads["counters:after", "requests_finished_total"] - reads["counters:before", "requests_finished_total"]
    generated = reads["counters:after", "generation_tokens_total"] - reads["counters:before", "generation_tokens_total"]
    n_ok = N - N_CUT
    assert (finished, generated) == (n_ok, n_ok * TOKENS + N_CUT * CUT_AFTER)
    rule = _rule(passport)
    assert rule["status"] == "PASS" and rule["measured"] == f"requests {n_ok} / {n_ok}, tokens " \
        f"{n_ok * TOKENS + N_CUT * CUT_AFTER} / {n_ok * TOKENS}", rule
    assert f"up to {N} with the failed ones" in rule["message"]
    assert run_cli("verify", str(run)).returncode == 0

    inflated = tmp_path / "inflated"  # every answer claims a quarter more tokens than it got
    shutil.copytree(run, inflated)
    requests = pq.read_table(inflated / "requests.parquet")
    more = pc.add(requests["completion_tokens"], TOKENS // 4)
    pq.write_table(requests.set_column(requests.schema.get_field_index("completion_tokens"), "completion_tokens",
                                       more), inflated / "requests.parquet")
    forged = rederive_and_reseal(inflated)
    rule = _rule(forged)
    assert rule["status"] == "FAIL" and forged["verdict"] == "INVALID"
    claimed = n_ok * (TOKENS + TOKENS // 4)  # beyond the one token per answer allowed for a stop token
    assert f"the log claims {claimed - n_ok * TOKENS - N_CUT * CUT_AFTER} more tokens than the engine generated" in \
        rule["message"]

    dropped = tmp_path / "dropped"  # the five slowest answers removed
    shutil.copytree(run, dropped)
    requests = pq.read_table(dropped / "requests.parquet")
    ok = requests.filter(pc.equal(requests["outcome"], "ok"))
    e2e = pc.subtract(ok["end_ns"], ok["sent_ns"]).to_numpy()
    gone = pa.array(sorted(ok["request_id"].to_numpy()[e2e.argsort()[-5:]]))
    pq.write_table(requests.filter(pc.invert(pc.is_in(requests["request_id"], gone))), dropped / "requests.parquet")
    rule = _rule(rederive_and_reseal(dropped))
    # 5 answers gone, 4 of them within the allowance of the 4 cut requests (which the engine may
    # have finished): one request more than the client can account for
    assert rule["status"] == "WARN" and "the engine counted 1 more finished request than the client sent" in \
        rule["message"] and "rows are missing from requests.parquet" in rule["recommendation"]


@fault("another client uses the server during the timed phase",
       "`server_counters` WARN: the engine finished more requests than the run sent (its tokens stated beside), named "
       "as a shared server")
def test_a_second_client_during_the_run_is_seen_in_the_engines_counters(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "5")
    out = tmp_path / "out"
    proc = _start_long_run(url, write_spec, out, duration_s=4, concurrency=2)
    _wait_for_rows(out)
    with httpx.Client(base_url=url, timeout=10) as other:  # a plain client beside the run
        for _ in range(3):
            answer = other.post("/completions", json={"model": "sim-model", "prompt": "hi", "max_tokens": 5,
                                                      "stream": True})
            assert answer.status_code == 200 and answer.text.rstrip().endswith("data: [DONE]")
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr  # a WARN leaves the run VALID
    rule = _rule(json.loads((only_run_dir(out) / "passport.json").read_text()))
    assert rule["status"] == "WARN", rule
    assert rule["message"].endswith("the engine counted 3 more finished requests than the client sent")
    # the other client's 15 tokens are within the one token per answer allowed for stop tokens,
    # but stated: the engine's count minus the answers' usage
    found = re.search(r"the engine generated (\d+) tokens, the answers' usage says (\d+)", rule["message"])
    assert found is not None and int(found[1]) - int(found[2]) == 3 * 5
    assert "another client shared the server" in rule["recommendation"]


def test_no_counters_is_said_not_judged(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "3", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 10}},
                            telemetry={"metrics": "off"}))
    assert run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet").returncode == 0  # a SKIP: VALID
    run = only_run_dir(tmp_path / "out")
    rule = _rule(json.loads((run / "passport.json").read_text()))
    assert rule["status"] == "SKIP" and "no engine counters were read" in rule["message"]
    assert not set(pq.read_table(run / "telemetry.parquet").column("source").to_pylist()) & {"counters:before",
                                                                                           "counters:after"}


@fault("an engine whose /metrics reports its counters as NaN or +Inf (legal Prometheus values)",
       "the server_counters rule SKIPs saying so (VALID, exit 0), and the passport reads back: verify, gate and "
       "ledger add take it")
@pytest.mark.parametrize("value", ["NaN", "+Inf"])
def test_counters_read_as_nan_or_infinity_are_said_and_the_passport_reads_back(
        simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, value: str) -> None:
    url = simulator("--ttft-ms", "3", "--itl-ms", "1", "--counter-value", value)
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 10}}))
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())  # strict JSON: no NaN slipped in
    rule = _rule(passport)
    assert rule["status"] == "SKIP" and "read as NaN or an infinity" in rule["message"], rule
    assert passport["verdict"] == "VALID"
    assert run_cli("verify", str(run)).returncode == 0
    assert run_cli("gate", str(run), "--require", "verdict == VALID").returncode == 0
    added = run_cli("ledger", "add", "--ledger", str(tmp_path / "ledger"), str(run))
    assert added.returncode == 0 and added.stdout.startswith("added"), added.stdout + added.stderr
