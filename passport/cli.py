"""The `passport` command line: the only place that prints to the user or picks exit codes.

Exit codes: 0 the run is VALID (or verified); 1 INVALID, HOLD or INCOMPLETE (or verification
found differences); 2 a usage or input error (bad spec, unreachable endpoint, engine that
would not start): nothing was measured.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]

EPILOG = """\
exit codes:
  0  VALID run (verify: verified; gate: every condition met)
  1  INVALID, HOLD or INCOMPLETE run (verify: differences found; gate: a condition failed)
  2  usage or input error: bad spec, unreachable endpoint, engine failed to start

examples:
  passport run specs/llamacpp-smoke.yaml
  passport run my.yaml --endpoint http://127.0.0.1:8000/v1
  OPENAI_API_KEY=... passport run my.yaml --endpoint https://api.example.com/v1 --api-key-env OPENAI_API_KEY
  passport verify results/chat-smoke-20261129T170000Z-1a2b3c4d
  passport gate results/chat-smoke-... --require 'ttft.any.p99 < 2s' --require 'error_rate < 0.5%'
"""


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("passport")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passport",
        description="Benchmark an OpenAI-compatible LLM endpoint and write a benchmark passport: "
                    "identity, protocol, validity and results, beside the raw Parquet logs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"passport {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run", help="run a spec: canaries, timed load, passport",
        description="Run the benchmark a YAML spec declares and write results/<name>-<UTC>-<id>/ "
                    "(passport.json, report.md, requests/chunks/schedule/telemetry .parquet).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("spec", type=Path, help="the run spec (YAML)")
    run.add_argument("--endpoint", metavar="URL", help="override endpoint.base_url, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--api-key-env", metavar="NAME",
                     help="override endpoint.api_key_env: the environment variable holding the API key")
    run.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                     help="output folder (default: results/)")
    run.add_argument("--quiet", action="store_true", help="no progress bar or status lines")
    verify = sub.add_parser(
        "verify", help="recompute a run's results from its raw logs and check file hashes",
        description="Recompute every result of RUN_DIR/passport.json from the Parquet files and check the "
                    "sha256 of every raw file. Prints 'verified' or each difference.",
    )
    verify.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
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
    compare = sub.add_parser(
        "compare", help="check two or more runs are comparable, then show which differences are significant",
        description="Check the comparability invariants (model, precision, decoding, workload, load, window) "
                    "against the first run; if they hold, show each headline metric side by side with a 95 %% "
                    "bootstrap interval of the difference and a verdict: faster, slower or no significant "
                    "difference. Exit 0 comparable, 1 not comparable.",
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run folders; the first is the base")
    compare.add_argument("--allow", action="append", default=[], metavar="FIELD",
                         help="compare even though FIELD differs (model, precision, decoding, workload, load, "
                              "window); stated in the output")
    gate.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
    gate.add_argument("--require", action="append", default=[], metavar="CONDITION", help="a condition (repeatable)")
    gate.add_argument("--file", type=Path, metavar="GATE.yaml", help="a YAML file with `require: [conditions]`")
    gate.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")
    return parser


class _RichProgress:
    """Adapts rich's progress bar to the runner's ProgressSink."""

    def __init__(self, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("[bold]requests"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self._task = self._progress.add_task("run", total=total, detail="")
        self._progress.start()

    def update(self, done: int, in_flight: int, errors: int) -> None:
        self._progress.update(self._task, completed=done, detail=f"in flight {in_flight}, errors {errors}")

    def stop(self) -> None:
        self._progress.stop()


def _cmd_run(args: argparse.Namespace) -> int:
    from passport._model import Override
    from passport._report import headline_lines
    from passport._run import execute
    from passport._spec import load_spec, parse_spec

    spec, raw = load_spec(args.spec)
    overrides: list[Override] = []
    patched: dict[str, Any] = {}
    if args.endpoint:
        patched.setdefault("endpoint", {})["base_url"] = args.endpoint
        overrides.append(Override(field="endpoint.base_url", value=args.endpoint, source="--endpoint"))
    if args.api_key_env:
        patched.setdefault("endpoint", {})["api_key_env"] = args.api_key_env
        overrides.append(Override(field="endpoint.api_key_env", value=args.api_key_env, source="--api-key-env"))
    if patched:
        merged = dict(raw)
        merged["endpoint"] = {**(raw.get("endpoint") or {}), **patched["endpoint"]}
        spec = parse_spec(merged, str(args.spec))
    bars: list[_RichProgress] = []

    def progress(total: int | None) -> _RichProgress:
        bar = _RichProgress(total)
        bars.append(bar)
        return bar

    def status(message: str) -> None:
        print(f"passport: {message}", file=sys.stderr, flush=True)

    try:
        outcome = execute(spec, raw, overrides, args.out, progress=None if args.quiet else progress,
                          status=None if args.quiet else status)
    finally:
        for bar in bars:
            bar.stop()
    print(f"passport: {outcome.folder / 'passport.json'}")
    print(f"report:   {outcome.folder / 'report.md'}")
    for line in headline_lines(outcome.passport):
        print(line)
    return outcome.exit_code


def _cmd_verify(args: argparse.Namespace) -> int:
    from passport.verify import verify_run

    problems = verify_run(args.run_dir)
    if not problems:
        print(f"verified: {args.run_dir}")
        return 0
    print(f"NOT verified: {args.run_dir}")
    for problem in problems:
        print(f"- {problem}")
    return 1


def _cmd_compare(args: argparse.Namespace) -> int:
    from passport._compare import compare_runs, render_comparison
    from passport._errors import PassportError

    if len(args.runs) < 2:
        raise PassportError("compare needs at least two run folders")
    comparison = compare_runs(args.runs, args.allow)
    for line in render_comparison(comparison):
        print(line)
    return 0 if comparison.comparable else 1


def _cmd_gate(args: argparse.Namespace) -> int:
    from passport._gate import GateError, evaluate_gate, junit_xml, load_gate_file, parse_condition
    from passport._passport import read_passport

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
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from harness import EngineLaunchError, HarnessError
    from passport._errors import PassportError
    from workloads import WorkloadError

    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "gate":
            return _cmd_gate(args)
        if args.command == "compare":
            return _cmd_compare(args)
        return _cmd_verify(args)
    except EngineLaunchError as exc:
        print(f"ERROR: the engine did not start: {exc}", file=sys.stderr)
        return 2
    except (PassportError, HarnessError, WorkloadError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ERROR: interrupted before the timed phase; nothing was measured", file=sys.stderr)
        return 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
