"""`passport ledger add|query`: passports into the ledger (after verify), SQL over it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.cli._shared import add_trust_options, trust_of

__all__ = ["add", "main", "add_ledger_option", "ledger_dir", "LEDGER_ENV", "add_when_asked", "print_skipped"]

LEDGER_ENV = "PASSPORT_LEDGER"


def add_ledger_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--ledger", type=Path, metavar="DIR",
                         help=f"the ledger folder (default: ${LEDGER_ENV}); a local or a shared folder")


def ledger_dir(args: argparse.Namespace) -> Path:
    """The ledger folder of `--ledger` or $PASSPORT_LEDGER; a usage error when neither is set."""
    from passport.ledger import LedgerError

    chosen = args.ledger or (Path(os.environ[LEDGER_ENV]) if os.environ.get(LEDGER_ENV) else None)
    if chosen is None:
        raise LedgerError(f"no ledger: pass --ledger DIR or set {LEDGER_ENV}")
    return Path(chosen)


def add_when_asked(args: argparse.Namespace, folder: Path) -> bool:
    """After a run or campaign: append `folder` to the ledger of `--ledger` or $PASSPORT_LEDGER
    when one is set, saying what happened; False when the ledger refused it (it did not verify)."""
    if not (args.ledger or os.environ.get(LEDGER_ENV)):
        return True
    from passport.ledger import add as add_to
    from passport.run import in_stage

    ledger = ledger_dir(args)
    with in_stage("adding the run to the ledger", folder):  # the passport is written: say so, whatever fails
        added = add_to(ledger, folder)
    print(f"ledger:   {added.status} in {ledger}: {added.message}")
    return added.status != "refused"


def add(sub: Any, epilog: str) -> None:
    ledger = sub.add_parser(
        "ledger", help="keep every passport in one queryable ledger (append-only Parquet)",
        description="The ledger is a folder of append-only Parquet files, partitioned by the run's date: a table "
                    "of runs (identity with provenance, protocol hashes, verdict, every metric's statistics and "
                    "interval, cost), one of canary cases and one of campaign arms. Plain DuckDB (and pandas through "
                    "it), Spark or Trino read it without passport, unifying the files' columns by name: "
                    "read_parquet('DIR/runs/*/*.parquet', hive_partitioning=true, union_by_name=true). Raw logs stay "
                    "where they are, referenced by path and hash.",
        epilog="examples:\n  passport ledger add --ledger ~/ledger results/*/\n"
               "  PASSPORT_LEDGER=~/ledger passport ledger query \"SELECT run_id, verdict, \\\"ttft.any.p99\\\" FROM "
               "runs ORDER BY created_utc\"",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    adding = actions.add_parser("add", help="verify run or campaign folders and append them to the ledger",
                                description="Verify each folder (as `passport verify` does) and append it only when "
                                            "it verifies and is signed (by a key given with --key, when given); a "
                                            "passport already in the ledger is left as it is, and one whose canary "
                                            "rows are missing has them added. Exit 1 when any folder was refused.")
    adding.add_argument("folders", type=Path, nargs="+", metavar="RUN_OR_CAMPAIGN",
                        help="run folders (results/<run>/) or campaign folders, one or more")
    add_ledger_option(adding)
    add_trust_options(adding)
    querying = actions.add_parser(
        "query", help="run SQL over the ledger (DuckDB; tables runs, canary_cases, arms)",
        description="Run one SQL statement through DuckDB over views of the ledger's tables (runs, canary_cases, "
                    "arms), unified by column name across files, with the Hive partition `date`. The SQL reads "
                    "only the ledger: no other file can be read or written, and at most --limit rows are printed.")
    querying.add_argument("sql", help="the query, e.g. \"SELECT run_id, verdict FROM runs\"")
    querying.add_argument("--json", action="store_true", help="print the rows as JSON")
    querying.add_argument("--limit", type=int, default=1000, metavar="N",
                          help="print at most N rows (default 1000; the rest are counted as left out, never read "
                               "into memory whole); the SQL reads only the ledger's tables, no other file")
    add_ledger_option(querying)


def print_skipped(skipped: list[tuple[Path, str]]) -> None:
    """Each ledger file a read left out, and why, on stderr (stdout may be JSON)."""
    import sys

    for path, why in skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)


def main(args: argparse.Namespace) -> ExitCode:
    from passport.ledger import LedgerError, query
    from passport.ledger import add as add_to

    ledger = ledger_dir(args)
    if args.ledger_command == "add":
        refused = 0
        for folder in args.folders:
            added = add_to(ledger, folder, trust_of(args))
            refused += added.status == "refused"
            print(f"{added.status:<8} {folder}: {added.message}")
        return ExitCode.of(not refused)
    if args.limit < 1:
        raise LedgerError(f"--limit {args.limit}: give at least 1 row")
    columns, rows, skipped, more = query(ledger, args.sql, args.limit)
    print_skipped(skipped)
    if more:
        print(f"passport: more than {args.limit} rows: the first {args.limit} are shown (--limit N for more, or "
              "LIMIT/OFFSET in the SQL)", file=sys.stderr)
    if args.json:
        import json

        print(json.dumps([dict(zip(columns, row)) for row in rows], default=str, indent=1))
        return ExitCode.OK
    shown = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in shown)]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row_text in shown:
        print("  ".join(v.ljust(w) for v, w in zip(row_text, widths)).rstrip())
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return ExitCode.OK
