"""`passport verify RUN_DIR`: recompute everything a passport says from its run folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    verify = sub.add_parser(
        "verify", help="recompute a run's figures, validity and verdict from its raw logs; check every hash",
        description="Check RUN_DIR/passport.json against its run folder: its content hash, the sha256 of every "
                    "file it lists, the declarations frozen before the run; recompute the results, counts, canary "
                    "summary, every validity rule and the verdict from the raw files; re-render the reports and "
                    "replay the recorded probes behind the identity; check the signature of the content hash "
                    "(schema 1.4 on), and with --key that it was made by a key you trust. A campaign folder: "
                    "its campaign.json recomputed from its spec and its arms' passports, and every arm's run "
                    "verified. Prints 'verified' or each difference. Exit 0 "
                    "verified, 1 differences found, 2 when RUN_DIR holds no passport this version reads.",
    )
    verify.add_argument("run_dir", type=Path, help="a run folder (results/<run>/) or a campaign folder")
    add_trust_options(verify, unsigned=False)


def main(args: argparse.Namespace) -> ExitCode:
    from passport import verify

    found = verify(args.run_dir, trust_of(args).keys)
    if found.verified:
        unsigned = "" if not found.unsigned else ", UNSIGNED" if not found.campaign else \
            f", UNSIGNED ({len(found.unsigned)} arm runs)"
        print(f"verified{unsigned}: {args.run_dir}")
        if found.unsigned:
            print("unsigned: nothing says whose run this is (schema 1.3 and earlier were never signed); gate, compare, "
                  "show, export and ledger add act on it only with --allow-unsigned")
        print(f"checked: {', '.join(found.checked)}")
        for note in found.notes:
            print(f"note: {note}")
        return ExitCode.OK
    print(f"NOT verified: {args.run_dir}")
    for problem in found.problems:
        print(f"- {problem}")
    return ExitCode.FAILED
