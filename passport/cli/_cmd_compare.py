"""`passport compare A B [C ...]`: comparable? then which differences are significant."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    compare = sub.add_parser(
        "compare", help="check two or more runs are comparable, then show which differences are significant",
        description="Check the comparability invariants against the first run (model, precision, decoding, "
                    "workload, load, window; cache: the declared prefix-cache policy and the measured share of "
                    "prompt tokens served from the cache, within 10 points; validity: every run VALID) and list "
                    "every identity and protocol field whose value differs; if the invariants hold, show each "
                    "headline statistic side by side with the interval of the difference and its p-value, both "
                    "Holm-corrected across the statistics (each run's error from time blocks of its window, so "
                    "drift within a run widens it), and a verdict (faster, slower, higher, lower, no significant "
                    "difference, inconclusive where the interval reaches past --min-effect, too few samples). "
                    "Exit 0 comparable, 1 not comparable. Given a campaign folder "
                    "and two of its arms, compares the arms' repetition sets instead, on the variance between "
                    "repetitions (Welch's t over each statistic's per-run values).",
        epilog="examples:\n  passport compare results/run-a results/run-b\n"
               "  passport compare results/<name>-campaign-... np1 np2   (two arms, over their repetitions)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR",
                         help="run folders, the first the base; or a campaign folder and two of its arm names")
    compare.add_argument("--report", type=Path, metavar="DIR",
                         help="also write report.md and report.html (with side-by-side CDFs) into DIR")
    compare.add_argument("--alpha", type=float, default=0.05, metavar="A",
                         help="family-wise error rate of each comparison, Holm-corrected (default 0.05)")
    compare.add_argument("--min-effect", type=float, default=0.10, metavar="F",
                         help="smallest relative difference called faster/slower (default 0.10: a level shift between "
                              "two runs shows in no block of either; lower it when runs have repetitions or you "
                              "have measured that variance)")
    compare.add_argument("--allow", action="append", default=[], metavar="FIELD",
                         help="compare even though FIELD differs (model, precision, decoding, workload, load, "
                              "window, cache, validity); stated in the output")
    add_trust_options(compare)


def main(args: argparse.Namespace) -> ExitCode:
    from passport._errors import PassportError
    from passport.judge import compare_runs, render_comparison

    if len(args.runs) < 2:
        raise PassportError("compare needs at least two run folders")
    if not 0 < args.alpha < 1 or args.min_effect < 0:
        raise PassportError("--alpha must be between 0 and 1 and --min-effect at least 0, e.g. --alpha 0.05 "
                            "--min-effect 0.1")
    if (args.runs[0] / "campaign.json").is_file():
        return _compare_arms(args)
    from passport.audit import open_run

    trust = trust_of(args)
    opened = [open_run(run, trust) for run in args.runs]  # an edited passport or file is refused, not compared
    comparison = compare_runs(opened, args.allow, alpha=args.alpha, min_effect=args.min_effect)
    for line in render_comparison(comparison):
        print(line)
    if args.report:
        from passport.report import comparison_blocks, write_reports

        args.report.mkdir(parents=True, exist_ok=True)
        _, page = write_reports(args.report, "Comparison: " + " vs ".join(r.name for r in args.runs),
                                comparison_blocks(comparison))
        print(f"report: {page}")
    return ExitCode.of(comparison.comparable)


def _compare_arms(args: argparse.Namespace) -> ExitCode:
    from passport._errors import PassportError
    from passport.judge import trusted_campaign
    from passport.judge._arm_compare import compare_arm_sets, render_arm_comparison

    if len(args.runs) != 3:
        raise PassportError(f"{args.runs[0]} is a campaign: give it and two of its arms, e.g. passport compare "
                            f"{args.runs[0]} np1 np2")
    campaign = trusted_campaign(args.runs[0], trust_of(args))  # an edited record, arm or file is refused
    found = compare_arm_sets(campaign, str(args.runs[1]), str(args.runs[2]), args.alpha, args.min_effect)
    for line in render_arm_comparison(found):
        print(line)
    return ExitCode.OK
