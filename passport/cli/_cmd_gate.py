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
               "  'failure_inclusive.e2e.p99 < 10s'   'throughput.output_tokens_per_s.mean >= 20'\n"
               "on a campaign folder:\n"
               "  'arms.best.goodput.requests_per_s > 2'   'arms.held == 0'   'arms.np2.ttft.p99 < 500ms'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument("run_dir", type=Path, help="a run folder (results/<run>/) or a campaign folder")
    gate.add_argument("--require", action="append", default=[], metavar="CONDITION", help="a condition (repeatable)")
    gate.add_argument("--file", type=Path, metavar="GATE.yaml", help="a YAML file with `require: [conditions]`")
    gate.add_argument("--key", action="append", default=[], metavar="FINGERPRINT",
                      help="act only on a passport signed by this key (sha256:...); repeatable: any of them")
    gate.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")


def main(args: argparse.Namespace) -> ExitCode:
    from passport.judge import GateError, evaluate_gate, load_gate_file, parse_condition, resolve
    from passport.model import read_passport
    from passport.report import junit_xml

    texts = list(args.require) + (load_gate_file(args.file) if args.file else [])
    if not texts:
        raise GateError("no conditions: pass --require 'CONDITION' or --file GATE.yaml")
    campaign = (args.run_dir / "campaign.json").is_file()  # passport.judge.CAMPAIGN_FILE, unimported for runs
    if campaign:
        from passport.judge import evaluate_campaign_gate, gate_view, resolve_campaign_name, trusted_campaign
    conditions = [parse_condition(text, resolve_campaign_name if campaign else resolve) for text in texts]
    if campaign:
        record = trusted_campaign(args.run_dir)  # a hand-edited record or arm passport is refused
        view = gate_view(record)
        for condition in conditions:
            arm = condition.target.path[1]
            if len(condition.target.path) > 2 and arm not in view["arms"] and arm != "best":
                raise GateError(f"gate condition {condition.text!r}: the campaign has no arm named {arm!r} (arms: "
                                f"{', '.join(r['name'] for r in record['arms'])})")
        name, results = str(record["name"]), evaluate_campaign_gate(record, conditions)
    else:
        from passport.audit import require_trusted

        require_trusted(args.run_dir, tuple(args.key))  # a hand-edited verdict or hash is refused, not gated on
        passport = read_passport(args.run_dir)
        name, results = passport.name, evaluate_gate(passport, conditions)
    width = max(len(r.condition.text) for r in results)
    for r in results:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.condition.text:<{width}}  {r.message}")
    failed = sum(not r.passed for r in results)
    print(f"Gate: {'PASSED' if not failed else 'FAILED'} ({len(results) - failed} of {len(results)} conditions met)")
    if args.junit:
        args.junit.write_text(junit_xml(name, results))
    return ExitCode.of(not failed)
