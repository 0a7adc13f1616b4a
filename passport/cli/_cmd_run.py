"""`passport run SPEC`: canaries, the timed load, the passport."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from passport.cli._cmd_ledger import add_ledger_option, add_when_asked
from passport.cli._exit import ExitCode
from passport.cli._shared import Printer, add_endpoint_options, add_load_options, load_spec_with_overrides
from passport.cli._vocabulary import add_borrowed_options

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    run = sub.add_parser(
        "run", help="run a spec: canaries, timed load, passport",
        description="Run the benchmark a YAML spec declares, or one given by flags alone, and write "
                    "results/<name>-<UTC>-<id>/ (passport.json, report.md, requests/chunks/schedule/telemetry "
                    ".parquet, and spec.yaml: the spec as run, flags applied, which `passport run` runs again).",
        epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("spec", type=Path, nargs="?", help="the run spec (YAML); or give --endpoint and the load flags")
    run.add_argument("--force", action="store_true",
                     help="time the run even if the canaries fail (the passport says so prominently)")
    add_ledger_option(run)
    run.add_argument("--no-fail", "--exit-zero", action="store_true", dest="no_fail",
                     help="exit 0 whatever the verdict (an exploratory run): the verdict is still written and printed; "
                          "a usage or internal error still exits 2 or 3")
    add_endpoint_options(run)
    add_load_options(run)
    add_borrowed_options(run)


def main(args: argparse.Namespace) -> ExitCode:
    spec, raw, merged, overrides = load_spec_with_overrides(args)  # a bad spec is refused before the heavy imports
    if args.flag_sweep is not None:  # a list of loads, or guidellm's --rate-type sweep: one run per level
        from passport.cli._cmd_sweep import run_levels

        if not args.quiet:
            print(f"passport: {args.flag_sweep['flag']} gives several load levels: running them as a sweep "
                  "(as `passport sweep`), one passport per level", file=sys.stderr)
        return run_levels(args, spec, merged, overrides)
    from passport.report import headline_lines
    from passport.run import execute

    with Printer(args.quiet) as printer:
        outcome = execute(spec, raw, overrides, args.out, force=args.force, **printer.kwargs())
    if outcome.passport.verdict in ("INCOMPLETE", "SATURATED"):
        kept = sum(entry["rows"] or 0 for name, entry in outcome.passport.files.items() if name.startswith("requests."))
        printer.status(f"{outcome.passport.verdict}: {outcome.passport.validity.incomplete_reason}; "
                       f"{kept} requests recorded and kept")
    if outcome.fallback is not None:
        printer.status(f"the run folder {outcome.folder} took no more writes: passport.json was written to "
                       f"{outcome.fallback} instead (no report); the reason above says where the raw files are")
        print(f"passport: {outcome.fallback / 'passport.json'}")
        return ExitCode.OK if args.no_fail else ExitCode.of_verdict(outcome.passport.verdict)
    print(f"passport: {outcome.folder / 'passport.json'}")
    print(f"report:   {outcome.folder / 'report.md'}")
    for line in headline_lines(outcome.passport):
        print(line)
    if args.save_result:
        from passport.cli._peer_results import save_result

        print(f"vllm result: {save_result(args, outcome.folder)}")
    if args.output_path is not None:
        from passport.cli._peer_results import write_guidellm_report

        print(f"guidellm report: {write_guidellm_report(args.output_path, [outcome.folder])}")
    if not add_when_asked(args, outcome.folder):
        return ExitCode.OK if args.no_fail else ExitCode.FAILED
    verdict = ExitCode.of_verdict(outcome.passport.verdict)
    if args.no_fail and verdict != ExitCode.OK:
        printer.status(f"--no-fail: exit 0 although the run is {outcome.passport.verdict}")
        return ExitCode.OK
    return verdict
