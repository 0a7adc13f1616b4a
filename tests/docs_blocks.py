"""Shell blocks of the README and the docs, run as written.

A block is runnable when the line before its opening fence is an HTML comment starting
`<!-- runnable` (or `<!-- tutorial:ledger`, the ledger tutorial, which test_ledger.py runs with
its own fixtures). `as_script` turns one into a bash script: every line as written under `set
-eu`, except that a line annotated `# -> exit N` is run through `expect N`, which checks that
exit code instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

__all__ = ["runnable_blocks", "as_script", "block_after"]

_EXPECT = ('expect() { local want=$1; shift; local got=0; "$@" || got=$?; '
           'if [ "$got" != "$want" ]; then echo "expected exit $want, got $got: $*" >&2; exit 99; fi; }')
_RUNNABLE = re.compile(r"^<!-- runnable[^\n]*-->\n```(?:bash|sh)\n(.*?)\n```", re.M | re.S)


def block_after(page: Path, marker: str) -> str:
    """The shell block right after the line `marker` of `page`."""
    return page.read_text().split(f"{marker}\n```bash\n", 1)[1].split("\n```", 1)[0]


def runnable_blocks() -> list[tuple[str, str]]:
    """(where, block) of every block marked runnable in README.md and docs/."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for i, match in enumerate(_RUNNABLE.finditer(page.read_text())):
            found.append((f"{page.relative_to(REPO)}#{i + 1}", match.group(1)))
    return found


def as_script(block: str) -> str:
    """`block` as a bash script (see the module docstring)."""
    lines = ["set -eu", _EXPECT]
    for line in block.splitlines():
        checked = re.match(r"^(.*?)\s+# -> exit (\d+)", line)
        lines.append(f"expect {checked.group(2)} {checked.group(1)}" if checked else line)
    return "\n".join(lines) + "\n"
