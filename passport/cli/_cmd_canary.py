"""`passport canary`: only a canary suite, against a spec's endpoint or a bare URL."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport._kindnames import KIND_PATHS
from passport.cli._exit import ExitCode
from passport.cli._shared import Printer, add_endpoint_options, load_spec_with_overrides

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    canary = sub.add_parser(
        "canary", help="run only a canary suite (exact output, JSON, tools, ...): a table of verdicts, exit 0/1",
        description="Run a canary suite against a spec's endpoint (launching its engine if declared) or against "
                    "--endpoint URL, one case at a time with greedy decoding. Prints each case's verdict, writes "
                    "canaries.parquet (every request and raw response), optionally JUnit XML and, with --record, a "
                    "copy of the suite whose exact-output references come from this (trusted) endpoint. Exit 0 when "
                    "every case passed, 1 when any failed, 2 on usage errors.",
        epilog="examples:\n  passport canary specs/llamacpp-smoke.yaml --suite gemma3-270m --junit canaries.xml\n"
               "  passport canary --endpoint http://127.0.0.1:8080/v1 --suite default\n"
               "  passport canary trusted.yaml --suite my-suite.yaml --record my-suite.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    canary.add_argument("spec", type=Path, nargs="?", help="a run spec (YAML); or give --endpoint")
    canary.add_argument("--suite", metavar="NAME|FILE", help="a bundled suite or a suite file (default: the "
                        "spec's `canaries`, else 'default')")
    canary.add_argument("--api", choices=list(KIND_PATHS), help="the endpoint's API for cases with api: auto")
    canary.add_argument("--junit", type=Path, metavar="FILE", help="also write the verdicts as JUnit XML")
    canary.add_argument("--record", type=Path, metavar="FILE",
                        help="write the suite with exact-output references recorded from this endpoint")
    add_endpoint_options(canary)


def main(args: argparse.Namespace) -> ExitCode:
    from harness import SUCCESS_OUTCOMES
    from passport._errors import SpecError
    from passport.model import parse_spec
    from passport.report import junit_cases
    from passport.run import run_canary_command

    if args.spec is not None:
        spec, _, _, _ = load_spec_with_overrides(args)
        if args.api:
            spec = spec.model_copy(update={"endpoint": spec.endpoint.model_copy(update={"api": args.api})})
    elif args.endpoint:
        endpoint = {"base_url": args.endpoint, "api": args.api or "chat", "api_key_env": args.api_key_env}
        spec = parse_spec({"endpoint": endpoint, "load": {"pattern": "closed", "concurrency": 1}}, "--endpoint")
    else:
        raise SpecError("give a spec or --endpoint URL (see passport canary --help)")
    suite = args.suite or (spec.canaries if args.spec is not None and spec.canaries != "none" else "default")
    with Printer(args.quiet) as printer:
        outcome = run_canary_command(spec, suite, args.out, record=args.record,
                                     status=None if args.quiet else printer.status)
    # Recording, an exact case answered is what is being recorded: not a failure to compare.
    recorded = {r.case_id for r in outcome.results
                if args.record and r.kind == "exact" and r.outcome in SUCCESS_OUTCOMES}
    width = max(len(r.case_id) for r in outcome.results)
    for r in outcome.results:
        verdict, reason = ("REC ", f"reference recorded: {r.actual[:60]!r}") if r.case_id in recorded else (
            "PASS" if r.passed else "FAIL", r.reason)
        print(f"{verdict}  {r.case_id:<{width}}  {r.kind:<12} {reason}")
        if verdict == "FAIL":
            print(f"      expected: {r.expected[:200]!r}\n      actual:   {r.actual[:200]!r}")
    info = outcome.info
    passed = all(r.passed or r.case_id in recorded for r in outcome.results)
    if args.record:
        failed = sum(not (r.passed or r.case_id in recorded) for r in outcome.results)
        print(f"Recorded {len(recorded)} exact-output references into {args.record}; {failed} other cases failed")
    else:
        print(f"Canaries: {info['status'].upper()} ({info.get('reason')}); suite {info['suite']} "
              f"sha256 {info.get('suite_sha256')}")
    print(f"cases: {outcome.folder / 'canaries.parquet'}")
    if args.junit:
        args.junit.write_text(junit_cases(f"passport canary {info['suite']}", [
            (f"passport.canary.{info['suite']}", r.case_id, r.passed, f"{r.reason}; expected {r.expected!r}, "
                                                                    f"actual {r.actual!r}") for r in outcome.results]))
    return ExitCode.of(passed)
