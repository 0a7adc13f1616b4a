"""Hostile endpoints and hostile machines, each met through the CLI as a user meets it.

Ground truth is the simulator's script (which request gets which fault), the spec's own limits,
files the tests plant and count, and a listening socket that counts connections; never the
harness's own report of itself.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_CLIENT, REPO, SimFactory, only_run_dir, run_cli
from tests.faults import fault

WriteSpec = Callable[..., Path]
SMALL = {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
         "output_tokens": {"dist": "fixed", "value": 16}}


def _spec(url: str, load: dict[str, Any], **extra: Any) -> dict[str, Any]:
    extra["validity"] = {**LENIENT_CLIENT, **extra.get("validity", {})}
    extra.setdefault("canaries", "none")
    return {"name": "hostile", "endpoint": {"base_url": url}, "workload": SMALL, "load": load, **extra}


def _requests(run: Path) -> Any:
    return pq.read_table(run / "requests.parquet").to_pandas().sort_values("request_id").reset_index(drop=True)


def _fault_of(k: int, faults: dict[str, int]) -> str | None:
    """The simulator's rule: request k (1-based) gets the first listed fault whose period divides k."""
    return next((kind for kind, every in faults.items() if k % every == 0), None)


# -- what an endpoint sends is bounded ----------------------------------------------------------


@fault("a stream without line ends (bytes forever)", "ends that request as `stream_error` at `limits.bytes_per_event`; "
       "the run goes on")
@fault("one event larger than any engine sends", "ends that request as `stream_error` (\"an event exceeded N bytes\"), "
       "what came before it kept")
@pytest.mark.slow
@fault("a header block that never ends", "ends that request as `stream_error` at `limits.header_bytes`")
def test_hostile_streams_end_their_own_request_at_a_limit_and_the_run_goes_on(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    faults = {"flood": 5, "huge_event": 7, "huge_headers": 11}
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--huge-event-mib", "2",
                    *[a for kind, every in faults.items() for a in ("--fault", f"{kind}:{every}")])
    n = 40
    limits = {"bytes_per_event": 1 << 20, "bytes_per_response": 4 << 20, "header_bytes": 16 << 10}
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": n}}, limits=limits,
                            validity={"max_error_rate": 1.0}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    requests = _requests(only_run_dir(tmp_path / "out"))
    assert len(requests) == n
    expected_error = {"flood": "an event exceeded 1048576 bytes", "huge_event": "an event exceeded 1048576 bytes",
                      "huge_headers": "the response headers exceeded 16384 bytes"}
    for k, row in enumerate(requests.itertuples(), start=1):
        kind = _fault_of(k, faults)
        if kind is None:
            assert row.outcome == "ok", (k, row.outcome, row.error)
        else:
            assert row.outcome == "stream_error" and row.error == expected_error[kind], (k, kind, row.error)


@fault("more events or bytes in one answer than declared", "`stream_error` naming `limits.events_per_response` or "
       "`limits.bytes_per_response`")
@pytest.mark.parametrize("limits, error", [
    ({"events_per_response": 10}, "the response exceeded 10 events"),
    ({"bytes_per_response": 1024}, "the response exceeded 1024 bytes"),
])
@pytest.mark.slow
def test_an_answer_over_a_declared_size_ends_as_a_stream_error(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, limits: dict[str, int], error: str
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 6}}, limits=limits,
                            validity={"max_error_rate": 1.0}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 1 and "FAIL: min_completed_requests: 0 measured requests succeeded" in result.stdout
    requests = _requests(only_run_dir(tmp_path / "out"))
    assert list(requests.outcome) == ["stream_error"] * 6 and set(requests.error) == {error}


@fault("a probe answered with a body that never ends", "the control-plane call stops at `timeouts.control_s` or "
       "`limits.control_bytes`: exit 2 with the reason, nothing timed, no run folder")
@pytest.mark.parametrize("bounds, said", [
    ({"timeouts": {"control_s": 1}}, "did not finish its answer within 1.0 s (timeouts.control_s)"),
    ({"limits": {"control_bytes": 65536}}, "answered more than 65536 bytes (limits.control_bytes)"),
])
def test_an_endless_probe_answer_is_bounded_in_time_and_size(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, bounds: dict[str, Any], said: str
) -> None:
    url = simulator("--endless-path", "/v1/models")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 4}}, **bounds))
    start = time.monotonic()
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet", timeout_s=60)
    assert result.returncode == 2 and time.monotonic() - start < 30
    assert result.stderr.startswith("ERROR: ") and said in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@fault("a /metrics endpoint whose answer never ends", "each scrape stops at `timeouts.control_s` (at most 2 s) and "
       "is counted as `scrape_failed:metrics` in telemetry.parquet; the timed requests are untouched")
@pytest.mark.slow
def test_an_endless_metrics_answer_costs_scrapes_not_the_run(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--endless-path", "/metrics")
    metrics = url.removesuffix("/v1") + "/metrics"
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"duration_s": 3}},
                            timeouts={"control_s": 0.3}, telemetry={"metrics": metrics, "interval_s": 0.5}))
    start = time.monotonic()
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet", timeout_s=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - start < 30
    run = only_run_dir(tmp_path / "out")
    assert (_requests(run).outcome == "ok").all()
    telemetry = pq.read_table(run / "telemetry.parquet").to_pandas()
    failed = telemetry[telemetry.name == "scrape_failed:metrics"]
    # a 3 s window, a scrape every 0.5 s, each cut at 0.3 s (not the 2 s a scrape may take at most)
    assert 4 <= len(failed) <= 7


# -- secrets --------------------------------------------------------------------------------------

PLANTED_KEY = "sk-planted-7f3a9c1e5b"
PLANTED_PASSWORD = "pw-planted-42d8e61a"


def _secret_forms() -> list[bytes]:
    """Every form the planted secrets could take on disk: as given, and as the headers carry them."""
    basic = base64.b64encode(f"ada:{PLANTED_PASSWORD}".encode())
    return [PLANTED_KEY.encode(), PLANTED_PASSWORD.encode(), basic, basic[3:-3], PLANTED_KEY[3:-3].encode()]


def _files_holding(folder: Path, forms: list[bytes]) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and any(f in p.read_bytes() for f in forms)]


@fault("an API key in the environment, a 401 body that echoes it", "masked (`***`) in requests.parquet `error`, the "
       "passport, declared.json and stderr")
@fault("credentials in the base URL (`user:key@host`)", "sent as Basic auth, stripped from every URL written or "
       "printed")
@fault("a server echoing a cut of the key or of the Basic token, without its scheme", "the run of characters holding "
       "12 or more of the secret's (or its base64's) is masked whole")
@pytest.mark.slow
@pytest.mark.parametrize("how", ["api_key_env", "userinfo"])
@pytest.mark.parametrize("echo", ["echo_auth", "echo_slice"])
def test_a_planted_key_lands_nowhere(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, how: str,
                                     echo: str) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--fault", f"{echo}:3")
    endpoint: dict[str, Any] = {"base_url": url}
    env = {}
    if how == "api_key_env":
        endpoint["api_key_env"] = "PASSPORT_TEST_KEY"
        env["PASSPORT_TEST_KEY"] = PLANTED_KEY
    else:
        endpoint["base_url"] = url.replace("http://", f"http://ada:{PLANTED_PASSWORD}@")
    data = _spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 12}},
                 validity={"max_error_rate": 1.0})
    data["endpoint"] = endpoint
    result = run_cli("run", str(write_spec(data)), "--out", str(tmp_path / "out"), env=env)
    assert result.returncode == 0, result.stderr
    run = only_run_dir(tmp_path / "out")
    requests = _requests(run)
    echoed = requests[requests.http_status == 401]
    said = ("bad key in Authorization: ***" if echo == "echo_auth" else "rejected credential ...***...")
    assert len(echoed) == 4 and set(echoed.error) == {
        f'HTTP 401: {{"error":{{"message":"{said}","code":401}}}}'}, set(echoed.error)
    forms = _secret_forms()
    assert _files_holding(run, forms) == []
    assert not any(f.decode() in result.stdout + result.stderr for f in forms)


# -- bad specs ------------------------------------------------------------------------------------


BAD_SPECS: list[tuple[str, bytes, str]] = [
    ("binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is not UTF-8 text"),
    ("utf16", "name: x\n".encode("utf-16"), "is UTF-16 text; save it as UTF-8"),
    ("port", b"endpoint: {base_url: 'http://127.0.0.1:70000/v1'}\nload: {pattern: closed, concurrency: 1}\n",
     "its port must be a number from 1 to 65535"),
    ("requests1e12", b"endpoint: {base_url: 'http://h:1/v1'}\n"
                     b"load: {pattern: closed, concurrency: 1, measure: {requests: 1e12}}\n", "load.measure.requests"),
    ("requests_huge", b"endpoint: {base_url: 'http://h:1/v1'}\n"
                      b"load: {pattern: closed, concurrency: 1, measure: {requests: 1000000000000}}\n",
     "load.measure.requests"),
    ("concurrency1e9", b"endpoint: {base_url: 'http://h:1/v1'}\nload: {pattern: closed, concurrency: 1000000000}\n",
     "load.concurrency"),
    ("duplicate", b"endpoint: {base_url: 'http://h:1/v1'}\nload: {pattern: closed, concurrency: 1}\n"
                  b"load: {pattern: closed, concurrency: 2}\n", "key 'load' appears twice"),
    ("bool", b"endpoint: {base_url: 'http://h:1/v1'}\nload: {pattern: closed, concurrency: true}\n",
     "load.concurrency"),
    ("inf", b"endpoint: {base_url: 'http://h:1/v1'}\nload: {pattern: constant, rate_per_s: .inf}\n",
     "load.rate_per_s"),
    ("nan", b"endpoint: {base_url: 'http://h:1/v1'}\nload: {pattern: constant, rate_per_s: .nan}\n",
     "load.rate_per_s"),
    ("schedule_memory", b"endpoint: {base_url: 'http://h:1/v1'}\n"
                        b"load: {pattern: constant, rate_per_s: 100000, measure: {duration_s: 604800}}\n", "GiB"),
]


@fault("a bad spec (binary or UTF-16 file, port out of range, counts of 1e12, bools for ints, inf/nan, duplicate "
       "keys, a schedule too big for memory)", "exit 2 with one message naming the field and the fix; no traceback, "
       "no run folder, nothing sent")
@pytest.mark.parametrize("name, content, said", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_a_bad_spec_is_one_clear_message(tmp_path: Path, name: str, content: bytes, said: str) -> None:
    spec = tmp_path / f"{name}.yaml"
    spec.write_bytes(content)
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ERROR: ") and said in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (tmp_path / "out").exists()


@fault("a spec (or the canary suite it names) that is no file or never ends: /dev/zero, /dev/urandom, a FIFO, "
       "100 MB, a nine-level alias bomb, nesting 100,000 deep", "exit 2 in under a second with what it is and the "
       "limit (regular files of at most 4 MiB, aliases expanding to at most 1,000,000 values); memory stays flat, "
       "nothing waits on the FIFO")
@pytest.mark.parametrize("kind", ["zero", "urandom", "fifo", "huge", "alias_bomb", "deep", "suite_bomb"])
def test_a_spec_that_never_ends_or_explodes_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    if kind in ("zero", "urandom"):
        spec, said = Path(f"/dev/{kind}"), "is a device, not a file"
    elif kind == "fifo":
        spec, said = tmp_path / "spec.fifo", "is a FIFO, not a file"
        os.mkfifo(spec)
    elif kind == "huge":
        spec, said = tmp_path / "huge.yaml", "is 104,857,600 bytes; a spec is at most 4,194,304"
        with spec.open("wb") as f:
            f.truncate(100 * 2**20)
    elif kind == "alias_bomb":
        spec, said = tmp_path / "bomb.yaml", "its aliases expand to over 1,000,000 values"
        spec.write_text("\n".join(bomb) + "\n")
    elif kind == "suite_bomb":  # the spec is fine; the canary suite it names is the bomb
        (tmp_path / "suite.yaml").write_text("\n".join(bomb) + "\n")
        spec, said = tmp_path / "spec.yaml", "its aliases expand to over 1,000,000 values"
        spec.write_text(f"endpoint: {{base_url: 'http://127.0.0.1:9/v1'}}\nload: {{pattern: closed, concurrency: 1}}\n"
                        f"canaries: {tmp_path / 'suite.yaml'}\n")
    else:
        spec, said = tmp_path / "deep.yaml", "nests deeper than a YAML document may"
        spec.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    started = time.monotonic()
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), timeout_s=30)
    elapsed_s = time.monotonic() - started
    assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
    assert elapsed_s < 10, elapsed_s  # a second on a quiet machine (README); bounded, not hanging, on a busy one


# -- the machine: an unusable output folder, a full disk ------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[str, list[object]]]:
    """A /v1 URL whose server only counts the connections it is offered."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    accepted: list[object] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1", accepted
    done.set()
    thread.join()
    server.close()


def _in_mount_namespace() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rm", "true"], capture_output=True).returncode == 0


@fault("an unusable --out (a regular file, a kernel pseudo-filesystem, a read-only mount)", "exit 2 before anything is "
       "sent")
@pytest.mark.parametrize("where", ["file", "proc", "readonly"])
def test_an_unwritable_out_folder_is_refused_before_anything_is_sent(
    write_spec: WriteSpec, tmp_path: Path, listener: tuple[str, list[object]], where: str
) -> None:
    url, accepted = listener
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 4}}))
    command = [sys.executable, "-m", "passport.cli", "run", str(spec), "--out"]
    if where == "file":
        (tmp_path / "a-file").write_text("x")
        command.append(str(tmp_path / "a-file"))
    elif where == "proc":
        command.append("/proc/passport-out")
    else:
        assert _in_mount_namespace(), "unshare -rm is needed to mount a read-only folder"
        target = tmp_path / "ro"
        target.mkdir()
        command = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o ro tmpfs {target} && exec "$@"', "sh",
                   *command, str(target)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ERROR: ") and "pass --out with a writable folder" in result.stderr
    assert "Traceback" not in result.stderr
    assert accepted == []


# Inside a private mount namespace: a small tmpfs as --out, the run started, the disk filled by
# another writer once timing has begun, the run's exit awaited, the space freed, then the folder
# copied out (the tmpfs goes with the namespace).
_FILL = r"""
set -u
mount -t tmpfs -o size="$SIZE" tmpfs "$MNT"
"$PY" -m passport.cli run "$SPEC" --out "$MNT" --quiet > "$OUT/stdout" 2> "$OUT/stderr" &
pid=$!
if [ "$FILL" = 1 ]; then
  # once the timed phase has flushed its first rows (part 0 is the empty one the writer opens
  # with; a fixed 2.5 s after the draft fell before any on a busy machine, where canaries and
  # calibration take longer, and the run rightly kept 0 requests)
  until ls "$MNT"/*/requests.parts/part-000001.parquet >/dev/null 2>&1 || ! kill -0 $pid 2>/dev/null; do
    sleep 0.05
  done
  head -c 1G /dev/zero > "$MNT/filler" 2>/dev/null
fi
wait $pid
echo $? > "$OUT/exit"
rm -f "$MNT/filler"
cp -r "$MNT/." "$OUT/copy"
"""


def _run_on_small_disk(spec: Path, tmp_path: Path, size: str, fill: bool) -> tuple[int, str, str, Path]:
    assert _in_mount_namespace(), "unshare -rm is needed to give the run a small disk of its own"
    out, mnt = tmp_path / "result", tmp_path / "mnt"
    for folder in (out / "copy", mnt, tmp_path / "tmp"):
        folder.mkdir(parents=True)
    env = {**os.environ, "SIZE": size, "MNT": str(mnt), "OUT": str(out), "SPEC": str(spec), "PY": sys.executable,
           "FILL": "1" if fill else "0", "TMPDIR": str(tmp_path / "tmp")}
    subprocess.run(["unshare", "-rm", "sh", "-c", _FILL], env=env, cwd=REPO, timeout=240, check=True)
    return (int((out / "exit").read_text()), (out / "stdout").read_text(), (out / "stderr").read_text(),
            out / "copy")


@fault("too little free space for the run's raw logs", "exit 2 before timing, with the estimate and the free space")
def test_a_disk_clearly_too_small_is_refused_before_timing_with_the_estimate(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 4, "measure": {"requests": 3000}}))
    code, _, stderr, copy = _run_on_small_disk(spec, tmp_path, "600k", fill=False)
    assert code == 2, stderr
    # floor: 3,000 x (500 + 18 x 150 + 24 x 4) bytes + 1 MiB of reports = 10 MiB
    # free: the 600 KiB tmpfs less the few KiB the run folder holds by then (spec.yaml, probes.jsonl)
    free = re.search(r"has (\d+) KiB free", stderr)
    assert stderr.startswith("ERROR: ") and free is not None and 570 <= int(free.group(1)) <= 600, stderr
    assert "need at least 10 MiB" in stderr
    assert list(copy.iterdir()) == []  # the refused run leaves no folder


@fault("the disk fills during the timed phase", "the run stops at once; every part written stays readable; an "
       "INCOMPLETE passport goes to a fallback folder (said on stderr); exit 1; `passport recover` finishes the job "
       "once space is freed")
@pytest.mark.slow
def test_a_disk_that_fills_mid_run_stops_it_cleanly_and_loses_nothing_written(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "2", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 4, "measure": {"duration_s": 60}},
                            workload={**SMALL, "output_tokens": {"dist": "fixed", "value": 64}}))
    start = time.monotonic()
    code, stdout, stderr, copy = _run_on_small_disk(spec, tmp_path, "64m", fill=True)
    assert code == 1, stderr
    assert time.monotonic() - start < 45  # stopped at once, not after the 60 s window
    assert "Traceback" not in stderr and "No space left on device" in stderr
    fallback = tmp_path / "tmp" / "passport-fallback"
    (passport_path,) = fallback.glob("*/passport.json")
    assert f"passport.json was written to {passport_path.parent} instead" in stderr
    assert stdout.startswith(f"passport: {passport_path}")
    passport = json.loads(passport_path.read_text())
    assert passport["verdict"] == "INCOMPLETE"
    assert passport["validity"]["incomplete_reason"].startswith("writing ")
    run = copy / passport_path.parent.name
    parts = sorted((run / "requests.parts").glob("part-*.parquet"))
    kept = sum(pq.read_metadata(p).num_rows for p in parts)  # every part on disk reads
    listed = sum(e["rows"] for name, e in passport["files"].items() if name.startswith("requests.parts/"))
    assert kept == listed and kept > 0
    assert len(parts) == sum(name.startswith("requests.parts/") for name in passport["files"])
    # with room again, the folder gets its passport beside its raw files
    recovered = run_cli("recover", str(run))
    assert recovered.returncode == 1 and "Result is: INCOMPLETE" in recovered.stdout, recovered.stderr
    assert pq.read_table(run / "requests.parquet").num_rows == kept
    assert run_cli("verify", str(run)).returncode == 0


@fault("the run folder deleted mid-run", "the run ends in an INCOMPLETE passport (with empty raw tables) in the "
       "fallback folder saying the folder and its records were deleted; exit 1, no traceback")
@pytest.mark.slow
def test_a_run_folder_deleted_mid_run_still_ends_in_a_passport(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "20", "--itl-ms", "5")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"duration_s": 3}}))
    out = tmp_path / "out"
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:  # until the timed phase starts
        if line.startswith("passport: timed phase"):
            break
    time.sleep(0.5)
    shutil.rmtree(only_run_dir(out))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    (passport_path,) = (tmp_path / "tmp" / "passport-fallback").glob("*/passport.json")
    passport = json.loads(passport_path.read_text())
    assert passport["verdict"] == "INCOMPLETE"
    assert "was deleted during the run; the requests it recorded went with it" in \
        passport["validity"]["incomplete_reason"]
    assert stdout.startswith(f"passport: {passport_path}")
    assert run_cli("verify", str(passport_path.parent)).returncode == 0


# -- rejections and Retry-After -------------------------------------------------------------------


@fault("429/503 with Retry-After", "recorded as `rejected`; with `load.on_reject: {retry: honour_retry_after}` sent "
       "again after the wait asked for (its own row, linked by `retry_of`), at most `max_retries` times")
@pytest.mark.slow
def test_a_declared_retry_policy_waits_as_asked_and_links_each_attempt(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--fault", "reject:4", "--retry-after-s", "1")
    on_reject = {"retry": "honour_retry_after", "max_retries": 2}
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 9},
                                  "on_reject": on_reject}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    run = only_run_dir(tmp_path / "out")
    requests = _requests(run)
    # one user in a row: the server rejects its 4th and 8th requests (its 12th would be a 10th
    # request); each rejection's retry is the next attempt the server sees, so 9 requests take
    # 11 attempts, and an attempt's row id is its place in the server's count less one
    assert len(requests) == 11
    rejected = requests[requests.outcome == "rejected"]
    assert list(rejected.request_id) == [3, 7] and set(rejected.retry_after) == {"1"}
    for row in rejected.itertuples():
        retry = requests[requests.retry_of == row.request_id].iloc[0]
        assert retry.attempt == 1 and retry.outcome == "ok"
        assert retry.sent_ns - row.end_ns >= 1e9  # the second asked for was waited
    passport = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["counts"]["retries"] == 2 and passport["validity"]["counts"]["measured"] == 9
    assert passport["validity"]["counts"]["succeeded"] == 9
    assert passport["protocol"]["effective"]["load"]["on_reject"] == {**on_reject, "max_wait_s": 60.0}
    assert "rejections (429/503): honour_retry_after, at most 2 retries" in (run / "report.md").read_text()
    assert run_cli("verify", str(run)).returncode == 0


@pytest.mark.slow
def test_without_a_policy_a_rejection_is_recorded_once_and_never_sent_again(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--fault", "reject:4")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 9}},
                            validity={"max_error_rate": 1.0}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(tmp_path / "out")
    requests = _requests(run)
    assert len(requests) == 9 and list(requests[requests.outcome == "rejected"].request_id) == [3, 7]
    assert requests.retry_of.isna().all() and (requests.attempt == 0).all()
    counts = json.loads((run / "passport.json").read_text())["validity"]["counts"]
    assert counts["rejections"] == 2 and counts["retries"] == 0


@pytest.mark.slow
def test_retries_stop_at_max_retries_and_the_last_attempt_counts(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--fault", "reject:1", "--retry-after-s", "0")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 1, "measure": {"requests": 3},
                                  "on_reject": {"retry": "honour_retry_after", "max_retries": 2}},
                            validity={"max_error_rate": 1.0}))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 1 and "FAIL: min_completed_requests: 0 measured requests succeeded" in result.stdout
    run = only_run_dir(tmp_path / "out")
    requests = _requests(run)
    assert len(requests) == 9 and (requests.outcome == "rejected").all()
    assert sorted(requests.attempt) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    counts = json.loads((run / "passport.json").read_text())["validity"]["counts"]
    assert counts["measured"] == 3 and counts["rejections"] == 3 and counts["retries"] == 6


# -- signals ----------------------------------------------------------------------------------------


@fault("SIGTERM during the timed phase", "as Ctrl-C: issuing ends, an INCOMPLETE passport of what was recorded, "
       "exit 1")
@pytest.mark.slow
def test_sigterm_mid_run_writes_an_incomplete_passport(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "5")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 4, "measure": {"duration_s": 60}}))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 30
    while not list(out.glob("*/requests.parts/part-000001.parquet")) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    passport = json.loads((only_run_dir(out) / "passport.json").read_text())
    assert passport["validity"]["incomplete_reason"] == "interrupted by SIGTERM"
    assert "Result is: INCOMPLETE" in stdout and "Traceback" not in stderr
