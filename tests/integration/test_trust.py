"""A passport that cannot be forged, mistyped or over-read (issue 12), tried as an auditor and a
release manager would: edits caught by verify and refused by gate, a killed run recovered, a
second Ctrl-C that still leaves a passport, damaged folders refused with one clear message."""

from __future__ import annotations

import hashlib
import json
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from passport.audit import content_sha256
from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.faults import fault
from tests.integration.test_faults import WriteSpec, _spec, _start_long_run, _wait_for_rows

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each


def _run(simulator: SimFactory, write_spec: WriteSpec, out: Path, *sim_args: str, **spec: Any) -> Path:
    url = simulator("--ttft-ms", "3", "--itl-ms", "1", *sim_args)
    path = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 30}}, **spec))
    run_cli("run", str(path), "--out", str(out), "--quiet")
    return only_run_dir(out)


def _edit(run: Path, change: Any, reseal: bool) -> None:
    """Edit passport.json; with `reseal`, as a forger who also recomputes the content hash."""
    data = json.loads((run / "passport.json").read_text())
    change(data)
    if reseal:
        data["content_sha256"] = content_sha256(data)
    (run / "passport.json").write_text(json.dumps(data, indent=2))


def _folder_hashes(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest() for p in run.rglob("*") if p.is_file()}


@fault("a hand-edited verdict or rule in passport.json, with its content hash recomputed, deleted, or its schema "
       "version lowered to one without rule re-derivation or signatures", "verify exit 1 naming the field and the "
       "downgrade (the verdict is re-derived for every schema version); gate, compare, show and export refuse the "
       "run (exit 2) before acting on it: a broken signature, a downgrade, an unsigned passport without "
       "--allow-unsigned, and with it a verdict the raw files do not give")
def test_a_flipped_verdict_is_caught_by_verify_and_refused_by_gate(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    run = _run(simulator, write_spec, tmp_path / "out", "--fault", "reject:4")  # 25 % rejected: INVALID
    assert json.loads((run / "passport.json").read_text())["verdict"] == "INVALID"
    assert run_cli("verify", str(run)).returncode == 0

    def flip(data: dict[str, Any]) -> None:
        data["verdict"] = data["validity"]["verdict"] = "VALID"
        for rule in data["validity"]["rules"]:
            rule["status"] = "PASS" if rule["status"] == "FAIL" else rule["status"]

    _edit(run, flip, reseal=False)
    result = run_cli("verify", str(run))
    assert result.returncode == 1
    assert "- passport.json: content_sha256 differs from its content" in result.stdout
    assert "- verdict: passport says 'VALID', the raw logs and the rules give 'INVALID'" in result.stdout
    gate = run_cli("gate", str(run), "--require", "verdict == VALID")
    assert gate.returncode == 2 and "edited after it was written" in gate.stderr

    _edit(run, lambda data: None, reseal=True)  # a forger who recomputes the hash: the rules still tell
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "content_sha256" not in result.stdout
    assert "validity.rules[" in result.stdout and ".status: passport says 'PASS', raw logs give 'FAIL'" in result.stdout
    assert "- validity.verdict: passport says 'VALID'" in result.stdout
    # and gate, compare and show refuse it before they act on it: the signature was of the old content
    refused = "its signature is not a valid signature of its content hash"
    for command in (["gate", str(run), "--require", "verdict == VALID"], ["compare", str(run), str(run)],
                    ["show", str(run)], ["show", str(run), "--as", "vllm"], ["export", str(run)]):
        result = run_cli(*command)
        assert result.returncode == 2 and refused in result.stderr and result.stdout == "", (command, result.stderr)

    def unsealed_and_older(data: dict[str, Any]) -> None:  # no hash to check, a schema without rule re-derivation
        data.pop("content_sha256")
        data["schema_version"] = "1.2"

    _edit(run, unsealed_and_older, reseal=False)
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "- verdict: passport says 'VALID', the raw logs and the rules give 'INVALID'" \
        in result.stdout
    assert "- passport.json: schema_version 1.2 is older than its own records: a signature" in result.stdout
    gate = run_cli("gate", str(run), "--require", "verdict == VALID")
    assert gate.returncode == 2 and "refused as a downgrade" in gate.stderr

    def every_record_older(data: dict[str, Any]) -> None:  # as a 1.2 passport was: unsigned, rules and layout 1
        data.pop("signature")
        data["protocol"]["harness"]["libraries"] = {k: v for k, v in data["protocol"]["harness"]["libraries"].items()
                                                    if not k.startswith("passport.")}
        data["validity"]["rules"] = [r for r in data["validity"]["rules"]
                                     if r["name"] not in ("server_counters", "model_listed", "client_calibration")]

    _edit(run, every_record_older, reseal=False)
    gate = run_cli("gate", str(run), "--require", "verdict == VALID")
    assert gate.returncode == 2 and "it is unsigned (schema 1.2): pass --allow-unsigned" in gate.stderr
    # told it is an old one, the gate still re-derives the verdict from the raw files first
    gate = run_cli("gate", str(run), "--require", "verdict == VALID", "--allow-unsigned")
    assert gate.returncode == 2, gate.stdout
    assert "verdict: passport says 'VALID', the raw logs and the rules give 'INVALID'" in gate.stderr


def test_an_edited_report_or_identity_field_is_caught(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    run = _run(simulator, write_spec, tmp_path / "out")
    report = run / "report.md"
    report.write_text(report.read_text().replace("Result is: VALID", "Result is: VALID (certified)"))
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "- report.md: sha256 differs from the passport" in result.stdout

    def relist(data: dict[str, Any]) -> None:  # the forger lists the edited report's hash too
        data["files"]["report.md"]["sha256"] = hashlib.sha256(report.read_bytes()).hexdigest()
        data["files"]["report.md"]["bytes"] = report.stat().st_size

    _edit(run, relist, reseal=True)
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "- report.md: differs from a fresh rendering" in result.stdout

    other = _run(simulator, write_spec, tmp_path / "other")

    def rename(data: dict[str, Any]) -> None:
        data["identity"]["engine.name"]["value"] = "vllm"

    _edit(other, rename, reseal=True)
    result = run_cli("verify", str(other))
    assert result.returncode == 1
    assert ("- identity.engine.name: the passport says 'vllm' via '/v1/models owned_by', the recorded probes give "
            "'passport-simulator'") in result.stdout


@fault("a damaged run folder (missing or truncated files)",
       "verify, gate, recover: exit 2 with one message; nothing modified")
def test_damaged_folders_are_one_clear_input_error_and_nothing_is_modified(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    run = _run(simulator, write_spec, tmp_path / "out")
    data = (run / "requests.parquet").read_bytes()
    (run / "requests.parquet").write_bytes(data[: len(data) // 2])
    before = _folder_hashes(run)
    result = run_cli("verify", str(run))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("ERROR: ") and "requests.parquet is not a readable Parquet file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and _folder_hashes(run) == before

    (run / "passport.json").write_text(json.dumps({"schema_version": "7.0"}))
    result = run_cli("verify", str(run))
    assert result.returncode == 2 and "schema_version '7.0' is not supported by this passport" in result.stderr
    for command in (["verify"], ["gate", "--require", "verdict == VALID"], ["recover"]):
        result = run_cli(command[0], str(tmp_path), *command[1:])
        assert result.returncode == 2 and result.stderr.startswith("ERROR: ") and result.stdout == "", command


@fault("a run killed mid-way", "`passport recover RUN` writes an INCOMPLETE passport with every recorded request")
def test_a_killed_run_is_recovered_with_every_recorded_request(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "5")
    proc = _start_long_run(url, write_spec, tmp_path / "out")
    run = _wait_for_rows(tmp_path / "out")
    time.sleep(2.5)  # another flush of parts
    proc.kill()
    proc.communicate(timeout=10)
    parts = sum(pq.read_metadata(p).num_rows for p in (run / "requests.parts").glob("part-*.parquet"))
    assert parts > 0 and not (run / "passport.json").exists()
    assert "passport recover" in run_cli("verify", str(run)).stderr  # the way out is named

    result = run_cli("recover", str(run))
    assert result.returncode == 1, result.stderr
    assert f"(recovered; {parts} requests kept)" in result.stdout and "Result is: INCOMPLETE" in result.stdout
    passport = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["complete"] is False and "recovered at" in passport["validity"]["incomplete_reason"]
    assert pq.read_table(run / "requests.parquet").num_rows == parts
    assert not (run / "passport.draft.json").exists() and not (run / "requests.parts").exists()
    assert run_cli("verify", str(run)).returncode == 0
    gate = run_cli("gate", str(run), "--require", "verdict == INCOMPLETE")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    again = run_cli("recover", str(run))
    assert again.returncode == 2 and "already has its passport.json" in again.stderr


@fault("a second Ctrl-C while stopping", "still an INCOMPLETE passport of everything recorded")
def test_a_second_ctrl_c_still_writes_the_passport_of_what_was_recorded(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "5")
    proc = _start_long_run(url, write_spec, tmp_path / "out")
    run = _wait_for_rows(tmp_path / "out")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    passport = json.loads((run / "passport.json").read_text())
    kept = pq.read_table(run / "requests.parquet").num_rows
    assert passport["verdict"] == "INCOMPLETE" and kept > 0
    assert f"{kept} requests recorded and kept" in stderr and "Result is: INCOMPLETE" in stdout
    assert "nothing was measured" not in stderr
    assert run_cli("verify", str(run)).returncode == 0
    # the requests in flight when it stopped were cut by the stop, not failed by anyone: their own
    # outcome, counted apart, and not the error_rate's failures on top of run_complete's INCOMPLETE
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    cut = int((measured.outcome == "interrupted").sum())
    assert cut >= 1 and passport["validity"]["counts"]["interrupted"] == cut
    assert not ((requests.outcome == "client_error") & (requests.error == "run interrupted")).any()
    error_rate = next(r for r in passport["validity"]["rules"] if r["name"] == "error_rate")
    assert error_rate["status"] == "PASS" and f"{cut} in flight when the run was stopped" in error_rate["message"]


def test_the_workloads_largest_need_is_declared_before_timing_and_checked_against_the_capacity(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    """8 prompt + 8 output tokens need 16 per sequence; a declared capacity of 12 cannot hold them
    (the rule's inputs come from declared.json, written before the first timed request)."""
    run = _run(simulator, write_spec, tmp_path / "out", identity={"capacity.context_per_sequence": 12})
    declared = json.loads((run / "declared.json").read_text())
    assert declared["workload"] == {"context_needed_tokens": 16}
    assert declared["capacity"] == {"context_tokens_per_sequence": 12,
                                    "source": "declared: identity.capacity.context_per_sequence"}
    passport = json.loads((run / "passport.json").read_text())
    rule = next(r for r in passport["validity"]["rules"] if r["name"] == "context_capacity")
    assert (rule["status"], rule["measured"], rule["threshold"]) == ("FAIL", 16, 12)
    assert passport["verdict"] == "INVALID" and run_cli("verify", str(run)).returncode == 0


@fault("a forger who edits passport.json, recomputes its content hash and signs it with a key of their own",
       "verify: the old signature fails, a new one names its key; `verify --key` / `gate --key` with the run's key "
       "refuse it; a removed signature is caught from schema 1.4 on")
def test_the_signature_tells_whose_key_sealed_the_passport(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    import base64

    from passport.audit import sign_content

    honest = {"PASSPORT_KEY_DIR": str(tmp_path / "honest-keys")}
    url = simulator("--ttft-ms", "3", "--itl-ms", "1")
    path = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 12}}))
    assert run_cli("run", str(path), "--out", str(tmp_path / "out"), "--quiet", env=honest).returncode == 0
    run = only_run_dir(tmp_path / "out")
    signature = json.loads((run / "passport.json").read_text())["signature"]
    key = signature["fingerprint"]
    key_file = tmp_path / "honest-keys" / "signing-key.ed25519"
    assert signature["key"] == "local" and key_file.stat().st_mode & 0o077 == 0  # its owner's eyes only
    assert run_cli("verify", str(run), "--key", key).returncode == 0

    forger_key = base64.b64encode(bytes(range(32))).decode()
    data = json.loads((run / "passport.json").read_text())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PASSPORT_SIGNING_KEY", forger_key)
        forged = sign_content(data["content_sha256"])
    # the run's signature passed off as the forger's key's (or an edit resealed under the old one)
    _edit(run, lambda d: d["signature"].update(public_key=forged["public_key"], fingerprint=forged["fingerprint"]),
          reseal=False)
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "its signature is not a valid signature of its content hash" in result.stdout
    data["signature"] = forged  # the forger signs with a key of their own
    (run / "passport.json").write_text(json.dumps(data))
    assert data["signature"]["key"] == "environment" and data["signature"]["fingerprint"] != key
    plain = run_cli("verify", str(run))  # a valid signature, by somebody: verify names whose
    assert plain.returncode == 0 and f"signature ({data['signature']['fingerprint']})" in plain.stdout
    trusted = run_cli("verify", str(run), "--key", key)
    assert trusted.returncode == 1 and f"not by {key}" in trusted.stdout
    gate = run_cli("gate", str(run), "--key", key, "--require", "verdict == VALID")
    assert gate.returncode == 2 and f"not by {key}" in gate.stderr

    _edit(run, lambda data: data.pop("signature"), reseal=False)  # the hash leaves the signature out
    result = run_cli("verify", str(run))
    assert result.returncode == 1 and "unsigned, though every passport of its schema version is signed" in result.stdout
