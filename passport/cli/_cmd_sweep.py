"""`passport sweep SPEC`: a series of load levels, the knee and the saturation point."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import Printer, add_endpoint_options, load_spec_with_overrides

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    sweep = sub.add_parser(
        "sweep", help="run a series of load levels: one passport each, the knee and the saturation point",
        description="Run the spec at each load level of its `sweep:` section (request rates or concurrencies, "
                    "declared or automatic), one passport per level under <out>/<name>-sweep-<UTC>-<id>/levels/, "
                    "then write sweep.json, report.md and report.html with the latency-throughput curve, the knee "
                    "(highest load meeting the spec's SLO) and where the engine saturates. Exit 0 when every level "
                    "completed and a knee was found (or no SLO was declared), 1 otherwise.",
        epilog="examples:\n  passport sweep specs/llamacpp-sweep.yaml\n"
               "  passport sweep my.yaml --vary rate --levels 2,4,8,16\n  passport sweep my.yaml --vary concurrency",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("spec", type=Path, help="the run spec (YAML); its `sweep:` section, if any, sets the levels")
    sweep.add_argument("--vary", choices=["rate", "concurrency"], help="override sweep.vary")
    sweep.add_argument("--levels", metavar="L1,L2,...", help="override sweep.levels (ascending), or 'auto'")
    add_endpoint_options(sweep)


def main(args: argparse.Namespace) -> ExitCode:
    spec, _, merged, overrides = load_spec_with_overrides(args)  # a bad spec is refused before the heavy imports
    from passport.report import level_line, summary_lines
    from passport.run import run_sweep

    with Printer(args.quiet) as printer:
        outcome = run_sweep(spec, merged, overrides, args.out, **printer.kwargs())
    print(f"sweep:  {outcome.folder / 'sweep.json'}")
    print(f"report: {outcome.folder / 'report.html'}")
    for lv in outcome.levels:
        print(level_line(outcome.vary, outcome.has_slo, lv))
    for line in summary_lines(outcome):
        print(line)
    return ExitCode.of(outcome.succeeded)
