"""Adding to the ledger, querying it, and picking a baseline from it.

`add` verifies a run or campaign folder with `passport verify`'s own checks, opens it through the
door (`passport.audit.open_run`: signed, by a trusted key when keys are given, each file read
checked) and appends it only when both pass. A run is published by its `runs` row, written last:
its `canary_cases` rows first, then the `runs` row, so a failure in between leaves no run that
looks complete, and adding it again finishes it (a run whose `runs` row is present but whose
canary rows are missing, from a ledger an earlier passport wrote, is repaired the same way). A
campaign: each arm run so, then its `arms` rows.

`query` runs SQL through DuckDB over views named after the tables (`runs`,
`canary_cases`, `arms`), unified by column name across files, with the Hive partition `date`.
`pick_baseline` answers `gate --baseline ledger:DIR`: the latest VALID run created before this one
with the same comparability invariants (model, precision, decoding, workload, load, window; those
the gate is told to --allow excepted) and the `--where` filters, never the run itself.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passport._errors import PassportError, RunFolderError
from passport.audit import OpenRun, Trust, content_sha256, open_run
from passport.ledger._rows import (
    CANARY_COLUMNS,
    EXACT_INVARIANTS,
    arm_rows,
    canary_rows,
    identity_column,
    invariant_column,
    run_row,
)
from passport.ledger._store import TABLES, LedgerFiles, ledger_files, name_problem, write_rows
from passport.model import Passport, passport_of

__all__ = ["DEFAULT_ROW_LIMIT", "LedgerError", "Added", "add", "query", "connect", "pick_baseline", "where_clause",
           "Baseline", "column_of", "quote_name", "runs_columns"]


DEFAULT_ROW_LIMIT = 1000  # rows `ledger query` prints unless asked for more


class LedgerError(PassportError):
    """A ledger that cannot be read as asked, or a baseline it cannot give."""


@dataclass(frozen=True)
class Added:
    """What adding one folder did: `status` added, present (already in the ledger) or refused."""

    folder: Path
    status: str
    message: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stem(passport_id: str, sha256: str | None) -> str:
    return f"{passport_id}-{(sha256 or 'unsealed')[:16]}"


def _refusal(ledger: Path, p: Passport, stem: str) -> str | None:
    """Why the ledger must not take `p` under `stem`: a run id or date that could name a path, or
    a run id the ledger holds already with other content (two passports claiming one run)."""
    problem = name_problem(stem, p.created_utc)
    if problem is not None:
        return f"run {p.run_id!r}: {problem}; the ledger builds file names from it"
    other = sorted(f.name for f in (ledger / "runs").glob(f"date=*/{p.run_id}-*.parquet") if f.stem != stem)
    if other:
        return (f"run {p.run_id} is already in the ledger with other content ({other[0]}): two passports claim one "
                "run; the ledger keeps the first")
    return None


def _add_run(ledger: Path, run: OpenRun, p: Passport, added_utc: str) -> str:
    """Append one trusted run's rows, the `runs` row last (see the module docstring): "added",
    "repaired" (its runs row was there, its canary rows were not) or "present"."""
    stem = _stem(p.run_id, p.content_sha256)
    canaries = write_rows(ledger, "canary_cases", canary_rows(p, run.files), p.created_utc, stem, CANARY_COLUMNS)
    published = write_rows(ledger, "runs", [run_row(p, str(run.folder.resolve()), added_utc)], p.created_utc, stem)
    return "added" if published is not None else "repaired" if canaries is not None else "present"


def _writable(ledger: Path) -> None:
    """LedgerError unless the ledger and each table's folder are folders that take a file (made
    when missing): checked before any row is written, so a bad ledger takes none."""
    for path in (ledger, *(ledger / table for table in TABLES)):
        if path != ledger and path.is_symlink():  # the ledger itself may be a link the user chose
            raise LedgerError(f"{path} is a symbolic link: the ledger writes only into its own folders; give --ledger "
                              "the real folder")
        if path.exists() and not path.is_dir():
            raise LedgerError(f"{path} is not a folder: a ledger is a folder with one folder per table "
                              f"({', '.join(TABLES)}); move the file away or give --ledger another folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"the ledger folder {path} cannot be made ({exc.strerror or exc}); give --ledger a "
                              "folder this user can write") from None
    if not os.access(ledger, os.W_OK | os.X_OK):
        raise LedgerError(f"the ledger folder {ledger} is not writable by this user; give --ledger one that is")


_SAID = {"added": "", "repaired": ": its canary rows were missing and are added", "present": ": already in the ledger"}


def add(ledger: Path, folder: Path, trust: Trust | None = None) -> Added:
    """Verify `folder` (a run or a campaign), open it through the door under `trust` (default:
    any signature, no unsigned passport) and append it (see the module docstring)."""
    from passport import verify
    from passport.judge import CAMPAIGN_FILE, trusted_campaign

    folder, trust = Path(folder), trust or Trust()
    found = verify(folder, trust.keys)
    if not found.verified:
        return Added(folder, "refused", "verify found: " + "; ".join(found.problems[:3])
                     + (f" (and {len(found.problems) - 3} more)" if len(found.problems) > 3 else ""))
    try:
        campaign = trusted_campaign(folder, trust) if (folder / CAMPAIGN_FILE).is_file() else None
        opened = [open_run(folder, trust)] if campaign is None else list(campaign.runs.values())
    except RunFolderError as exc:
        return Added(folder, "refused", str(exc))
    _writable(ledger)
    added_utc = _now()
    passports = [(run, passport_of(run)) for run in opened]
    if campaign is None:
        run, p = passports[0]
        refusal = _refusal(ledger, p, _stem(p.run_id, p.content_sha256))
        if refusal is not None:
            return Added(folder, "refused", refusal)
        status = _add_run(ledger, run, p, added_utc)
        return Added(folder, status, f"{p.run_id} ({p.verdict}){_SAID[status]}")
    record = campaign.record
    refusals = [r for run, p in passports if (r := _refusal(ledger, p, _stem(p.run_id, p.content_sha256)))]
    arms_stem, arms_created = _stem(str(record["name"]), record.get("content_sha256")), \
        str(record.get("created_utc") or added_utc)
    refusals += [f"campaign {record['name']!r}: {problem}" for problem in [name_problem(arms_stem, arms_created)]
                 if problem]
    if refusals:
        return Added(folder, "refused", "; ".join(refusals[:3]))
    fresh_runs = sum(_add_run(ledger, run, p, added_utc) != "present" for run, p in passports)
    written = write_rows(ledger, "arms", arm_rows(record, str(folder.resolve()), added_utc), arms_created, arms_stem)
    status = "added" if written is not None or fresh_runs else "present"
    return Added(folder, status, f"campaign {record['name']}: {len(record['arms'])} arms, {fresh_runs} of "
                                 f"{len(passports)} runs new" + ("" if written is not None else
                                                                 "; the campaign was already in the ledger"))


def connect(ledger: Path) -> tuple[Any, list[tuple[Path, str]]]:
    """A DuckDB connection with a view per ledger table, and the files skipped (named, why)."""
    import duckdb

    if not Path(ledger).is_dir():
        raise LedgerError(f"no ledger at {ledger}: `passport ledger add {ledger} RUN` starts one")
    con = duckdb.connect()
    skipped: list[tuple[Path, str]] = [(path, "not in a ledger table's folder (runs/, canary_cases/, arms/)")
                                       for path in sorted(Path(ledger).iterdir())
                                       if path.name not in TABLES and not path.name.startswith(".")]
    for table in TABLES:
        files: LedgerFiles = ledger_files(ledger, table)
        skipped += files.skipped
        if files.good:
            listing = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files.good)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet([{listing}], union_by_name = true, "
                        "hive_partitioning = true)")
        else:
            con.execute(f"CREATE VIEW {table} AS SELECT NULL::VARCHAR AS run_id WHERE false")
    return con, skipped


def _sandbox(con: Any, ledger: Path) -> None:
    """Lock `con` to the ledger's folder: no file outside it read or written, no extension
    installed, no database attached, and the settings locked so SQL cannot undo it."""
    # the views' files are named under the path given, which may be a link to the real folder
    places = {Path(ledger).absolute(), Path(ledger).resolve()}
    folders = ", ".join("'" + str(f).replace("'", "''") + "'" for f in places)
    con.execute(f"SET allowed_directories = [{folders}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def query(ledger: Path, sql: str, limit: int = DEFAULT_ROW_LIMIT
          ) -> tuple[list[str], list[tuple[Any, ...]], list[tuple[Path, str]], bool]:
    """(column names, at most `limit` rows, skipped files, whether more rows were left out) of
    `sql` over the ledger's views. The SQL reads only the ledger: once the views are built, the
    connection can reach no other file (`_sandbox`)."""
    import duckdb

    hint = f"tables: {', '.join(TABLES)}; `passport ledger query \"DESCRIBE runs\"` lists the columns"
    if not sql.strip():
        raise LedgerError(f"the query is empty: give one SQL statement, e.g. \"SELECT run_id, verdict FROM runs\" "
                          f"({hint})")
    con, skipped = connect(ledger)
    _sandbox(con, ledger)
    try:
        result = con.execute(sql)
        if result.description is None:  # a statement that returns no result set
            return [], [], skipped, False
        rows = result.fetchmany(limit + 1)
        return [d[0] for d in result.description], rows[:limit], skipped, len(rows) > limit
    except duckdb.PermissionException as exc:
        raise LedgerError(f"the query reaches outside the ledger ({str(exc).splitlines()[0]}): `ledger query` reads "
                          f"only the ledger's tables ({hint})") from None
    except duckdb.Error as exc:
        raise LedgerError(f"the query failed: {str(exc).splitlines()[0]} ({hint})") from None


def runs_columns(con: Any) -> set[str]:
    """The columns of the runs view on `con` (every file's, unified by name)."""
    return {d[0] for d in con.execute("SELECT * FROM runs LIMIT 0").description or []}


def column_of(name: str, columns: set[str]) -> str:
    """The runs column a user's name means: itself, or an identity field's column
    (`engine.name` -> `identity.engine.name`); LedgerError with the close ones when neither."""
    for candidate in (name, identity_column(name)):
        if candidate in columns:
            return candidate
    import difflib

    close = difflib.get_close_matches(name, sorted(columns), n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise LedgerError(f"the ledger's runs have no column {name!r}{hint}")


def quote_name(name: str) -> str:
    """A column name as a SQL identifier (the runs table's names are dotted)."""
    return '"' + name.replace('"', '""') + '"'


def where_clause(filters: list[str], columns: set[str]) -> tuple[str, list[Any]]:
    """`K=V` filters as a SQL condition with parameters (K: a column or identity field)."""
    parts, params = [], []
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LedgerError(f"--where {item!r}: write FIELD=VALUE, e.g. engine.name=vllm")
        parts.append(f"CAST({quote_name(column_of(key.strip(), columns))} AS VARCHAR) = ?")
        params.append(value.strip())
    return (" AND ".join(parts) or "true"), params


@dataclass(frozen=True)
class Baseline:
    """The run a ledger gives as a baseline, and how it was chosen (said by the gate)."""

    run_dir: Path
    run_id: str
    created_utc: str
    line: str


def pick_baseline(ledger: Path, current: Passport, filters: list[str], keys: tuple[str, ...] = (),
                  allowed: tuple[str, ...] = ()) -> Baseline:
    """The latest VALID run in the ledger created before `current`, with `current`'s workload and
    schedule hashes and its comparability invariants (those in `allowed` excepted: a run of
    another load is never picked unless asked), matching `filters`, other than `current` itself
    (a run created after the gated one is never its baseline: a newcomer's run, or a row dated in
    the future), and with `keys` signed by one of them (a row forged with another key is passed
    over, not chosen and then refused); its folder must still hold the passport the ledger
    recorded. LedgerError saying what was looked for when there is none."""
    from passport.ledger._rows import run_row

    con, _ = connect(ledger)
    columns = runs_columns(con)
    if "workload_sha256" not in columns:
        raise LedgerError(f"the ledger at {ledger} holds no runs yet")
    condition, params = where_clause(filters, columns)
    mine = run_row(current, "", "")
    same = [invariant_column(name) for name in EXACT_INVARIANTS if name not in allowed]
    missing = [column for column in same if column not in columns]
    if missing:
        raise LedgerError(f"the ledger at {ledger} records no {missing[0]} (its runs were added before passport "
                          "kept the invariants a baseline must share): add the baselines again")
    condition = " AND ".join([condition, *(f"{quote_name(column)} = ?" for column in same)])
    params += [mine[column] for column in same]
    signed = ""
    if keys:
        if "signer" not in columns:
            raise LedgerError(f"the ledger at {ledger} records no signer (its runs were added before passport kept "
                              "one): add the baselines again, or gate without --key")
        signed = f"AND signer IN ({', '.join('?' for _ in keys)}) "
    rows = con.execute(
        f"SELECT run_dir, run_id, created_utc, passport_sha256 FROM runs WHERE verdict = 'VALID' AND "
        f"workload_sha256 = ? AND schedule_sha256 = ? AND passport_sha256 IS DISTINCT FROM ? AND created_utc < ? "
        f"{signed}AND {condition} ORDER BY created_utc DESC, added_utc DESC LIMIT 1",
        [current.protocol.workload.sha256, current.protocol.schedule.sha256, current.content_sha256,
         current.created_utc, *keys, *params],
    ).fetchall()
    if not rows:
        protocol = current.protocol
        looked = (f"workload {protocol.workload.sha256[:12]}, schedule {protocol.schedule.sha256[:12]}, and "
                  f"{', '.join(n for n in EXACT_INVARIANTS if n not in allowed)}")
        raise LedgerError(f"the ledger at {ledger} has no VALID run created before this one ({current.created_utc}) "
                          f"with this run's {looked}"
                          + (f", signed by {' or '.join(keys)}" if keys else "")
                          + (f" and {' and '.join(filters)}" if filters else "") + ": add one first "
                          "(`passport ledger add`)")
    run_dir, run_id, created, sha = rows[0]
    path = Path(run_dir)
    try:
        raw = json.loads((path / "passport.json").read_text())
    except (OSError, ValueError) as exc:
        raise LedgerError(f"the ledger's baseline {run_id} was at {path}, which no longer holds its passport "
                          f"({exc}); the raw logs are referenced, not copied") from None
    if content_sha256(raw) != sha:
        raise LedgerError(f"the ledger's baseline {run_id} at {path} holds a different passport than the one "
                          "added (its content hash differs)")
    return Baseline(path, str(run_id), str(created),
                    f"baseline: {run_id} ({created}) from the ledger at {ledger}: {path}")
