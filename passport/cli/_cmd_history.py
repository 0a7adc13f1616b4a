"""`passport history --metric M [--by FIELD]`: one metric over the ledger, a trend plot, and the
run where it moved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from passport.cli._cmd_ledger import add_ledger_option, ledger_dir, print_skipped
from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    command = sub.add_parser(
        "history", help="a metric over the ledger's runs: table, HTML trend plot, the run where it moved",
        description="Print one metric of every run in the ledger in time order, each with its interval, and write "
                    "an HTML trend plot. Runs are compared only with runs of the same workload and schedule; a run "
                    "whose interval lies wholly outside those of the last 5 VALID runs before it is flagged as "
                    "moved; identity changes (the --by field, engine, model, host, harness) are annotated. Exit 1 "
                    "when the newest run is flagged.",
        epilog="examples:\n  passport history --ledger ~/ledger --metric ttft.any.p99 --by engine.build\n"
               "  passport history --metric throughput.output_tokens_per_s.mean --where engine.name=vllm --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("--metric", required=True, help="a runs column: <metric id>.<stat>, e.g. ttft.any.p99")
    command.add_argument("--by", metavar="FIELD", help="the field shown beside each run, e.g. engine.build")
    command.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                         help="keep runs whose field has this value (repeatable), e.g. engine.name=vllm")
    command.add_argument("--html", type=Path, default=Path("history.html"), metavar="FILE",
                         help="where the trend plot goes (default: history.html)")
    command.add_argument("--json", action="store_true", help="print the points as JSON")
    add_ledger_option(command)


def main(args: argparse.Namespace) -> ExitCode:
    import json

    from harness import write_new
    from passport.ledger import LedgerError, figure_scale, history, history_html, history_json

    h = history(ledger_dir(args), args.metric, args.by, list(args.where))
    print_skipped(h.skipped)
    try:
        write_new(args.html, history_html(h).encode())
    except OSError as exc:
        raise LedgerError(f"the trend plot cannot be written to {args.html} ({exc.strerror or exc}): give --html a "
                          "file in a folder that exists and has room") from None
    if args.json:
        print(json.dumps(history_json(h), indent=1))
    else:
        scale, unit = figure_scale(args.metric)

        def fmt(v: float | None) -> str:
            return "—" if v is None else f"{v * scale:.4g} {unit}"

        series = list(dict.fromkeys(p.series for p in h.points))
        by = f"{args.by:<16} " if args.by else ""
        for n, name in enumerate(series, 1):
            points = [p for p in h.points if p.series == name]
            workload, _, schedule = name.partition("/")
            print(f"series {n} of {len(series)}: workload {workload[:12]}, schedule {schedule[:12]} ({len(points)} "
                  f"run{'s' if len(points) != 1 else ''}; a different workload or schedule is another series)")
            print(f"{'created (UTC)':<25} {'run':<40} {by}{'verdict':<10} {'value':>12}  {'interval':<26} moved")
            for p in points:
                shown = f"{str(p.by)[:16]:<16} " if args.by else ""
                moved = "MOVED" if p.flagged else ("-" if p.unjudged is None else f"not judged: {p.unjudged}")
                print(f"{p.created_utc:<25} {p.run_id[:40]:<40} {shown}{p.verdict:<10} {fmt(p.value):>12}  "
                      f"{'[' + fmt(p.low) + ', ' + fmt(p.high) + ']':<26} {moved}"
                      + (f"  ({'; '.join(p.changes)})" if p.changes else ""))
            print()
        print(f"{len(h.points)} runs in {len(series)} series; plot: {args.html}")
    return ExitCode.of(not (h.points and h.points[-1].flagged))
