"""`passport verify RUN_DIR`: recompute everything a passport says from its run folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode

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
    verify.add_argument("--key", action="append", default=[], metavar="FINGERPRINT",
                        help="require a signature by this key (sha256:..., as `passport.json` signature.fingerprint "
                             "shows it); repeatable: any of them")


def _verify_run(run_dir: Path, keys: tuple[str, ...] = ()) -> tuple[list[str], list[str], list[str]]:
    """(problems, what was checked, notes) of one run folder."""
    from passport.audit import verify_run
    from passport.model import passport_model, read_passport_json
    from passport.report import check_reports
    from passport.run import replay_identity

    verification = verify_run(run_dir, keys)
    problems, checked = list(verification.problems), list(verification.checked)
    notes: list[str] = []
    if not any(p.startswith("passport.json: content_sha256") for p in problems):
        passport = passport_model(read_passport_json(run_dir), run_dir)
        if passport.content_sha256 is not None:
            checked += ["reports", "identity (recorded probes)"]
            report_problems, notes = check_reports(passport, run_dir)
            problems += report_problems + replay_identity(passport, run_dir)
    return problems, checked, notes


def _verify_campaign(folder: Path, keys: tuple[str, ...] = ()) -> tuple[list[str], list[str], list[str]]:
    """A campaign folder: its record recomputed from its spec and its arms' passports, and every
    arm's run verified as a run."""
    from passport.judge import read_campaign, recompute_campaign

    record = read_campaign(folder)
    problems = recompute_campaign(folder, record)
    checked = ["campaign content hash", "spec hash", "repetitions from the arms' passports", "capacity arithmetic",
               "intervals, comparisons, groups and best", "advice"]
    notes: list[str] = []
    for arm in record["arms"]:
        runs = [r for r in arm["repetitions"] if r["run"] is not None]
        for row in runs:
            label = f"arm {arm['name']} round {row['round']}"
            arm_problems, _, arm_notes = _verify_run(folder / row["run"], keys)
            problems += [f"{label}: {p}" for p in arm_problems]
            notes += [f"{label}: {n}" for n in arm_notes]
        if runs:
            checked.append(f"arm {arm['name']} ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return problems, checked, notes


def main(args: argparse.Namespace) -> ExitCode:
    from passport.judge import CAMPAIGN_FILE

    campaign = (args.run_dir / CAMPAIGN_FILE).is_file()
    problems, checked, notes = (_verify_campaign if campaign else _verify_run)(args.run_dir, tuple(args.key))
    if not problems:
        print(f"verified: {args.run_dir}")
        print(f"checked: {', '.join(checked)}")
        for note in notes:
            print(f"note: {note}")
        return ExitCode.OK
    print(f"NOT verified: {args.run_dir}")
    for problem in problems:
        print(f"- {problem}")
    return ExitCode.FAILED
