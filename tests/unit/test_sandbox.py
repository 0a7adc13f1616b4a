"""The coding canary's sandbox: model-written code that reaches outside fails cleanly."""

from __future__ import annotations

import socket
import threading

import pytest

from canaries import extract_code, network_isolation, run_python

TESTS = "assert add(2, 3) == 5\n"
GOOD = "def add(a, b):\n    return a + b\n"


def test_correct_code_passes_and_wrong_code_fails_with_the_assertion() -> None:
    assert run_python(GOOD, TESTS).passed
    wrong = run_python("def add(a, b):\n    return a - b\n", TESTS)
    assert not wrong.passed and wrong.reason == "AssertionError"


def test_reading_a_file_outside_the_work_directory_fails(tmp_path: object) -> None:
    result = run_python("open('/etc/hostname').read()\n" + GOOD, TESTS)
    assert not result.passed and "sandbox: open('/etc/hostname'" in result.reason


def test_opening_a_socket_fails_even_to_a_listening_local_port() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n" + GOOD
    result = run_python(code, TESTS)
    server.close()
    assert not result.passed and "sandbox: socket" in result.reason
    assert accepted == []


def test_an_endless_loop_is_killed_at_the_timeout() -> None:
    result = run_python("while True:\n    pass\n", TESTS, timeout_s=1.5)
    assert not result.passed and result.reason == "timed out after 1.5 s"
    assert result.duration_s < 5


@pytest.mark.parametrize("code, word", [
    ("import os\nos.system('true')\n", "os.system"),
    ("import subprocess\nsubprocess.run(['true'])\n", "subprocess.Popen"),
    ("x = bytearray(4 * 1024**3)\n", "MemoryError"),
])
def test_processes_and_memory_hogs_are_refused(code: str, word: str) -> None:
    result = run_python(code, TESTS)
    assert not result.passed and word in result.reason


def test_the_first_fenced_block_is_the_code() -> None:
    assert extract_code("Here:\n```python\ndef f():\n    return 1\n```\nDone.") == "def f():\n    return 1\n"
    assert extract_code("def f(): return 1") == "def f(): return 1"


def test_network_namespace_is_used_where_the_kernel_allows_it() -> None:
    prefix = network_isolation()
    assert prefix == [] or prefix[-1] in ("-rn", "-n")
