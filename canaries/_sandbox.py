"""Run model-written Python against tests under OS-level isolation, never in the harness's process.

The answer of a coding canary comes from an endpoint nobody here controls, so it is treated as
hostile code. It runs in a bubblewrap (`bwrap`) sandbox:
- new mount, PID, network, IPC and UTS namespaces: no network at all (not even loopback to the
  host's ports), no view of the host's processes, and a root made of read-only binds of `/usr`
  (and the merged-usr links), the interpreter's own prefix, and the case's files; the home
  directory, `/etc`, the repository and every other path do not exist inside;
- a private size-bounded tmpfs as `/tmp` and as the working directory, so writes cannot reach
  the host's disk;
- an unprivileged user with no capabilities (via `setpriv` when the harness runs as root: a uid
  of its own, drawn at random above 10^9; else a user namespace) and `no_new_privs`;
- resource limits set before the answer runs: processes (RLIMIT_NPROC, against fork bombs),
  address space, CPU seconds, file size, open files, no core dumps;
- a wall-clock timeout that kills the sandbox's PID 1, which takes every process in it along.

Where that isolation cannot be had (no bwrap, namespaces refused) coding canaries refuse to run
and say why (`SandboxUnavailable`); there is no weaker fallback. The sandbox protects the
machine, not the verdict: the tests run in the answer's process, so an answer written to game
its own tests can.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from canaries._suite import CanaryError, Suite

__all__ = ["SandboxResult", "SandboxUnavailable", "run_python", "extract_code", "sandbox_unavailable",
           "require_sandbox"]

_PASSED = "CANARY-TESTS-PASSED"
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
# As root, each sandbox drops to a user of its own, drawn from this range: RLIMIT_NPROC counts
# every process of a uid, so a shared one (nobody) let one sandbox's fork bomb starve another
# sandbox running beside it (EAGAIN on fork, seen with tests in parallel). No such user exists.
_UID_LOW, _UID_SPAN = 1_000_000_000, 1_000_000_000
_TMPFS_BYTES = 64 * 2**20
_OUTPUT_BYTES = 2000

# Runs inside the sandbox as its first code: the limits, then the answer and its tests.
_RUNNER = r'''
import resource
for name, value in {limits!r}:
    resource.setrlimit(getattr(resource, name), (value, value))
namespace = {{"__name__": "__canary__"}}
exec(compile(open("/case/solution.py").read(), "solution.py", "exec"), namespace)
exec(compile(open("/case/tests.py").read(), "tests.py", "exec"), namespace)
print("CANARY-TESTS-PASSED")
'''


class SandboxUnavailable(CanaryError):
    """OS-level isolation cannot be had on this machine; coding canaries cannot run."""


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


def _interpreter() -> Path:
    """The base interpreter (a venv's python is a link to it; its stdlib lies under its prefix)."""
    named = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return named if named.exists() else Path(os.path.realpath(sys.executable))


def _argv(case_dir: Path, program: list[str]) -> list[str]:
    """The bwrap command line that runs `program` isolated, with `case_dir` read-only at /case."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap is not installed (`apt-get install bubblewrap`; "
                                 "scripts/setup.sh --test installs it)")
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--ro-bind", str(case_dir), "/case", "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(_TMPFS_BYTES), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(_TMPFS_BYTES), "--tmpfs", "/work",
             "--chdir", "/work", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    if os.geteuid() == 0:
        # as root bwrap keeps the real uid 0, which RLIMIT_NPROC exempts: drop to a user of its own, for real
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("running as root needs util-linux's setpriv to drop to an unprivileged user")
        uid = _UID_LOW + secrets.randbelow(_UID_SPAN)
        return [*argv, "--", setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", *program]
    return [*argv, "--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--", *program]


@functools.cache
def sandbox_unavailable() -> str | None:
    """Why the sandbox cannot run on this machine, or None when it can (checked once, by running it)."""
    with tempfile.TemporaryDirectory(prefix="passport-canary-") as case_dir:
        os.chmod(case_dir, 0o755)
        try:
            argv = _argv(Path(case_dir), [str(_interpreter()), "-I", "-S", "-c", "print('ok')"])
            done = subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
        except SandboxUnavailable as exc:
            return str(exc)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start: {exc}"
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap could not start a sandbox here ({said[-1] if said else f'exit {done.returncode}'})"
    return None


def require_sandbox(suite: Suite) -> None:
    """Refuse a suite with coding cases, before anything is sent, where the sandbox cannot run."""
    coding = [case.id for case in suite.cases if case.kind == "coding"]
    reason = sandbox_unavailable() if coding else None
    if reason is not None:
        raise SandboxUnavailable(f"coding case(s) {', '.join(coding)} need OS-level isolation: {reason}; "
                                 "or leave them out of the suite")


def _limits(timeout_s: float, memory_bytes: int) -> list[tuple[str, int]]:
    cpu_s = int(timeout_s) + 1
    return [("RLIMIT_NPROC", 16), ("RLIMIT_AS", memory_bytes), ("RLIMIT_CPU", cpu_s),
            ("RLIMIT_FSIZE", 10 * 2**20), ("RLIMIT_NOFILE", 64), ("RLIMIT_CORE", 0)]


def run_python(code: str, tests: str, timeout_s: float = 5.0, memory_bytes: int = 512 * 2**20) -> SandboxResult:
    """Run `code`, then `tests` (asserts) in the sandbox; passed when every test ran.

    Raises SandboxUnavailable where the isolation cannot be had."""
    reason = sandbox_unavailable()
    if reason is not None:
        raise SandboxUnavailable(f"coding canaries need OS-level isolation: {reason}")
    case_dir = Path(tempfile.mkdtemp(prefix="passport-canary-"))
    try:
        case_dir.chmod(0o755)
        for name, text in (("solution.py", code), ("tests.py", tests),
                           ("runner.py", _RUNNER.format(limits=_limits(timeout_s, memory_bytes)))):
            (case_dir / name).write_text(text)
            (case_dir / name).chmod(0o644)
        argv = _argv(case_dir, [str(_interpreter()), "-I", "-S", "/case/runner.py"])
        # output goes to files, where RLIMIT_FSIZE bounds it (a pipe read into memory would not be)
        with open(case_dir / "stdout", "w+b") as out, open(case_dir / "stderr", "w+b") as err:
            start = time.monotonic()
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                # bwrap is the sandbox's parent: killing its group takes PID 1, and every process inside with it
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                timed_out = True
            duration = time.monotonic() - start
            stdout, stderr = _tail(out), _tail(err)
        if timed_out:
            return SandboxResult(False, f"timed out after {timeout_s:g} s", stdout, stderr, duration)
        if proc.returncode == 0 and _PASSED in stdout:
            return SandboxResult(True, "all tests passed", stdout, stderr, duration)
        last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "")
        reason = last or f"exited with {proc.returncode}"
        if proc.returncode < 0:
            reason = f"killed by signal {-proc.returncode} ({reason or 'resource limit'})"
        return SandboxResult(False, reason[:300], stdout, stderr, duration)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def _tail(file: BinaryIO) -> str:
    """The last bytes the sandbox wrote to `file`, as text."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - _OUTPUT_BYTES))
    return file.read().decode(errors="replace")
