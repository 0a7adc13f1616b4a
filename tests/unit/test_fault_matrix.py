"""The README's fault matrix is the one the tests declare, and the generator notices when not."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "fault_matrix.py"


def _matrix() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fault_matrix", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_the_one_the_tests_declare() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_every_row_names_a_test_that_exists_and_the_table_covers_the_hostile_tests() -> None:
    rows = _matrix().declared_faults(REPO / "tests")
    for _, _, proven_by in rows:
        path, name = proven_by.strip("`").split("::")
        assert f"def {name}(" in (REPO / path).read_text()
    proving = {proven_by.strip("`").split("::")[0] for _, _, proven_by in rows}
    assert {"tests/integration/test_hostile.py", "tests/integration/test_faults.py",
            "tests/unit/test_sandbox.py"} <= proving


def test_a_new_declaration_makes_the_check_fail(tmp_path: Path) -> None:
    matrix = _matrix()
    readme = (REPO / "README.md").read_text()
    rows = matrix.declared_faults(REPO / "tests")
    extra = ("a | piped case", "does a thing", "`tests/x.py::test_x`")
    rendered = matrix.render(readme, [*rows, extra])
    assert rendered != readme and "| a \\| piped case | does a thing |" in rendered
    assert matrix.render(readme, rows) == readme
