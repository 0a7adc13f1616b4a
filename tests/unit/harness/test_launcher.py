from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import EngineLauncher, EngineLaunchError, redact_command


def test_redacts_key_and_token_values() -> None:
    argv = ["srv", "--api-key", "sk-1", "--hf-token=abc", "--port", "1", "-m", "x"]
    assert redact_command(argv) == ["srv", "--api-key", "***", "--hf-token=***", "--port", "1", "-m", "x"]


def test_engine_that_exits_shows_its_last_log_lines(tmp_path: Path) -> None:
    script = "import sys; print('loading model'); print('error: out of memory'); sys.exit(3)"
    launcher = EngineLauncher(f"{sys.executable} -c \"{script}\" --port {{port}}", tmp_path / "engine.log")
    with pytest.raises(EngineLaunchError, match=r"exited with code 3 before it was healthy(.|\n)*error: out of memory"):
        launcher.start()


def test_engine_that_never_gets_healthy_times_out_and_is_stopped(tmp_path: Path) -> None:
    launcher = EngineLauncher(f"{sys.executable} -c \"import time; print('hang'); time.sleep(60)\" {{port}}",
                              tmp_path / "engine.log", health_timeout_s=1.0)
    with pytest.raises(EngineLaunchError, match=r"not healthy within 1.0 s(.|\n)*hang"):
        launcher.start()
    assert not launcher.alive()


def test_missing_program_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(EngineLaunchError, match="scripts/setup.sh"):
        EngineLauncher("no-such-engine-binary --port {port}", tmp_path / "engine.log").start()


def test_model_path_placeholder_needs_a_model_path(tmp_path: Path) -> None:
    with pytest.raises(EngineLaunchError, match="engine.model_path is not set"):
        EngineLauncher("llama-server -m {model_path}", tmp_path / "engine.log")
