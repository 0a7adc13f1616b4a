"""`passport sweep SPEC` (or `passport run` given a list of loads): a series of load levels, the
knee and the saturation point."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import Printer, add_endpoint_options, add_load_options, load_spec_with_overrides
from passport.cli._vocabulary import add_borrowed_options

__all__ = ["add", "main", "run_levels"]


def add(sub: Any, epilog: str) -> None:
    sweep = sub.add_parser(
        "sweep", help="run a series of load levels: one passport each, the knee and the saturation point",
        description="Run the spec at each load level of its `sweep:` section (request rates or concurrencies, "
                    "declared or automatic), or at each level of a list given to --concurrency or --rate, one "
                    "passport per level under <out>/<name>-sweep-<UTC>-<id>/levels/, then write sweep.json, "
                    "report.md and report.html with the latency-throughput curve, the knee (highest load meeting "
                    "the spec's SLO) and where the engine saturates, each called only where it stands out from "
                    "the levels' noise. Exit 0 when every level completed and a knee was found (or no SLO was "
                    "declared), 1 otherwise.",
        epilog="examples:\n  passport sweep specs/llamacpp-sweep.yaml\n"
               "  passport sweep my.yaml --vary rate --levels 2,4,8,16\n  passport sweep my.yaml --vary concurrency\n"
               "  passport sweep --endpoint http://127.0.0.1:8000/v1 --concurrency 1,2,4,8 --num-prompts 200\n"
               "  passport run --base-url http://127.0.0.1:8000 --request-rate 1,2,4,inf --num-prompts 200\n"
               "  passport run --target http://127.0.0.1:8000 --rate-type sweep --max-seconds 30",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("spec", type=Path, nargs="?",
                       help="the run spec (YAML); its `sweep:` section, if any, sets the levels; or give --endpoint "
                            "and the load flags, with a list of levels")
    sweep.add_argument("--vary", choices=["rate", "concurrency"], help="override sweep.vary")
    sweep.add_argument("--levels", metavar="L1,L2,...", help="override sweep.levels (ascending), or 'auto'")
    sweep.add_argument("--no-fail", "--exit-zero", action="store_true", dest="no_fail",
                       help="exit 0 whatever the levels' verdicts and the knee (an exploratory sweep)")
    add_endpoint_options(sweep)
    add_load_options(sweep)
    add_borrowed_options(sweep)


def main(args: argparse.Namespace) -> ExitCode:
    spec, _, merged, overrides = load_spec_with_overrides(args)  # a bad spec is refused before the heavy imports
    return run_levels(args, spec, merged, overrides)


def run_levels(args: argparse.Namespace, spec: Any, merged: dict[str, Any], overrides: list[Any]) -> ExitCode:
    """Run the sweep `spec` declares (with `merged`, the YAML with the flags applied), print its
    levels and summary, and pick the exit code."""
    from passport.report import level_line, summary_lines
    from passport.run import run_sweep

    with Printer(args.quiet) as printer:
        outcome = run_sweep(spec, merged, overrides, args.out, **printer.kwargs())
    print(f"sweep:  {outcome.folder / 'sweep.json'}")
    print(f"report: {outcome.folder / 'report.html'}")
    for probe in (outcome.synchronous_probe, outcome.probe):
        if probe is not None:
            print("probe " + level_line("concurrency", False, probe))
    for lv in outcome.levels:
        print(level_line(outcome.vary, outcome.has_slo, lv))
    for line in summary_lines(outcome):
        print(line)
    if getattr(args, "save_result", False):
        from passport.cli._peer_results import save_result

        for lv in outcome.levels:
            print(f"vllm result: {save_result(args, outcome.folder / 'levels' / lv.run, lv.run)}")
    if getattr(args, "output_path", None) is not None and outcome.levels:
        from passport.cli._peer_results import write_guidellm_report

        probes = [p for p in (outcome.synchronous_probe, outcome.probe) if p is not None]
        folders = [outcome.folder / "levels" / lv.run for lv in (*probes, *outcome.levels)]
        print(f"guidellm report: {write_guidellm_report(args.output_path, folders)}")
    if getattr(args, "no_fail", False) and not outcome.succeeded:
        printer.status("--no-fail: exit 0 although the sweep did not succeed")
        return ExitCode.OK
    return ExitCode.of(outcome.succeeded)
