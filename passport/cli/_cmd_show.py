"""`passport show RUN_DIR [--as TOOL]`: a run's headline, or its raw logs under another tool's definitions."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main"]

_TOOLS = ("vllm", "sglang", "aiperf", "guidellm")  # passport.audit.TOOLS, unimported


def add(sub: Any, epilog: str) -> None:
    show = sub.add_parser(
        "show", help="print a run's headline, or its figures as vLLM, SGLang, AIPerf or guidellm define them",
        description="Print a run's headline figures; with --as TOOL, recompute the raw logs under that tool's own "
                    "definitions (read from its source: where its clock starts, which event is the first token, "
                    "where a request ends, how TPOT divides) beside passport's nearest figure and what differs, so "
                    "a passport lines up with a number from the tool you used last week. README: \"Other tools' "
                    "numbers\".",
        epilog="examples:\n  passport show results/my-run\n  passport show results/my-run --as vllm\n"
               "  passport show results/my-run --as guidellm --json --output benchmarks.json\n"
               "  passport show results/my-run --as aiperf --json > profile_export_aiperf.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("run_dir", type=Path, help="a run folder (results/<run>/), or a campaign folder (its arms)")
    show.add_argument("--as", dest="tool", choices=_TOOLS, help="summarize as this tool defines its figures")
    show.add_argument("--json", action="store_true",
                      help="with --as vllm|guidellm|aiperf: write that tool's own result file instead (vLLM's "
                           "--save-result JSON, guidellm's benchmarks.json, AIPerf's profile_export_aiperf.json), "
                           "for the scripts and dashboards that read it")
    show.add_argument("--output", type=Path, metavar="FILE", help="with --json: write it here instead of stdout")
    add_trust_options(show)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.3f}"


def _write_json(args: argparse.Namespace, run: Any, api: str) -> ExitCode:
    import json
    import sys

    from passport._errors import SpecError
    from passport.cli._peer_results import peer_file, vllm_result_of

    if args.tool == "sglang":
        raise SpecError("--json: SGLang's output file is not written; --as sglang prints its summary, and "
                        "`passport show RUN --as vllm --json` writes vLLM's result JSON, which SGLang's mirrors")
    if args.tool == "vllm":
        options = argparse.Namespace(metric_percentiles=None, percentile_metrics=None, backend=None, spec=True,
                                     concurrency=None, label=None, save_detailed=False)
        data, _ = vllm_result_of(options, run)
    else:
        data = peer_file(args.tool, [run])
    text = json.dumps(data)
    if args.output is None:
        sys.stdout.write(text + "\n")
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
        print(f"{args.output}: {args.tool}'s result file of {run.folder.name}", file=sys.stderr)
    return ExitCode.OK


def main(args: argparse.Namespace) -> ExitCode:
    from passport.audit import open_run, tool_view

    if (args.run_dir / "campaign.json").is_file() and args.tool is None:
        from passport.judge import trusted_campaign
        from passport.report import arm_lines, campaign_lines

        record = trusted_campaign(args.run_dir, trust_of(args)).record  # what the arms' passports and files say
        for line in arm_lines(record) + campaign_lines(record):
            print(line)
        return ExitCode.OK
    if (args.json or args.output) and args.tool is None:
        from passport._errors import SpecError

        raise SpecError("--json writes another tool's result file: say which with --as vllm|guidellm|aiperf")
    run = open_run(args.run_dir, trust_of(args))  # what it shows is what the sealed raw files say
    passport: dict[str, Any] = run.data
    if args.tool is None:
        from passport.model import passport_of
        from passport.report import headline_lines

        for line in headline_lines(passport_of(run)):
            print(line)
        return ExitCode.OK
    api = str(passport.get("protocol", {}).get("effective", {}).get("endpoint", {}).get("api", "chat"))
    if args.json:
        return _write_json(args, run, api)
    view = tool_view(run.files, args.tool, api)
    print(f"{passport.get('name', args.run_dir.name)} as {args.tool} defines its figures "
          f"({view.requests} measured successful requests, endpoint.api {api})")
    width = max(len(t.name) for t in view.totals)
    for t in view.totals:
        value = f"{t.value:,.0f}" if float(t.value).is_integer() else _num(t.value)
        print(f"{t.name + ':':<{width + 1}}  {value:>14}  {t.passport}; {t.differs}")
    width = max(len(f"{f.name} ({f.unit})") for f in view.figures)
    print(f"{'figure':<{width}}  " + "  ".join(f"{c:>12}" for c in view.columns)
          + "  nearest passport figure; what differs")
    for f in view.figures:
        cells = "  ".join(f"{_num(f.values[c]):>12}" for c in view.columns)
        print(f"{f.name + ' (' + f.unit + ')':<{width}}  {cells}  {f.passport}; {f.differs}")
    return ExitCode.OK
