"""`python -m tests.inject MODULE:NAME [MODULE:NAME ...] -- ARGS`: `passport ARGS` in this process
with each named function replaced by one that raises RuntimeError("injected failure"), so a test
can make one stage of a real run fail (signing, the report, the ledger) and see what a user sees.
The exit code is passport's own; an exception that escapes the CLI is a traceback, as for a user.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn


def _fail(*_args: object, **_kwargs: object) -> NoReturn:
    raise RuntimeError("injected failure")


def main(argv: list[str]) -> int:
    split = argv.index("--")
    for target in argv[:split]:
        module, name = target.split(":")
        setattr(importlib.import_module(module), name, _fail)
    from passport.cli import main as passport

    return passport(argv[split + 1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
