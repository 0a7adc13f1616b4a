"""The simulator in its own process, for benchmarks and calibrations that must not share a core
(or a GIL) with the client they measure."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from harness._launcher import free_port

__all__ = ["spawn"]


def spawn(*args: str, cpu: int | None = None, timeout_s: float = 10.0) -> tuple[subprocess.Popen[bytes], str]:
    """Start `python -m harness.simulator --port <free> ARGS` (pinned to `cpu` with taskset when
    given) and wait until it accepts connections: (the process, its /v1 base URL). The caller
    terminates it."""
    port = free_port()
    command = [sys.executable, "-m", "harness.simulator", "--port", str(port), *args]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"the simulator did not start on port {port}") from None
            time.sleep(0.05)
