"""`passport recover RUN_DIR`: the passport of a run that was killed before writing one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    recover = sub.add_parser(
        "recover", help="turn the parts of a killed run into its passport (INCOMPLETE), every recorded request kept",
        description="A run killed on the way (SIGKILL, out of memory, power cut) leaves passport.draft.json and its "
                    "tables as Parquet parts. recover joins the parts, recomputes every figure as a finished run "
                    "does, and writes passport.json marked INCOMPLETE with the reason, and the reports. verify, gate "
                    "and compare then work on the folder. Exit 1 (the run is INCOMPLETE), 2 when there is nothing "
                    "to recover.",
    )
    recover.add_argument("run_dir", type=Path, help="the killed run's folder (results/<run>/)")


def main(args: argparse.Namespace) -> ExitCode:
    from passport.report import headline_lines
    from passport.run import recover

    passport = recover(args.run_dir)
    kept = passport.files.get("requests.parquet")
    print(f"passport: {args.run_dir / 'passport.json'} (recovered; {kept['rows'] if kept else 0} requests kept)")
    for line in headline_lines(passport):
        print(line)
    return ExitCode.of_verdict(passport.verdict)
