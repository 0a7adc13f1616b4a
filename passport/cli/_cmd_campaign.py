"""`passport campaign SPEC`: several launches of one model, one workload, one ranked answer."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._cmd_ledger import add_ledger_option, add_when_asked
from passport.cli._exit import ExitCode
from passport.cli._shared import Printer, add_trust_options, trust_of

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    campaign = sub.add_parser(
        "campaign", help="run several arms (engine launches or endpoints) on one workload and rank them",
        description="Run every arm of a campaign spec `repetitions` times (3 by default), in rounds whose order "
                    "rotates (A B C, then B C A, ...): the capacity arithmetic first (an arm that does not fit is "
                    "never launched), then launch or attach (relaunch: once keeps each engine up for every round; "
                    "per_round starts it afresh), probe, canaries (a HOLD arm is never ranked), the timed run (or a "
                    "sweep), discards; one passport per repetition under <out>/<name>-campaign-<UTC>-<id>/arms/. "
                    "Every arm gets the same workload, schedule, load, "
                    "decoding, window and warm-up (the spec's run: section); a model or precision differing from "
                    "the other arms' without being declared in the arm's varies: is reported as a broken "
                    "invariant and the arm is not ranked. Each arm's objective (goodput under the SLO by default) is "
                    "the mean of its repetitions with a 95 % t-interval; arms are compared pairwise (Welch's t, "
                    "Holm-corrected) and grouped: arms that cannot be told apart (or differ by less than "
                    "min_difference, 5 %) share a rank, and the best arm is named only when it is separated from "
                    "every other; otherwise the answer says which arms tie and the advice falls to cost, then to "
                    "the simpler launch. An arm that fails to start or dies is recorded with the reason and the "
                    "campaign goes on; Ctrl-C stops it with every arm so far recorded. Writes campaign.json, "
                    "report.md and report.html; `passport verify`, `passport gate` and `passport show` read the "
                    "campaign folder. --resume continues an interrupted campaign in its folder. Exit 0 when an arm "
                    "was ranked (a tie included), 1 when none was or the campaign was interrupted.",
        epilog="examples:\n  passport campaign specs/llamacpp-campaign.yaml\n"
               "  passport campaign specs/llamacpp-campaign.yaml --resume results/<name>-campaign-...\n"
               "  passport gate results/<name>-campaign-... --require 'arms.best.goodput.requests_per_s > 2' "
               "--require 'arms.held == 0'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    campaign.add_argument("spec", type=Path, help="the campaign spec (YAML): run:, arms:, objective:, cost:")
    campaign.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                          help="output folder (default: results/)")
    campaign.add_argument("--resume", type=Path, metavar="CAMPAIGN_DIR",
                          help="continue the stopped campaign in this folder (the same spec; recorded repetitions "
                               "are kept once their passports' hashes, signatures and files check: signed by this "
                               "machine's or the team's key, or by a --key)")
    campaign.add_argument("--quiet", action="store_true", help="no progress bar or status lines")
    add_trust_options(campaign, unsigned=False)
    add_ledger_option(campaign)


def main(args: argparse.Namespace) -> ExitCode:
    from passport.model import load_campaign

    campaign, specs, raw = load_campaign(args.spec)  # a bad spec is refused before the heavy imports
    from passport.report import arm_lines, campaign_lines
    from passport.run import resume_campaign, run_campaign

    with Printer(args.quiet) as printer:
        if args.resume is not None:
            outcome = resume_campaign(campaign, specs, raw, args.resume, **printer.kwargs(), keys=trust_of(args).keys)
        else:
            outcome = run_campaign(campaign, specs, raw, args.out, **printer.kwargs())
    print(f"campaign: {outcome.folder / 'campaign.json'}")
    print(f"report:   {outcome.folder / 'report.html'}")
    for line in arm_lines(outcome.record) + campaign_lines(outcome.record):
        print(line)
    if outcome.record["interrupted"]:
        kept = sum(len(arm["repetitions"]) for arm in outcome.record["arms"])
        printer.status(f"interrupted: {kept} repetition(s) recorded and kept in {outcome.folder}; "
                       f"`passport campaign {args.spec} --resume {outcome.folder}` runs the rest")
        return ExitCode.FAILED
    if not add_when_asked(args, outcome.folder):
        return ExitCode.FAILED
    return ExitCode.of(outcome.record["counts"]["ranked"] > 0)
