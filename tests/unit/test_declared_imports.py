"""Every third-party module the shipped packages import is one a user's install brings.

A user installs passport without the test extra (`pip install passport`, or the wheel with base
dependencies only). A module imported by passport, harness, workloads or canaries (at the top of a
file or inside a function) must therefore be in `[project] dependencies`, or in a named feature
extra and imported under a guard that names that extra (`passport._optional.require`, or an import
inside a `try` that handles ImportError). The test extra never counts: it is what hid `cryptography`
(it came through trustme) while every passport run of a plain install ended in a traceback.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from passport._optional import EXTRA_MODULES
from tests.conftest import REPO

SHIPPED = ("passport", "harness", "workloads", "canaries")
NOT_FEATURES = frozenset({"test", "docs"})  # extras that install tools for developers, not features


@dataclass(frozen=True)
class Import:
    module: str  # the top-level module name
    where: str  # file:line
    guarded: bool  # through require(), or inside a try that handles ImportError


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    names = [kinds] if not isinstance(kinds, ast.Tuple) else list(kinds.elts)
    return kinds is None or any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "Exception")
                                for n in names)


class _Imports(ast.NodeVisitor):
    def __init__(self, where: str) -> None:
        self.where, self.guard, self.found = where, 0, list[Import]()

    def _add(self, module: str, node: ast.AST, guarded: bool = False) -> None:
        self.found.append(Import(module.split(".")[0], f"{self.where}:{getattr(node, 'lineno', 0)}",
                                 guarded or self.guard > 0))

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h) for h in node.handlers)
        self.guard += guarded
        for statement in node.body:
            self.visit(statement)
        self.guard -= guarded
        for rest in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(rest)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node.module, node)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        first = node.args[0] if node.args else None
        if name in ("require", "import_module") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            self._add(first.value, node, guarded=name == "require")
        self.generic_visit(node)


def imports_in(root: Path, packages: tuple[str, ...]) -> Iterator[Import]:
    """Every import of a module outside the standard library and `packages`, in every .py file."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            visitor = _Imports(str(path.relative_to(root)))
            visitor.visit(ast.parse(path.read_text(), str(path)))
            yield from (i for i in visitor.found
                        if i.module not in sys.stdlib_module_names and i.module not in packages)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    return {_normal(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r).group(1)) for r in requirements}  # type: ignore[union-attr]


def problems(root: Path, packages: tuple[str, ...] = SHIPPED) -> list[str]:
    """What a base install of the project at `root` would lack, one line each."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    base = _names(project.get("dependencies", []))
    extras = {extra: _names(reqs) for extra, reqs in project.get("optional-dependencies", {}).items()
              if extra not in NOT_FEATURES}
    installed = {module: {_normal(d) for d in dists} for module, dists in metadata.packages_distributions().items()}
    found = []
    for imp in imports_in(root, packages):
        dists = installed.get(imp.module, {_normal(imp.module)})
        if dists & base:
            continue
        feature = [extra for extra, names in extras.items() if dists & names]
        if not feature:
            found.append(f"{imp.where}: `{imp.module}` is declared neither in [project] dependencies nor in a "
                         "feature extra (the test extra does not count)")
        elif not imp.guarded:
            found.append(f"{imp.where}: `{imp.module}` (extra {feature[0]!r}) is imported without a guard: use "
                         "passport._optional.require, or import it in a try that handles ImportError")
    return found


def test_every_import_of_the_shipped_packages_is_declared() -> None:
    assert problems(REPO) == []


def test_the_extras_of_the_guard_are_the_extras_of_pyproject() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRA_MODULES.items():
        assert module in _names(extras[extra]), (module, extra)


def _project(tmp_path: Path, dependencies: list[str], code: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\ndependencies = [" + ", ".join(f"'{d}'" for d in dependencies) + "]\n"
        "[project.optional-dependencies]\nray = ['ray>=2']\ntest = ['trustme', 'pytest']\n")
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "mod.py").write_text(code)
    return tmp_path


def test_an_undeclared_import_is_found_even_inside_a_function(tmp_path: Path) -> None:
    code = "import os\nimport numpy\n\ndef sign():\n    from cryptography.hazmat import x\n    return x\n"
    root = _project(tmp_path, ["numpy>=1"], code)
    assert problems(root, ("pkg",)) == [
        "pkg/mod.py:5: `cryptography` is declared neither in [project] dependencies nor in a feature extra "
        "(the test extra does not count)"]
    assert problems(_project(tmp_path, ["numpy>=1", "cryptography>=42"], code), ("pkg",)) == []


def test_the_test_extra_does_not_count(tmp_path: Path) -> None:
    root = _project(tmp_path, [], "import trustme\n")
    assert len(problems(root, ("pkg",))) == 1


def test_a_distribution_named_otherwise_than_its_module_is_matched(tmp_path: Path) -> None:
    # `yaml` comes from the distribution PyYAML: declared by that name, it is found (and when missing, named)
    assert problems(_project(tmp_path, ["PyYAML>=6"], "import yaml\n"), ("pkg",)) == []
    assert problems(_project(tmp_path, ["numpy"], "import yaml\n"), ("pkg",)) != []


def test_a_feature_extra_needs_a_guard(tmp_path: Path) -> None:
    bare = "def go():\n    import ray\n    return ray\n"
    assert problems(_project(tmp_path, [], bare), ("pkg",)) == [
        "pkg/mod.py:2: `ray` (extra 'ray') is imported without a guard: use passport._optional.require, or "
        "import it in a try that handles ImportError"]
    for guarded in ("def go():\n    try:\n        import ray\n    except ImportError:\n        return None\n",
                    "from passport._optional import require\n\ndef go():\n    return require('ray', 'x')\n"):
        assert problems(_project(tmp_path, ["passport"], guarded), ("pkg",)) == [], guarded
