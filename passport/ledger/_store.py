"""The ledger's folder: append-only Parquet, one file per added passport per table, partitioned by
the run's date, readable by any Parquet reader without passport.

Layout: `<ledger>/<table>/date=<YYYY-MM-DD>/<run_id>-<sha16>.parquet` for the tables `runs`,
`canary_cases` and `arms` (`date`: the run's start, UTC; a Hive partition, so DuckDB, Spark and
Trino read it as a column). Each file's Parquet metadata says what it is
(`passport.ledger` = {"table", "version"}).

Append-only and safe for several writers at once, on a local or a shared folder: a file is
written whole under a temporary name in its partition, then hard-linked to its final name, which
fails when that name exists (the same passport added twice, perhaps at the same moment: the
second is told so and changes nothing); no file is ever rewritten or deleted. Where the
filesystem has no hard links the temporary file is renamed after checking the name is free.

Reading lists every `*.parquet` under a table's folder and keeps those whose metadata says they
are that table's: anything else (a foreign file, a truncated or corrupt one) is named in
`skipped` and left alone, never fatal. Only regular files are read: a FIFO, a device or a socket
named `*.parquet` would hang a reader or read forever, and a symbolic link may point anywhere,
so each is named and skipped, never opened; the walk follows no link.

Names are checked before any path is built from them: a file's stem (from a run id or a
campaign's name) and its partition date must be plain identifiers, so no passport can name a
path outside the ledger (`ValueError` otherwise), and a folder inside the ledger that is a
symbolic link is refused, not written through.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["TABLES", "LEDGER_VERSION", "LedgerFiles", "write_rows", "ledger_files", "has_passport", "MARKER",
           "name_problem"]

TABLES = ("runs", "canary_cases", "arms")
LEDGER_VERSION = 1
MARKER = b"passport.ledger"


@dataclass
class LedgerFiles:
    """A table's readable files, and each file skipped with why."""

    good: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def name_problem(stem: str, created_utc: str) -> str | None:
    """Why `stem` or `created_utc` cannot name a ledger file (a path, a dot-dot, no date), or None."""
    if not _STEM.fullmatch(stem) or ".." in stem:
        return f"{stem!r} is not a plain identifier (letters, digits, '.', '_', '-')"
    if not _DATE.fullmatch(created_utc[:10]):
        return f"its creation time {created_utc!r} does not start with a date (YYYY-MM-DD)"
    return None


def _partition(ledger: Path, table: str, created_utc: str) -> Path:
    folder = ledger / table / f"date={created_utc[:10]}"
    for part in (ledger / table, folder):  # the ledger itself may be a link its user chose
        if part.is_symlink():
            raise ValueError(f"{part} is a symbolic link: the ledger writes only into its own folders")
    return folder


def has_passport(ledger: Path, table: str, stem: str) -> bool:
    """Whether some partition of `table` already holds a file named `stem`.parquet."""
    return any((ledger / table).glob(f"date=*/{stem}.parquet"))


def write_rows(ledger: Path, table: str, rows: list[dict[str, Any]], created_utc: str, stem: str,
               columns: tuple[str, ...] = ()) -> Path | None:
    """Write `rows` as one new file of `table` (see the module docstring), with at least the
    `columns` (so a file without rows still has its columns); returns its path, or None when a
    file of that name is already in the ledger (nothing written)."""
    if table not in TABLES:
        raise ValueError(f"unknown ledger table {table!r}")
    problem = name_problem(stem, created_utc)
    if problem is not None:
        raise ValueError(f"cannot name a ledger file: {problem}")
    if has_passport(ledger, table, stem):
        return None
    folder = _partition(ledger, table, created_utc)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{stem}.parquet"
    partial = folder / f".{stem}.{os.getpid()}.partial"
    data = _table(rows, columns)
    marker = json.dumps({"table": table, "version": LEDGER_VERSION}).encode()
    data = data.replace_schema_metadata({**(data.schema.metadata or {}), MARKER: marker})
    pq.write_table(data, partial)
    try:
        os.link(partial, final)
    except FileExistsError:
        return None
    except OSError:  # no hard links here: rename when the name is free (a narrow window, said above)
        if final.exists():
            return None
        os.replace(partial, final)
        return final
    finally:
        partial.unlink(missing_ok=True)
    return final


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...] = ()) -> pa.Table:
    """`rows` as a table, a column with no value in any row typed as the column of a later file
    would be (text for identity and names, a float for a figure), so readers that unify files by
    column name never meet a null-typed column."""
    names = list(dict.fromkeys([*columns, *(k for row in rows for k in row)]))
    arrays = {}
    for name in names:
        values = [row.get(name) for row in rows]
        array = pa.array(values)
        if pa.types.is_null(array.type):
            numeric = not (name.startswith("identity.") or name.endswith(("_sha256", "_utc", "_dir", "_json"))
                           or name in _TEXT)
            array = pa.array(values, pa.float64() if numeric else pa.string())
        arrays[name] = array
    return pa.table(arrays)


_TEXT = ("run_id", "name", "signer", "verdict", "canaries", "schema_version", "harness.version", "harness.git_revision",
         "load.pattern", "suite", "case_id", "kind", "phase", "category", "reason", "campaign", "objective_name",
         "arm", "arm_status", "run", "status")


def _marker_problem(path: Path, table: str) -> str | None:
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as exc:
        return f"not readable Parquet ({type(exc).__name__}: {str(exc)[:120]})"
    raw = metadata.get(MARKER)
    if raw is None:
        return "not a passport ledger file (no passport.ledger metadata)"
    try:
        marker = json.loads(raw)
    except ValueError:
        return "its passport.ledger metadata is not JSON"
    if marker.get("table") != table:
        return f"a {marker.get('table')!r} file in the {table!r} folder"
    if marker.get("version") != LEDGER_VERSION:
        return f"ledger version {marker.get('version')!r}, this passport reads {LEDGER_VERSION}"
    return None


def ledger_files(ledger: Path, table: str) -> LedgerFiles:
    """The files of `table` this passport reads, and the others named with why."""
    found = LedgerFiles()
    folder = Path(ledger) / table
    if folder.is_symlink():
        found.skipped.append((folder, "a symbolic link: not followed"))
        return found
    if not folder.is_dir():
        return found
    paths = sorted(Path(root) / name for root, dirs, names in os.walk(folder) for name in [*names, *dirs])
    for path in paths:
        try:
            mode = path.lstat().st_mode
        except OSError:  # gone since the walk listed it
            continue
        if stat.S_ISDIR(mode) or path.name.endswith(".partial"):
            continue
        if stat.S_ISLNK(mode):
            found.skipped.append((path, "a symbolic link: not followed"))
            continue
        if not stat.S_ISREG(mode):
            found.skipped.append((path, "not a regular file (a FIFO, a device or a socket): not opened"))
            continue
        if path.suffix != ".parquet":
            found.skipped.append((path, "not a Parquet file"))
            continue
        problem = _marker_problem(path, table)
        if problem is None:
            found.good.append(path)
        else:
            found.skipped.append((path, problem))
    return found
