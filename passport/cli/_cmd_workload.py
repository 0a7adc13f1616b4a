"""`passport workload SPEC`: what a spec will offer, without sending anything."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    workload = sub.add_parser(
        "workload", help="summarize what a spec will offer (counts, length histograms, hashes); sends nothing",
        description="Materialize the spec's workload and schedule exactly as `passport run` would and print a "
                    "summary: distinct requests, scheduled arrivals, target and realized length histograms, "
                    "inter-arrival gaps, the shares of each traffic shape (sessions, structured output, tools, "
                    "images, mix components), and the hashes the passport will carry. Nothing is sent. "
                    "`--presets` lists the bundled workload presets (`workload: {preset: NAME}` in a spec).",
    )
    workload.add_argument("spec", type=Path, nargs="?", help="the run spec (YAML)")
    workload.add_argument("--presets", action="store_true", help="list the bundled workload presets and exit")


def main(args: argparse.Namespace) -> ExitCode:
    if args.presets:
        from workloads import preset_lines

        print("\n".join(preset_lines()))
        return ExitCode.OK
    from passport._errors import SpecError
    from passport.model import load_spec
    from passport.run import workload_summary

    if args.spec is None:
        raise SpecError("give a spec (passport workload SPEC), or --presets to list the bundled presets")
    spec, _ = load_spec(args.spec)
    for line in workload_summary(spec):
        print(line)
    return ExitCode.OK
