"""Write (or with --check, verify) the fault matrix in README.md from the tests' @fault decorators.

Reads tests/**/test_*.py with `ast` (nothing is imported or run) and lists, per `@fault(case,
behaviour)`, the case, what passport does and the test that proves it, between the README's
`<!-- fault-matrix:start -->` and `<!-- fault-matrix:end -->` lines.
    python scripts/fault_matrix.py          rewrite the table
    python scripts/fault_matrix.py --check  exit 1 (saying so) when the README's table is stale
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
START, END = "<!-- fault-matrix:start -->", "<!-- fault-matrix:end -->"


def declared_faults(tests: Path) -> list[tuple[str, str, str]]:
    """(case, behaviour, test) for every @fault decorator under `tests`, in file and line order."""
    rows = []
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                        and decorator.func.id == "fault"):
                    case, behaviour = (ast.literal_eval(arg) for arg in decorator.args)
                    rows.append((str(path.relative_to(REPO)), decorator.lineno, case, behaviour, node.name))
    rows.sort()
    return [(case, behaviour, f"`{path}::{name}`") for path, _, case, behaviour, name in rows]


def cell(text: str) -> str:
    """`text` safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| case | what passport does | proven by |", "|---|---|---|"]
    lines += [f"| {cell(case)} | {cell(behaviour)} | {test} |" for case, behaviour, test in rows]
    return "\n".join(lines)


def render(readme: str, rows: list[tuple[str, str, str]]) -> str:
    """`readme` with the text between the markers replaced by the table."""
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md lacks the {START} / {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table(rows)}\n{END}{tail}"


def main() -> int:
    current = README.read_text()
    wanted = render(current, declared_faults(REPO / "tests"))
    if "--check" in sys.argv[1:]:
        if wanted != current:
            print("README.md's fault matrix is stale: run python scripts/fault_matrix.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
