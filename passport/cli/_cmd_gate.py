"""`passport gate RUN_DIR --require CONDITION`: a release gate over a passport."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    gate = sub.add_parser(
        "gate", help="check declared conditions against a run's passport (for release gates)",
        description="Evaluate conditions against RUN_DIR/passport.json, alone or against a baseline, and print each "
                    "as PASS/FAIL (INCONCLUSIVE: a change the data cannot separate from noise) with the measured "
                    "value. Exit 0 when all pass, 1 when any fails (or is inconclusive, by default), 2 when a "
                    "condition is not understood or the run and its baseline are not comparable.",
        epilog="conditions: <name> <op> <value>, e.g.\n"
               "  'ttft.any.p99 < 2s'   'itl.chunk.p50 <= 50ms'   'error_rate < 0.5%'\n"
               "  'canaries == pass'    'verdict == VALID'        'outcomes.timeout == 0'    'slo == met'\n"
               "  'failure_inclusive.e2e.p99 < 10s'   'throughput.output_tokens_per_s.mean >= 20'\n"
               "on a campaign folder:\n"
               "  'arms.best.goodput.requests_per_s > 2'   'arms.held == 0'   'arms.np2.ttft.p99 < 500ms'\n"
               "against a baseline (--baseline RUN, CAMPAIGN or ledger:DIR):\n"
               "  'ttft.any.p99 regression < 5%'   'throughput.output_tokens_per_s.mean regression < 3%'\n"
               "  'canaries no_new_failures'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_argument("run_dir", type=Path, help="a run folder (results/<run>/) or a campaign folder")
    gate.add_argument("--require", action="append", default=[], metavar="CONDITION", help="a condition (repeatable)")
    gate.add_argument("--file", type=Path, metavar="GATE.yaml", help="a YAML file with `require: [conditions]`")
    add_trust_options(gate)
    gate.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")
    against = gate.add_argument_group(
        "against a baseline",
        "'<metric>.<stat> regression < 5%' (latency up or throughput/goodput down, relative) fails only when the "
        "change is beyond the tolerance AND significant (compare's statistics, Holm-corrected across the gate's "
        "regression conditions); beyond it but not separable from noise is INCONCLUSIVE. 'canaries "
        "no_new_failures': no canary case that passed in the baseline fails now. The runs must be comparable "
        "(model, precision, decoding, workload, load, window, cache; the baseline VALID), else exit 2.")
    against.add_argument("--baseline", metavar="BASE",
                         help="a run folder, a campaign folder (each arm against the arm of the same name), or "
                              "ledger:DIR (the latest VALID run there with this run's workload and schedule)")
    against.add_argument("--inconclusive", choices=("fail", "pass"), default="fail",
                         help="what an INCONCLUSIVE condition does to the exit code (default: fail)")
    against.add_argument("--allow", action="append", default=[], metavar="INVARIANT",
                         help="gate even though this comparability invariant differs (said in the output)")
    against.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                         help="with ledger:DIR, only baselines whose field has this value, e.g. engine.name=vllm")
    against.add_argument("--alpha", type=float, default=0.05,
                         help="family-wise error rate of the regression tests (default 0.05)")


def main(args: argparse.Namespace) -> ExitCode:
    from passport.judge import GateError, load_gate_file
    from passport.judge._baseline import parse_baseline_condition

    texts = list(args.require) + (load_gate_file(args.file) if args.file else [])
    if not texts:
        raise GateError("no conditions: pass --require 'CONDITION' or --file GATE.yaml")
    parsed = [(text, parse_baseline_condition(text)) for text in texts]
    against = [condition for _, condition in parsed if condition is not None]
    absolute = [text for text, condition in parsed if condition is None]
    if against and not args.baseline:
        raise GateError(f"gate condition {against[0].text!r} reads a baseline: pass --baseline RUN, CAMPAIGN or "
                        "ledger:DIR")
    if args.baseline and not against:
        raise GateError("--baseline is given but no condition reads it: add e.g. --require 'ttft.any.p99 regression "
                        "< 5%' or --require 'canaries no_new_failures'")
    trust = trust_of(args)

    @functools.cache
    def run() -> Any:
        """The gated run through the door, opened once however many conditions read it (an edited
        passport or file is refused, not gated on)."""
        from passport.audit import open_run

        return open_run(args.run_dir, trust)

    name, results = _absolute(args, absolute, trust, run)
    baseline_results = _against(args, against, trust, run) if against else []
    return _report(args, name, results, baseline_results)


def _absolute(args: argparse.Namespace, texts: list[str], trust: Any,
              run: Callable[[], Any]) -> tuple[str, list[Any]]:
    """The conditions on the run (or campaign) alone, as before any baseline: (its name, results);
    the run and every arm of a campaign through the door under `trust`."""
    from passport.judge import GateError, evaluate_gate, parse_condition, resolve
    from passport.model import passport_of

    campaign = (args.run_dir / "campaign.json").is_file()  # passport.judge.CAMPAIGN_FILE, unimported for runs
    if campaign:
        from passport.judge import evaluate_campaign_gate, gate_view, resolve_campaign_name, trusted_campaign
    conditions = [parse_condition(text, resolve_campaign_name if campaign else resolve) for text in texts]
    if campaign:
        record = trusted_campaign(args.run_dir, trust).record  # an edited record, arm or file is refused
        view = gate_view(record)
        for condition in conditions:
            arm = condition.target.path[1]
            if len(condition.target.path) > 2 and arm not in view["arms"] and arm != "best":
                raise GateError(f"gate condition {condition.text!r}: the campaign has no arm named {arm!r} (arms: "
                                f"{', '.join(r['name'] for r in record['arms'])})")
        return str(record["name"]), evaluate_campaign_gate(record, conditions) if conditions else []
    passport = passport_of(run())
    return passport.name, evaluate_gate(passport, conditions)


def _against(args: argparse.Namespace, conditions: list[Any], trust: Any, run: Callable[[], Any]) -> list[Any]:
    """The baseline conditions, each pair (run or arm) against its baseline, Holm-corrected
    together; both sides through the door under `trust`."""
    from passport.audit import open_run
    from passport.judge import INVARIANTS, GateError, trusted_campaign
    from passport.judge._baseline import Pair, campaign_pairs, evaluate_against, finish

    unknown = [name for name in args.allow if name not in INVARIANTS or name == "validity"]
    if unknown:
        raise GateError(f"--allow {unknown[0]!r}: not an invariant a baseline may differ in; use one of "
                        f"{', '.join(n for n in INVARIANTS if n != 'validity')} (the baseline must be VALID)")
    campaign = (args.run_dir / "campaign.json").is_file()
    spec = str(args.baseline)
    if spec.startswith("ledger:"):
        if campaign:
            raise GateError("--baseline ledger:DIR gates a run; for a campaign give the baseline campaign's folder")
        from passport.ledger import pick_baseline
        from passport.model import passport_of

        chosen = pick_baseline(Path(spec.removeprefix("ledger:")), passport_of(run()),
                               list(args.where), trust.keys, tuple(args.allow))
        print(chosen.line)
        base = chosen.run_dir
    else:
        base = Path(spec)
    if _same_run(args.run_dir, base):
        raise GateError(f"--baseline {base} is the gated run itself: a run cannot be its own baseline (give an "
                        "earlier run, campaign or ledger:DIR)")
    base_campaign = (base / "campaign.json").is_file()
    if campaign != base_campaign:
        raise GateError(f"--baseline {base}: a {'campaign' if campaign else 'run'} is gated against a "
                        f"{'campaign' if campaign else 'run'}, and this is a {'campaign' if base_campaign else 'run'}")
    missing: list[Any] = []
    if campaign:
        pairs, missing = campaign_pairs(trusted_campaign(args.run_dir, trust), trusted_campaign(base, trust),
                                        conditions)
    else:
        pairs = [Pair(run(), open_run(base, trust))]
    results = [r for pair in pairs for r in evaluate_against(pair, conditions, tuple(args.allow))]
    if args.allow:
        print(f"comparability: allowing {', '.join(args.allow)} to differ")
    return finish(results, args.alpha) + missing


def _same_run(run_dir: Path, base: Path) -> bool:
    """Whether `base` is the gated folder itself, by path or as a copy of the same sealed passport
    (a folder without a readable passport is not: the trust check that follows names why)."""
    from passport._errors import RunFolderError
    from passport.audit import read_passport_json

    if run_dir.resolve() == base.resolve():
        return True
    try:
        hashes = [read_passport_json(folder).get("content_sha256") for folder in (run_dir, base)]
    except RunFolderError:
        return False
    return hashes[0] is not None and hashes[0] == hashes[1]


def _report(args: argparse.Namespace, name: str, results: list[Any], against: list[Any]) -> ExitCode:
    from passport.judge._baseline import counts_as_failing
    from passport.report import baseline_line, junit_gate

    lines = [(("PASS" if r.passed else "FAIL"), r.condition.text, r.message) for r in results]
    lines += [(r.status, r.text + (f" [{r.scope}]" if r.scope else ""), baseline_line(r)) for r in against]
    width = max(len(text) for _, text, _ in lines)
    status_width = max(len(status) for status, _, _ in lines)  # PASS/FAIL, wider with an INCONCLUSIVE
    for status, text, message in lines:
        print(f"{status:<{status_width}}  {text:<{width}}  {message}")
    inconclusive = sum(r.status == "INCONCLUSIVE" for r in against)
    failed = sum(not r.passed for r in results) + sum(r.status == "FAIL" for r in against)
    counted = sum(not r.passed for r in results) + sum(counts_as_failing(r.status, args.inconclusive) for r in against)
    policy = f"INCONCLUSIVE counts as {'failing' if args.inconclusive == 'fail' else 'passing'} (--inconclusive " \
             f"{args.inconclusive})"
    note = (f"; {inconclusive} INCONCLUSIVE; {policy}" if inconclusive else f"; {policy}") if against else ""
    print(f"Gate: {'PASSED' if not counted else 'FAILED'} ({len(lines) - failed - inconclusive} of {len(lines)} "
          f"conditions met{note})")
    if args.junit:
        args.junit.write_text(junit_gate(name, results, against, args.inconclusive))
    return ExitCode.of(not counted)
