"""`passport verify RUN_DIR`: recompute a run's figures from its raw logs, check every hash."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    verify = sub.add_parser(
        "verify", help="recompute a run's results from its raw logs and check file hashes",
        description="Recompute every result of RUN_DIR/passport.json from the Parquet files and check the "
                    "sha256 of every raw file. Prints 'verified' or each difference. Exit 0 verified, 1 differences "
                    "found, 2 when RUN_DIR is not a readable run folder.",
    )
    verify.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")


def main(args: argparse.Namespace) -> ExitCode:
    from passport.audit import verify_run

    problems = verify_run(args.run_dir)
    if not problems:
        print(f"verified: {args.run_dir}")
        return ExitCode.OK
    print(f"NOT verified: {args.run_dir}")
    for problem in problems:
        print(f"- {problem}")
    return ExitCode.FAILED
