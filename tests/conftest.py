"""Shared fixtures: the simulated engine in its own process, the CLI (in a subprocess where it sends load), and the
real engine's cached artifacts (built by scripts/setup.sh)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from harness import free_port

REPO = Path(__file__).resolve().parent.parent
# Runs sign their passports with this machine's key: the suite's own, not the user's.
os.environ.setdefault("PASSPORT_KEY_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "passport-test-keys"))
CACHE = Path(os.environ.get("PASSPORT_CACHE", Path.home() / ".cache" / "passport"))
GGUF = CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 15.0,
                  verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=0.5, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} not healthy within {timeout_s} s")


# The client's own health rules (loop lag, dispatch lag, CPU share) rightly fail a run whose
# client was starved of CPU; tests about something else declare these lenient limits so a busy
# machine cannot fail them (single 1 s samples of the client's CPU share at 0.97 and 1.32 cores,
# with its writer threads, failed telemetry and accuracy tests on a 2-core machine; the landed
# commit fails the same way). The CPU share is in cores, so 100 never binds; lag fails only beyond
# 1000 times the latency it distorts, or a minute. The rules themselves are tested with strict limits.
LENIENT_CLIENT = {"max_loop_lag_p99_ms": 1000.0, "max_dispatch_lag_p99_ms": 1000.0, "max_client_cpu_share": 100.0,
                  "max_lag_share": 1000.0, "lag_ceiling_ms": 60_000.0}
# The same, as `passport run` flags.
LENIENT_FLAGS = tuple(arg for key, value in LENIENT_CLIENT.items() for arg in ("--set", f"validity.{key}={value}"))


def client_starved_only(output: str) -> bool:
    """Whether a run's printed verdict is INVALID only because the machine starved its client:
    every FAIL line is the client's health rule, and the cause it names is other processes (the
    kernel's count of the time the harness's loop waited for a CPU). A test of a command run as
    written (the docs' blocks) accepts that verdict beside VALID: it is the right one on a machine
    the stress tier (scripts/stress.py) keeps busy, and says so."""
    fails = [line for line in output.splitlines() if line.startswith("FAIL: ")]
    return ("Result is: INVALID" in output and bool(fails)
            and all(line.startswith("FAIL: client_not_bound:") and "cause: other processes on this machine" in line
                    for line in fails))


SimFactory = Callable[..., str]


@pytest.fixture
def simulator() -> Iterator[SimFactory]:
    """Start `python -m harness.simulator ARGS` in its own process; returns its /v1 base URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str, ca_file: str | None = None) -> str:
        """Extra args go to the simulator; with `--tls-cert`, pass `ca_file` to check health."""
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "harness.simulator", "--port", str(port), *args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        scheme = "https" if "--tls-cert" in args else "http"
        verify = ssl.create_default_context(cafile=ca_file) if ca_file else True
        _wait_healthy(f"{scheme}://127.0.0.1:{port}/health", proc, verify=verify)
        return f"{scheme}://127.0.0.1:{port}/v1"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(5)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[dict[str, object]], Path]:
    def write(data: dict[str, object], name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data))
        return path

    return write


# Commands that only read run folders (or print arithmetic) run in this process: a new interpreter
# costs 1-5 s on a busy 2-core machine and tells these tests nothing more. Those that send load
# (run, sweep, campaign, canary, probe, recover) keep a process of their own: signals, forked
# workers, launched engines and an event loop of their own are part of what they test.
IN_PROCESS = frozenset({"verify", "gate", "compare", "show", "export", "capacity", "workload"})


def run_cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 180,
            cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`passport ARGS` as a user runs it: its exit code, stdout and stderr."""
    if args and args[0] in IN_PROCESS:
        return _in_process(args, env, cwd)
    return subprocess.run([sys.executable, "-m", "passport.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})}, cwd=cwd)


def _in_process(args: tuple[str, ...], env: dict[str, str] | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`passport.cli.main(args)` with its own environment, working folder, streams and warning
    filters (the interpreter's defaults, not this suite's warnings-as-errors), as a subprocess
    would see them; an uncaught exception is a traceback on stderr and exit 1, as there."""
    from passport.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_term = dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM)
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.resetwarnings()
            warnings.simplefilter("default")
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors and --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=err)
            except Exception:
                traceback.print_exc(file=err)
                code = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        signal.signal(signal.SIGTERM, saved_term)
    return subprocess.CompletedProcess(["passport", *args], code, out.getvalue(), err.getvalue())


def only_run_dir(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def closed_port() -> int:
    """A loopback port with nothing listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers from what a test uses: `simulator` where it starts the simulated engine, `model`
    where it needs the GGUF (the tiers in scripts/test.sh select on them)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "simulator" in fixtures:
            item.add_marker(pytest.mark.simulator)
        if "gguf_path" in fixtures:
            item.add_marker(pytest.mark.model)


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    if not GGUF.is_file():
        pytest.fail(f"{GGUF} is missing: run scripts/setup.sh (the README's test command does)")
    return GGUF
