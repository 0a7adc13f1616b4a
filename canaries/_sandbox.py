"""Run model-written Python against tests, never in the harness's own process.

Layers, each enough to stop the cases the tests try (read a file outside the work dir, open a
socket, loop forever), and together hard to get round for a small model's answer:
1. a fresh `python -I` subprocess in a new session, in an empty temporary directory, with a
   minimal environment;
2. resource limits (CPU seconds, address space, file size, open files) set before exec;
3. a wall-clock timeout that kills the whole process group;
4. no network: the process runs in a new network namespace (`unshare -rn`: only a loopback
   that is down) when the kernel allows it, and in every case
5. an audit hook installed before the answer runs refuses sockets, subprocesses, `os.system`,
   `exec*`/`fork`, `ctypes` and any `open` outside the work directory and Python's own library.

It is a canary checker, not a jail for hostile code: run untrusted models' answers on a machine
you can afford to lose, as for any code execution benchmark.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxResult", "run_python", "extract_code", "network_isolation"]

_PASSED = "CANARY-TESTS-PASSED"
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

_RUNNER = r'''
import sys, os
WORK = os.path.realpath(os.getcwd())
READ_OK = tuple(os.path.realpath(p) for p in {READ_OK!r})

def _hook(event, args):
    if event == "open":
        path, mode = args[0], args[1] if len(args) > 1 else "r"
        if isinstance(path, int):
            return
        real = os.path.realpath(os.fsdecode(path))
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if real == WORK or real.startswith(WORK + os.sep):
            return
        if not writing and real.startswith(READ_OK):
            return
        raise PermissionError(f"sandbox: open({real!r}, {mode!r}) is outside the work directory")
    if event.startswith(("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "ctypes.")) or \
            event in ("os.system", "os.fork", "os.forkpty", "pty.spawn", "os.kill", "os.killpg"):
        raise PermissionError(f"sandbox: {event} is not allowed")

sys.addaudithook(_hook)
namespace = {"__name__": "__canary__"}
exec(compile(open("solution.py").read(), "solution.py", "exec"), namespace)
exec(compile(open("tests.py").read(), "tests.py", "exec"), namespace)
print("CANARY-TESTS-PASSED")
'''


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    reason: str
    stdout: str
    stderr: str
    duration_s: float


def extract_code(answer: str) -> str:
    """The first fenced code block of an answer, or the whole answer."""
    match = _FENCE.search(answer)
    return match.group(1) if match else answer


@functools.cache
def network_isolation() -> list[str]:
    """The command prefix that gives a child no network (`unshare -rn`), or [] where not allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    for prefix in ([unshare, "-rn"], [unshare, "-n"]):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            continue
    return []


def _limits(cpu_s: int, memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (10 * 2**20, 10 * 2**20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_python(code: str, tests: str, timeout_s: float = 5.0, memory_bytes: int = 512 * 2**20) -> SandboxResult:
    """Run `code`, then `tests` (asserts) in a sandboxed child; passed when every test ran."""
    work = Path(tempfile.mkdtemp(prefix="passport-canary-"))
    try:
        read_ok = sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")} | {sys.base_prefix})
        (work / "solution.py").write_text(code)
        (work / "tests.py").write_text(tests)
        (work / "runner.py").write_text(_RUNNER.replace("{READ_OK!r}", repr(read_ok)))
        argv = [*network_isolation(), sys.executable, "-I", "-S", "runner.py"]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=lambda: _limits(int(timeout_s) + 1, memory_bytes))
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            return SandboxResult(False, f"timed out after {timeout_s:g} s", out.decode(errors="replace")[-2000:],
                                 err.decode(errors="replace")[-2000:], time.monotonic() - start)
        duration = time.monotonic() - start
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if proc.returncode == 0 and _PASSED in stdout:
            return SandboxResult(True, "all tests passed", stdout[-2000:], stderr[-2000:], duration)
        last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "")
        reason = last or f"exited with {proc.returncode}"
        if proc.returncode < 0:
            reason = f"killed by signal {-proc.returncode} ({reason or 'resource limit'})"
        return SandboxResult(False, reason[:300], stdout[-2000:], stderr[-2000:], duration)
    finally:
        shutil.rmtree(work, ignore_errors=True)
