"""README command 1, verbatim: `./scripts/demo.sh` sets up what it needs (cached by the suite's own
set-up), launches llama-server with Gemma 3 270M, runs the bundled spec and prints the passport.
Run from a folder that is not the repository, as a user who typed the path would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_readme_command_1_prints_a_valid_passport_that_verifies(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    assert "./scripts/demo.sh     # 1." in readme  # the command this test runs is the one the README gives
    result = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 0 and "Result is: VALID" in result.stdout, result.stdout + result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("passport: "))
    folder = REPO / Path(line.split()[1]).parent  # demo.sh runs in the repository: results/ is relative to it
    passport = json.loads((folder / "passport.json").read_text())
    assert passport["verdict"] == "VALID" and passport["identity"]["engine.name"]["value"] == "llama.cpp"
    assert passport["validity"]["canaries"]["status"] == "passed"
    verified = run_cli("verify", str(folder))
    assert verified.returncode == 0, verified.stdout
