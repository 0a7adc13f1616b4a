"""No escape sequence a server wrote reaches the operator's terminal; piped output stays data."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from passport.cli._terminal import TerminalGuard, visible
from tests.conftest import LENIENT_FLAGS, REPO, SimFactory, only_run_dir
from tests.faults import fault

# a model id that, printed raw, erases the line it is on and writes over it
EVIL = "sim\x1b[2K\rInjected\x9b31m"


def test_visible_escapes_control_characters_and_keeps_text() -> None:
    assert visible(EVIL) == "sim\\x1b[2K\\x0dInjected\\x9b31m"
    assert visible("naïve café 🙂\tcol\nnext") == "naïve café 🙂\tcol\nnext"
    assert visible("\x00\x07\x08\x7f") == "\\x00\\x07\\x08\\x7f"


def test_the_guard_writes_visible_text_and_is_the_terminal_otherwise() -> None:
    import io

    raw = io.StringIO()
    guard = TerminalGuard(raw)  # type: ignore[arg-type]
    assert guard.write(EVIL) == len(EVIL)
    assert raw.getvalue() == visible(EVIL) and guard.getvalue() == raw.getvalue()  # type: ignore[attr-defined]


def _on_a_terminal(args: list[str]) -> bytes:
    """`passport ARGS` with stdout and stderr on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "passport.cli", *args], stdin=subprocess.DEVNULL,
                               stdout=slave, stderr=slave, cwd=REPO)
    os.close(slave)
    received = b""
    while True:
        try:
            block = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not block:
            break
        received += block
    os.close(master)
    assert process.wait(120) in (0, 1), received
    return received


@fault("a model id (or any server text) holding terminal escape sequences",
       "shown as visible escapes (\\x1b) on a terminal, so no line can be erased or rewritten; piped output keeps "
       "the bytes")
@pytest.mark.slow
def test_a_server_cannot_write_escape_sequences_to_the_terminal(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--model", EVIL)
    shown = _on_a_terminal(["run", "--endpoint", url, "--concurrency", "2", "--num-prompts", "6", "--input-len", "8",
                            "--output-len", "4", "--set", "canaries=none", "--set", "workload.tokenizer=none",
                            "--out", str(tmp_path), *LENIENT_FLAGS])
    assert b"Result is:" in shown
    assert b"sim\x1b[2K" not in shown and b"\xc2\x9b31m" not in shown, shown
    assert b"model sim\\x1b[2K\\x0dInjected\\x9b31m on " in shown, shown
    run = only_run_dir(tmp_path)
    again = _on_a_terminal(["show", str(run)])
    assert b"sim\x1b[2K" not in again and b"sim\\x1b[2K\\x0dInjected" in again, again
    piped = subprocess.run([sys.executable, "-m", "passport.cli", "show", str(run)], capture_output=True, cwd=REPO)
    assert b"sim\x1b[2K\rInjected" in piped.stdout  # not a terminal: the bytes as the server sent them
