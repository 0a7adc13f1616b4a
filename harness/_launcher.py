"""Launch, watch and stop the engine a spec declares (`engine.launch`).

The command is a template: `{port}` (a free loopback port unless `engine.port` is set),
`{host}` and `{model_path}` are filled in, then it runs without a shell in its own process
group, with the Python environment's `bin/` first on PATH (where scripts/setup.sh links
`llama-server`). Its output goes to `engine.log` in the run folder. `start()` waits for
`/health` to answer 200, and fails with the log's last lines if the process exits or the wait
times out. A sampler thread records the process tree's RSS (bytes) for peak memory and notices
an unexpected exit. `stop()` sends SIGTERM to the group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO

import psutil

from harness._control import ControlClient
from harness._errors import EngineLaunchError

__all__ = ["EngineLauncher", "free_port", "redact_command"]

_SECRET_FLAG = re.compile(r"(?i)^--?[\w-]*(key|token|secret|password)[\w-]*$")
_SECRET_INLINE = re.compile(r"(?i)^(--?[\w-]*(?:key|token|secret|password)[\w-]*=)(.+)$")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def redact_command(argv: list[str]) -> list[str]:
    """The argv with values of key/token/secret/password flags replaced by `***`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        inline = _SECRET_INLINE.match(arg)
        if inline:
            out.append(inline.group(1) + "***")
        else:
            out.append(arg)
            hide_next = bool(_SECRET_FLAG.match(arg))
    return out


class EngineLauncher:
    """One engine process; see the module docstring.

    **Parameters:** `template` (the launch command); `log_path`; `model_path` (fills
    `{model_path}`); `host`; `port` (None: a free one); `health_timeout_s`; `sample_s` (RSS
    sampling period).
    """

    def __init__(
        self,
        template: str,
        log_path: Path,
        model_path: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        health_timeout_s: float = 120.0,
        sample_s: float = 0.5,
    ) -> None:
        if "{model_path}" in template and not model_path:
            raise EngineLaunchError(
                "engine.launch uses {model_path} but engine.model_path is not set; "
                "set it to the model file (scripts/setup.sh prints the cached Gemma path)"
            )
        self.host = host
        self.port = port or free_port(host)
        self.argv = shlex.split(
            template.format(port=self.port, host=host, model_path=os.path.expanduser(model_path or ""))
        )
        self.log_path = log_path
        self._health_timeout_s = health_timeout_s
        self._sample_s = sample_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._sampler: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._samples: deque[tuple[int, float]] = deque()
        self.peak_rss_bytes: int | None = None
        self.unexpected_exits = 0
        self.exit_code: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def command(self) -> list[str]:
        """The launch command with secrets redacted (what the passport records)."""
        return redact_command(self.argv)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        return env

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no engine log)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> None:
        """Start the engine and wait until it is healthy; raises EngineLaunchError otherwise."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=self._env(),
            )
        except OSError as exc:
            self.stop()
            raise EngineLaunchError(
                f"cannot start the engine ({' '.join(self.command)}): {exc}. Is the program "
                "installed and on PATH? For llama-server run scripts/setup.sh"
            ) from exc
        deadline = time.monotonic() + self._health_timeout_s
        with ControlClient(self.base_url) as control:
            while True:
                code = self._proc.poll()
                if code is not None:
                    self.exit_code = code
                    self.stop()
                    raise EngineLaunchError(
                        f"the engine exited with code {code} before it was healthy. "
                        f"Last lines of {self.log_path}:\n{self.log_tail()}"
                    )
                if control.healthy():
                    break
                if time.monotonic() > deadline:
                    self.stop()
                    raise EngineLaunchError(
                        f"the engine was not healthy within {self._health_timeout_s} s "
                        f"(engine.health_timeout_s). Last lines of {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(0.2)
        self._sampler = threading.Thread(target=self._sample, name="engine-rss", daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        assert self._proc is not None
        try:
            root = psutil.Process(self._proc.pid)
        except psutil.Error:
            return
        while True:
            if self._proc.poll() is not None:
                if not self._stopping.is_set():
                    self.unexpected_exits += 1
                    self.exit_code = self._proc.returncode
                return
            rss = 0
            try:
                for proc in [root, *root.children(recursive=True)]:
                    try:
                        rss += proc.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            with self._lock:
                self._samples.append((time.perf_counter_ns(), float(rss)))
                if self.peak_rss_bytes is None or rss > self.peak_rss_bytes:
                    self.peak_rss_bytes = rss
            if self._stopping.wait(self._sample_s):
                return

    def drain_samples(self) -> list[tuple[int, float]]:
        """RSS samples (perf_counter_ns, bytes) taken since the last call."""
        with self._lock:
            out = list(self._samples)
            self._samples.clear()
        return out

    @property
    def returncode(self) -> int | None:
        """The process's exit status, None while it runs (or before start)."""
        return None if self._proc is None else self._proc.poll()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL after `grace_s`; safe to call twice."""
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(5)
        if self._sampler is not None:
            self._sampler.join(2)
        if self._log is not None:
            self._log.close()
            self._log = None
