"""The coding canary's sandbox: a hostile answer cannot touch the machine that judges it.

Every escape attempt below aims at something on the host that the test then inspects itself: a
file it planted, a directory it owns, a process it started, a port it listens on, an environment
variable it set. The sandbox's own report is never the evidence.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from canaries import (
    CaseSpec,
    SandboxUnavailable,
    Suite,
    _sandbox,
    extract_code,
    require_sandbox,
    run_python,
    sandbox_unavailable,
)
from tests.faults import fault

pytestmark = pytest.mark.sandbox

TESTS = "assert add(2, 3) == 5\n"
GOOD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(autouse=True)
def _isolation_is_here() -> None:
    # scripts/setup.sh --test installs bubblewrap: a machine without it fails here, saying why
    assert sandbox_unavailable() is None, sandbox_unavailable()


def test_correct_code_passes_and_wrong_code_fails_with_the_assertion() -> None:
    assert run_python(GOOD, TESTS).passed
    wrong = run_python("def add(a, b):\n    return a - b\n", TESTS)
    assert not wrong.passed and wrong.reason == "AssertionError"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A directory on the host holding a file the answers try to read, change, move or delete."""
    (tmp_path / "victim.txt").write_text("host data")
    return tmp_path


def _host_untouched(host: Path) -> None:
    assert sorted(p.name for p in host.iterdir()) == ["victim.txt"]
    assert (host / "victim.txt").read_text() == "host data"


@fault("a coding-canary answer that writes, deletes or renames host files",
       "fails inside the bubblewrap sandbox: the host tree is read-only or absent there")
@pytest.mark.parametrize("attack", [
    "open({victim!r}, 'w').write('owned')",
    "open({victim!r}, 'a').write('owned')",
    "open({dir!r} + '/new.txt', 'w').write('owned')",
    "import os\nos.remove({victim!r})",
    "import os\nos.rename({victim!r}, {dir!r} + '/moved.txt')",
    "import shutil\nshutil.rmtree({dir!r})",
    "import os\nos.chmod({victim!r}, 0o777)",
    "import os\nos.symlink('/etc/passwd', {dir!r} + '/link')",
])
def test_writing_deleting_or_renaming_a_host_file_fails(host: Path, attack: str) -> None:
    code = attack.format(victim=str(host / "victim.txt"), dir=str(host)) + "\n" + GOOD
    result = run_python(code, TESTS)
    assert not result.passed
    _host_untouched(host)


@fault("a coding-canary answer that reads or lists host files (home, keys)",
       "sees only /usr, the interpreter and its own files")
def test_host_files_and_directories_cannot_be_read_or_listed(host: Path) -> None:
    code = (f"import os\nfound = []\n"
            f"for path in ({str(host)!r}, {str(Path.home())!r}, '/etc', {os.getcwd()!r}):\n"
            f"    try:\n        found += os.listdir(path)\n    except OSError:\n        pass\n"
            f"for path in ({str(host / 'victim.txt')!r}, '/etc/hostname', '/etc/passwd'):\n"
            f"    try:\n        found.append(open(path).read())\n    except OSError:\n        pass\n"
            f"print('FOUND', found)\n" + GOOD)
    result = run_python(code, TESTS)
    assert result.passed and "FOUND []" in result.stdout, result.stdout


def test_the_environment_is_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASSPORT_TEST_PLANTED", "sk-planted-0123")
    result = run_python("import os\nprint(sorted(os.environ.items()))\n" + GOOD, TESTS)
    assert result.passed and "sk-planted-0123" not in result.stdout


@fault("a coding-canary answer that starts programs (subprocess, fork+exec, ctypes, posix_spawn)",
       "they run inside the same namespaces and limits, and reach nothing")
@pytest.mark.parametrize("route", [
    "import subprocess\nsubprocess.run(['/usr/bin/touch', {target!r}])",
    "import os\nos.system('touch {target}')",
    "import _posixsubprocess, os\n"
    "pid = _posixsubprocess.fork_exec([b'/usr/bin/touch', {target!r}.encode()], [b'/usr/bin/touch'], True, (),"
    " None, None, -1, -1, -1, -1, -1, -1, *os.pipe(), False, False, -1, None, None, None, -1, None, False)\n"
    "os.waitpid(pid, 0)",
    "import os\npid = os.fork()\nif pid == 0:\n    os.execv('/usr/bin/touch', ['touch', {target!r}])\n"
    "os.waitpid(pid, 0)",
    "import ctypes\nctypes.CDLL(None).system(b'touch {target}')",
    "import os\nos.posix_spawn('/usr/bin/touch', ['touch', {target!r}], {{}})\nos.wait()",
])
def test_a_program_started_by_any_route_cannot_reach_the_host(host: Path, route: str) -> None:
    # each route runs `touch` twice: inside the sandbox (which must work: the route is real) and on the host
    code = "\n".join([route.format(target="/work/inside.txt"), route.format(target=str(host / "owned.txt")),
                      "import os\nprint('INSIDE', os.path.exists('/work/inside.txt'))", GOOD])
    result = run_python(code, TESTS)
    assert result.passed and "INSIDE True" in result.stdout, result
    _host_untouched(host)


@fault("a coding-canary answer that opens a socket", "no network: a new network namespace without interfaces")
def test_a_socket_cannot_reach_a_listening_local_port() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(1)
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n" + GOOD
    result = run_python(code, TESTS)
    thread.join()
    server.close()
    assert not result.passed and ("Network is unreachable" in result.reason or "refused" in result.reason), result
    assert accepted == []


def test_a_host_process_cannot_be_signalled() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        code = f"import os, signal\nos.kill({sleeper.pid}, signal.SIGKILL)\n" + GOOD
        result = run_python(code, TESTS)
        assert not result.passed and "ProcessLookupError" in result.reason
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


@fault("a coding-canary answer that monkeypatches Python (os.path.realpath, audit hooks)",
       "nothing to switch off: the boundary is the kernel's, not Python's")
def test_monkeypatching_python_switches_nothing_off(host: Path) -> None:
    code = ("import os, os.path, builtins, sys\n"
            "os.path.realpath = lambda p, **k: '/work/x'\nos.path.abspath = os.path.realpath\n"
            "sys.audit = lambda *a: None\n"
            f"open({str(host / 'victim.txt')!r}, 'w').write('owned')\n" + GOOD)
    assert not run_python(code, TESTS).passed
    _host_untouched(host)


def _processes_running(marker: str, within_s: float = 3.0) -> list[str]:
    """Processes whose command line holds `marker`, once they have had `within_s` to die: the
    kernel kills a PID namespace's processes when its init dies, but not in the same instant."""
    deadline = time.monotonic() + within_s
    while True:
        done = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True, check=True)
        alive = [line for line in done.stdout.splitlines()
                 if marker in line and "ps -eo" not in line and not line.lstrip().startswith("Z")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@fault("a fork bomb, a memory, disk or output hog",
       "process, memory, file-size and CPU limits; the case fails, the host is untouched")
def test_a_fork_bomb_is_stopped_by_the_process_limit_and_leaves_nothing_behind() -> None:
    code = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.05)\n"
    result = run_python(code, TESTS, timeout_s=2)
    assert not result.passed and result.reason == "timed out after 2 s"
    assert _processes_running("/case/runner.py") == []


@fault("an answer that leaves detached processes or loops forever",
       "killed with its whole process group at the case timeout")
def test_the_timeout_kills_every_process_the_answer_started_even_detached_ones() -> None:
    code = ("import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        os.execv('/usr/bin/sleep', ['sleep', '1234.5'])\n    os._exit(0)\n"
            "while True:\n    pass\n")
    result = run_python(code, TESTS, timeout_s=1.5)
    assert result.reason == "timed out after 1.5 s" and result.duration_s < 5
    assert _processes_running("sleep 1234.5") == []


@pytest.mark.parametrize("code, word", [
    ("x = bytearray(4 * 1024**3)\n", "MemoryError"),
    ("open('big', 'wb').write(b'x' * 50 * 2**20)\n", "File too large"),
    ("import sys\nsys.stdout.write('y' * 50 * 2**20)\n", "File too large"),
])
def test_memory_disk_and_output_hogs_are_bounded(code: str, word: str) -> None:
    result = run_python(code, TESTS)
    assert not result.passed and word in result.reason + result.stderr, result
    assert len(result.stdout) <= 2000


def test_an_endless_loop_is_killed_at_the_timeout() -> None:
    result = run_python("while True:\n    pass\n", TESTS, timeout_s=1.5)
    assert not result.passed and result.reason == "timed out after 1.5 s"
    assert result.duration_s < 5


def test_the_first_fenced_block_is_the_code() -> None:
    assert extract_code("Here:\n```python\ndef f():\n    return 1\n```\nDone.") == "def f():\n    return 1\n"
    assert extract_code("def f(): return 1") == "def f(): return 1"


@fault("no bubblewrap on the machine", "a suite with coding cases refuses to run, saying how to install it")
def test_without_bubblewrap_coding_cases_refuse_to_run_and_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    coding = Suite(suite="s", version="1", cases=[CaseSpec.model_validate(
        {"id": "add", "kind": "coding", "prompt": "Write add.", "tests": TESTS})])
    plain = Suite(suite="s", version="1", cases=[CaseSpec.model_validate(
        {"id": "hi", "kind": "exact", "prompt": "Say hi.", "expect": {"text": "hi"}})])
    monkeypatch.setenv("PATH", "/nonexistent")
    _sandbox.sandbox_unavailable.cache_clear()
    try:
        reason = sandbox_unavailable()
        assert reason is not None and "bubblewrap is not installed" in reason
        with pytest.raises(SandboxUnavailable, match="coding case.s. add need OS-level isolation: bubblewrap"):
            require_sandbox(coding)
        require_sandbox(plain)  # nothing to isolate: no refusal
        with pytest.raises(SandboxUnavailable):
            run_python(GOOD, TESTS)
    finally:
        monkeypatch.undo()
        _sandbox.sandbox_unavailable.cache_clear()
    assert sandbox_unavailable() is None
