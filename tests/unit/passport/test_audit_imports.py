"""The auditor's package needs numpy, pyarrow and the run folder only (docs/concepts/design.md): importing it,
and verifying a recorded run with it, loads neither the load generator nor the heavy libraries."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

HEAVY = ("harness", "canaries", "workloads", "matplotlib", "psutil", "pydantic", "yaml", "httpx", "rich",
         "transformers", "passport.model", "passport.run", "passport.report", "passport.judge", "passport.cli")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    return [m for m in result.stdout.strip().split(",") if m]


def test_importing_the_audit_package_loads_nothing_heavy() -> None:
    assert _loaded_after("import passport.audit") == []


def test_verifying_a_recorded_run_loads_nothing_heavy() -> None:
    code = ("from pathlib import Path\nfrom passport.audit import verify_run\n"
            "assert verify_run(Path('tests/data/runs/base')).problems == []")
    assert _loaded_after(code) == []
