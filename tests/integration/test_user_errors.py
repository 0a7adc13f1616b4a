"""What users met as tracebacks, each now a message that says what and how to fix it.

A bad signing key (from the environment, a damaged key file, a key folder that cannot be made) is
found before anything is sent; the ledger and history refuse what they cannot do with a reason;
a damaged calibration cache is measured again, never believed; the simulator says why it cannot
listen; and a defect in any command is a short message with exit 3, its traceback in a log file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.simulator import spawn
from tests.conftest import LENIENT_FLAGS, REPO, closed_port, only_run_dir, run_cli
from tests.faults import fault

FLAGS = ("--concurrency", "2", "--num-prompts", "6", "--input-len", "8", "--output-len", "4", "--set", "canaries=none",
         "--set", "workload.tokenizer=none", "--quiet", *LENIENT_FLAGS)


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@fault("a malformed PASSPORT_SIGNING_KEY, a damaged key file or a key folder that cannot be made",
       "exit 2 before anything is sent (the key is checked first), naming the key and the fix; no run folder")
@pytest.mark.parametrize("case", ["env", "file", "folder"])
def test_a_bad_signing_key_is_refused_before_anything_is_sent(tmp_path: Path, case: str) -> None:
    env = {"PASSPORT_KEY_DIR": str(tmp_path / "keys")}
    if case == "env":
        env["PASSPORT_SIGNING_KEY"] = "not base64!"
        said = "PASSPORT_SIGNING_KEY is not the base64 of a 32-byte ed25519 private key"
    elif case == "file":
        (tmp_path / "keys").mkdir()
        (tmp_path / "keys" / "signing-key.ed25519").write_text("damaged\n")
        said = f"the signing key file {tmp_path / 'keys' / 'signing-key.ed25519'} is not the base64"
    else:
        (tmp_path / "keys").write_text("a file where the key folder should be")
        said = f"this machine's signing key {tmp_path / 'keys' / 'signing-key.ed25519'} cannot be read or made"
    # a closed port: had anything been sent first, the error would be the unreachable endpoint's
    result = run_cli("run", "--endpoint", f"http://127.0.0.1:{closed_port()}/v1", *FLAGS, "--out",
                     str(tmp_path / "out"), env=env)
    assert result.returncode == 2 and result.stderr.startswith(f"ERROR: {said}"), result.stderr
    _no_traceback(result)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A VALID run without canaries, against the simulated engine."""
    out = tmp_path_factory.mktemp("one-run")
    process, url = spawn("--ttft-ms", "1", "--itl-ms", "1")
    try:
        result = run_cli("run", "--endpoint", url, *FLAGS, "--out", str(out))
        assert result.returncode == 0, result.stderr
    finally:
        process.terminate()
        process.wait(10)
    yield only_run_dir(out)


@fault("a ledger holding a run without canaries, read by plain DuckDB 2", "every table reads: the run's canary_cases "
       "file has its columns and no rows")
@pytest.mark.slow
def test_a_run_without_canaries_leaves_a_ledger_duckdb_reads(one_run: Path, tmp_path: Path) -> None:
    import duckdb

    ledger = tmp_path / "ledger"
    assert run_cli("ledger", "add", str(one_run), "--ledger", str(ledger)).returncode == 0
    (cases,) = (ledger / "canary_cases").glob("date=*/*.parquet")
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{cases}')").fetchall() == [(0,)]
    assert "case_id" in [d[0] for d in duckdb.sql(f"SELECT * FROM read_parquet('{cases}')").description]
    for sql in ("SELECT count(*) FROM canary_cases", "SELECT run_id FROM runs"):
        result = run_cli("ledger", "query", sql, "--ledger", str(ledger))
        assert result.returncode == 0, result.stderr
    history = run_cli("history", "--ledger", str(ledger), "--metric", "ttft.any.p50", "--html",
                      str(tmp_path / "h.html"))
    assert history.returncode == 0 and (tmp_path / "h.html").is_file(), history.stderr


@fault("`ledger query \"\"`, `history --html` into a missing folder, a ledger table folder that is a file",
       "exit 2 with what to do; a bad ledger takes no row")
@pytest.mark.slow
def test_the_ledger_refuses_what_it_cannot_do_with_a_reason(one_run: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    assert run_cli("ledger", "add", str(one_run), "--ledger", str(ledger)).returncode == 0
    empty = run_cli("ledger", "query", "  ", "--ledger", str(ledger))
    assert empty.returncode == 2 and empty.stderr.startswith("ERROR: the query is empty"), empty.stderr
    missing = tmp_path / "no" / "such" / "h.html"
    history = run_cli("history", "--ledger", str(ledger), "--metric", "ttft.any.p50", "--html", str(missing))
    assert history.returncode == 2, history.stderr
    assert history.stderr.startswith(f"ERROR: the trend plot cannot be written to {missing} (No such file"), \
        history.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "canary_cases").write_text("a file where a table folder should be")
    added = run_cli("ledger", "add", str(one_run), "--ledger", str(broken))
    assert added.returncode == 2, added.stderr
    assert added.stderr.startswith(f"ERROR: {broken / 'canary_cases'} is not a folder"), added.stderr
    assert not list(broken.rglob("*.parquet"))  # refused before any row was written
    for result in (empty, history, added):
        _no_traceback(result)


_FULL = """set -e
mount -t tmpfs -o size=64k tmpfs "$MNT"
head -c 1000000 /dev/zero > "$MNT/fill" 2>/dev/null || true
"$PY" -m passport.cli history --ledger "$LEDGER" --metric ttft.any.p50 --html "$MNT/h.html" > "$OUT/stdout" \
  2> "$OUT/stderr" || echo $? > "$OUT/exit"
"""


@fault("`history --html` onto a full disk", "exit 2 naming the file and the cause; no half-written file left")
@pytest.mark.slow
def test_history_onto_a_full_disk_says_so(one_run: Path, tmp_path: Path) -> None:
    from tests.integration.test_hostile import _in_mount_namespace

    assert _in_mount_namespace(), "unshare -rm is needed to give history a small disk"
    ledger, mnt, out = tmp_path / "ledger", tmp_path / "mnt", tmp_path / "out"
    for folder in (mnt, out):
        folder.mkdir()
    assert run_cli("ledger", "add", str(one_run), "--ledger", str(ledger)).returncode == 0
    env = {**os.environ, "MNT": str(mnt), "OUT": str(out), "LEDGER": str(ledger), "PY": sys.executable}
    subprocess.run(["unshare", "-rm", "sh", "-c", _FULL], env=env, cwd=REPO, timeout=120, check=True)
    stderr = (out / "stderr").read_text()
    assert (out / "exit").read_text().strip() == "2", stderr
    assert stderr.startswith(f"ERROR: the trend plot cannot be written to {mnt / 'h.html'} (No space left on device)")
    assert "Traceback" not in stderr


@fault("a calibration cache edited or damaged by hand (a string, a list, a negative or absurd cost)",
       "measured again, never believed; the run goes on")
@pytest.mark.parametrize("damage", [
    "not json", '"a string"', "[1, 2]", {"cpu_us_per_request": "fast"}, {"cpu_us_per_request": -5.0},
    {"cpu_us_per_request": 1e-9}, {"pacing_cpu_share": 7.0}, {"points": "none"}, {"cpu_us_per_chunk": None},
], ids=["text", "string", "list", "string-cost", "negative", "absurd", "share", "points", "null"])
def test_a_damaged_calibration_cache_is_not_believed(damage: str | dict[str, object], tmp_path: Path) -> None:
    from passport.run._calibration import CALIBRATION_VERSION, _cached, utc_now

    good = {"cpu_us_per_request": 300.0, "cpu_us_per_chunk": 6.0, "pacing_cpu_share": 0.35, "fixed_cpu_share": 0.02,
            "measured_utc": utc_now(), "key": "k", "how": "measured", "points": [], "version": CALIBRATION_VERSION}
    path = tmp_path / "client-k.json"
    path.write_text(json.dumps(good))
    assert _cached(path, "k") is not None  # the undamaged file is read: the damage is what is refused
    path.write_text(damage if isinstance(damage, str) else json.dumps({**good, **damage}))
    assert _cached(path, "k") is None


@fault("the simulator started on a port already taken", "one line saying the port is taken and what to do; exit 1")
def test_the_simulator_on_a_taken_port_says_so() -> None:
    process, url = spawn()
    try:
        port = url.split(":")[2].split("/")[0]
        second = subprocess.run([sys.executable, "-m", "harness.simulator", "--port", port], capture_output=True,
                                text=True, timeout=30)
    finally:
        process.terminate()
        process.wait(10)
    assert second.returncode == 1 and "Traceback" not in second.stderr
    assert second.stderr.startswith(f"python -m harness.simulator: cannot listen on 127.0.0.1:{port}")
    assert "choose another --port" in second.stderr


def test_the_simulator_says_when_it_is_ready() -> None:
    from tests.conftest import free_port

    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port)],
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith(f"simulated engine serving http://127.0.0.1:{port}/v1")
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


@fault("a defect in a command that reads run folders (verify, gate, show, ...)",
       "exit 3, one message naming the command and the error, the traceback in a log under the temporary folder")
@pytest.mark.slow
def test_a_defect_in_a_reading_command_is_a_message_and_a_log(one_run: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tests.inject", "passport._verify:verify_run", "--", "verify",
                             str(one_run)], capture_output=True, text=True, timeout=120, cwd=REPO,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 3, result.stderr
    _no_traceback(result)
    lines = result.stderr.splitlines()
    assert lines[0] == "ERROR: passport verify failed: RuntimeError: injected failure"
    (log,) = (tmp_path / "passport-errors").glob("verify-*.log")
    assert f"the full traceback is in {log}" in result.stderr and "RuntimeError: injected failure" in log.read_text()
    assert not (one_run / "error.log").exists()  # a sealed run folder is never written to


def test_a_damaged_draft_is_refused_by_recover(tmp_path: Path) -> None:
    (tmp_path / "passport.draft.json").write_text('{"run_id": ')
    result = run_cli("recover", str(tmp_path))
    assert result.returncode == 2 and "cannot be read as a passport draft" in result.stderr, result.stderr
    _no_traceback(result)


def _forge(run: Path, to: Path, **changes: str) -> Path:
    """A copy of `run` whose passport says `changes`, its reports re-rendered, resealed and signed
    with this machine's key, as passport itself writes one: a forgery verify accepts, since its
    signer is the one who forged it."""
    import shutil

    from passport.model import Passport
    from passport.run._assemble import write_passport

    shutil.copytree(run, to)
    passport = json.loads((to / "passport.json").read_text())
    write_passport(to, Passport.model_validate({**passport, **changes}))
    return to


@fault("a signed passport whose run_id or created_utc names a path (`../../x`, an absolute path, a date that is not "
       "one), or a second passport under a run_id the ledger holds",
       "`ledger add` refuses it (exit 1), naming the field; nothing is written outside the ledger or twice")
@pytest.mark.slow
def test_the_ledger_takes_no_path_from_a_passport_and_one_content_per_run(one_run: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    cases = {"traversal": {"run_id": "../../planted"}, "absolute": {"run_id": str(tmp_path / "planted-abs")},
             "date": {"created_utc": "../../../2099"}}
    for name, changes in cases.items():
        forged = _forge(one_run, tmp_path / name, **changes)
        assert run_cli("verify", str(forged)).returncode == 0  # resealed and signed: verify accepts it
        added = run_cli("ledger", "add", str(forged), "--ledger", str(ledger))
        assert added.returncode == 1 and "refused" in added.stdout, (name, added.stdout, added.stderr)
        assert "is not a plain identifier" in added.stdout or "does not start with a date" in added.stdout
    assert not list(tmp_path.rglob("planted*"))
    assert not list(ledger.rglob("*.parquet"))
    assert run_cli("ledger", "add", str(one_run), "--ledger", str(ledger)).returncode == 0
    twin = _forge(one_run, tmp_path / "twin", name="another-content")
    refused = run_cli("ledger", "add", str(twin), "--ledger", str(ledger))
    run_id = json.loads((one_run / "passport.json").read_text())["run_id"]
    assert refused.returncode == 1 and f"run {run_id} is already in the ledger with other content" in refused.stdout
    assert len(list((ledger / "runs").rglob("*.parquet"))) == 1


@fault("`ledger query` SQL that reads or writes a host file (read_csv('/etc/passwd'), COPY ... TO, ATTACH, INSTALL) "
       "or returns millions of rows", "exit 2 naming the refusal: the connection reaches only the ledger's folder, its "
       "settings locked; rows beyond --limit (1000) are counted as left out, never printed")
@pytest.mark.slow
def test_ledger_query_reads_only_the_ledger_and_caps_its_rows(one_run: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    assert run_cli("ledger", "add", str(one_run), "--ledger", str(ledger)).returncode == 0
    planted = tmp_path / "planted.csv"
    for sql in ("SELECT * FROM read_csv('/etc/passwd')", f"COPY (SELECT 1) TO '{planted}'",
                "SET enable_external_access = true", f"ATTACH '{tmp_path / 'x.duckdb'}'"):
        refused = run_cli("ledger", "query", sql, "--ledger", str(ledger))
        assert refused.returncode == 2 and refused.stderr.startswith("ERROR: "), (sql, refused.stderr)
        _no_traceback(refused)
    assert not planted.exists() and not (tmp_path / "x.duckdb").exists()
    capped = run_cli("ledger", "query", "SELECT * FROM range(5000)", "--ledger", str(ledger), "--limit", "3")
    assert capped.returncode == 0 and capped.stdout.splitlines()[-1] == "(3 rows)", capped.stdout
    assert "more than 3 rows: the first 3 are shown" in capped.stderr
    linked = tmp_path / "linked"
    linked.symlink_to(ledger)  # a ledger reached through a link its user chose still reads
    rows = run_cli("ledger", "query", "SELECT count(*) AS n FROM runs", "--ledger", str(linked))
    assert rows.returncode == 0 and rows.stdout.splitlines()[-2].strip() == "1", rows.stdout + rows.stderr


@fault("requests.parquet's first_token_ns edited (every TTFT a third shorter), every figure, rule and hash "
       "recomputed to match", "verify names the requests whose first token time is not their first token-bearing "
       "chunk's arrival")
@pytest.mark.slow
def test_a_forged_ttft_column_is_caught_against_the_chunks(one_run: Path, tmp_path: Path) -> None:
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.forgery import rederive_and_reseal

    run = tmp_path / "forged"
    shutil.copytree(one_run, run)
    table = pq.read_table(run / "requests.parquet")
    sent, first = table.column("sent_ns").to_pylist(), table.column("first_token_ns").to_pylist()
    shorter = [None if f is None else s + (f - s) * 2 // 3 for s, f in zip(sent, first)]
    index = table.column_names.index("first_token_ns")
    table = table.set_column(index, "first_token_ns", pa.array(shorter, table.schema.field(index).type))
    pq.write_table(table, run / "requests.parquet")
    forged = rederive_and_reseal(run)
    original = json.loads((one_run / "passport.json").read_text())
    assert forged["results"]["metrics"]["ttft.any"]["p50"] < original["results"]["metrics"]["ttft.any"]["p50"]
    result = run_cli("verify", str(run))
    assert result.returncode == 1, result.stdout
    assert "requests' first or last token time is not their first or last token-bearing chunk's arrival" \
        in result.stdout
    assert run_cli("verify", str(one_run)).returncode == 0  # the run it was forged from is untouched and verifies
