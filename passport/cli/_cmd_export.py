"""`passport export RUN_DIR`: a raw table as CSV or JSON Lines, for tools that do not read Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main"]

# passport.audit.EXPORT_TABLES, unimported
_TABLES = ("requests", "chunks", "telemetry", "schedule", "canaries", "accuracy")


def add(sub: Any, epilog: str) -> None:
    export = sub.add_parser(
        "export", help="write a run's raw table (requests, chunks, ...) as CSV or JSON Lines",
        description="Write one raw table of a run folder as CSV (a header row; lists and objects as JSON text) or "
                    "JSON Lines (one object per row), to stdout or --output. Times stay int64 nanoseconds since "
                    "protocol.clock.t0; binary payloads become UTF-8 text. A recovered run's parts are read too; "
                    "every byte written is one the passport's signature covers (a changed file is refused).",
        epilog="examples:\n  passport export results/my-run > requests.csv\n"
               "  passport export results/my-run --table chunks --format jsonl --output chunks.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
    export.add_argument("--table", choices=_TABLES, default="requests", help="which table (default: requests)")
    export.add_argument("--format", choices=["csv", "jsonl"], default="csv", help="default: csv")
    export.add_argument("--output", type=Path, metavar="FILE", help="write here instead of stdout")
    add_trust_options(export)


def main(args: argparse.Namespace) -> ExitCode:
    from passport.audit import export_table, open_run

    files = open_run(args.run_dir, trust_of(args)).files
    if args.output is None:
        rows = export_table(files, args.table, args.format, sys.stdout)
    else:
        with args.output.open("w", encoding="utf-8", newline="") as out:
            rows = export_table(files, args.table, args.format, out)
        print(f"{args.output}: {rows} rows of {args.table}", file=sys.stderr)
    return ExitCode.OK
