"""`passport gate RUN_DIR --require CONDITION`: a release gate over a passport."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    gate = sub.add_parser(
        "gate", help="check declared conditions against a run's passport (for release gates)",
        description="Evaluate conditions against RUN_DIR/passport.json and print each as PASS/FAIL with the "
                    "measured value. Exit 0 when all pass, 1 when any fails, 2 when a condition is not understood.",
        epilog="conditions: <name> <op> <value>, e.g.\n"
               "  'ttft.any.p99 < 2s'   'itl.chunk.p50 <= 50ms'   'error_rate < 0.5%'\n"
               "  'canaries == pass'    'verdict == VALID'        'outcomes.timeout == 0'    'slo == met'\n"
               "  'failure_inclusive.e2e.p99 < 10s'   'throughput.output_tokens_per_s.mean >= 20'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
    gate.add_argument("--require", action="append", default=[], metavar="CONDITION", help="a condition (repeatable)")
    gate.add_argument("--file", type=Path, metavar="GATE.yaml", help="a YAML file with `require: [conditions]`")
    gate.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")


def main(args: argparse.Namespace) -> ExitCode:
    from passport.judge import GateError, evaluate_gate, load_gate_file, parse_condition
    from passport.model import read_passport
    from passport.report import junit_xml

    texts = list(args.require) + (load_gate_file(args.file) if args.file else [])
    if not texts:
        raise GateError("no conditions: pass --require 'CONDITION' or --file GATE.yaml")
    conditions = [parse_condition(text) for text in texts]
    passport = read_passport(args.run_dir)
    results = evaluate_gate(passport, conditions)
    width = max(len(r.condition.text) for r in results)
    for r in results:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.condition.text:<{width}}  {r.message}")
    failed = sum(not r.passed for r in results)
    print(f"Gate: {'PASSED' if not failed else 'FAILED'} ({len(results) - failed} of {len(results)} conditions met)")
    if args.junit:
        args.junit.write_text(junit_xml(passport.name, results))
    return ExitCode.of(not failed)
