"""What a user sees when a command fails in a way nobody planned for (a defect), or when a run
fails after it began to record (its records are then worth more than the error): a short message,
never a traceback (unless asked for), and exit 3.

The message says what failed and in which stage, where the data recorded so far is, and what to
do next: `passport recover FOLDER` when a run reached its timed phase and has no passport yet. The
full traceback, secrets masked, goes to `error.log` in the run folder (a run's own folder only:
a folder that already holds a sealed passport is never written to), else to a file under the
system's temporary folder; `--debug` or PASSPORT_DEBUG=1 also prints it on stderr.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import traceback
from pathlib import Path

from passport.cli._exit import ExitCode

__all__ = ["DEBUG_ENV", "ERROR_LOG", "debug_asked", "report_crash"]

DEBUG_ENV = "PASSPORT_DEBUG"
ERROR_LOG = "error.log"


def debug_asked(flag: bool) -> bool:
    """--debug, or PASSPORT_DEBUG set to anything but 0/empty."""
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _scrub(text: str) -> str:
    try:
        from harness import scrub
    except Exception:  # noqa: BLE001 - the report of a crash must not crash on the masking's import
        return text
    return scrub(text)


def _write_log(text: str, folder: Path | None, command: str) -> Path | None:
    """The traceback in `folder`/error.log (appended), else in the temporary folder; None when
    neither takes a write."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    places = []
    if folder is not None and folder.is_dir() and not (folder / "passport.json").is_file():
        places.append(folder / ERROR_LOG)
    places.append(Path(tempfile.gettempdir()) / "passport-errors" / f"{command}-{stamp}-{os.getpid()}.log")
    for path in places:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as log:
                log.write(f"passport {command}, {stamp}\n{text}\n")
            return path
        except OSError:
            continue
    return None


def _next_step(folder: Path, stage: str) -> list[str]:
    if (folder / "passport.json").is_file():
        lines = [f"the passport was written: {folder / 'passport.json'}"]
        if "ledger" in stage:
            lines.append(f"add it to the ledger later with: passport ledger add {folder}")
        return lines
    if (folder / "passport.draft.json").is_file():
        return [f"the records so far are kept in {folder} (raw Parquet logs and passport.draft.json)",
                f"finish its passport with: passport recover {folder}"]
    return [f"nothing was timed; what the run wrote before it stopped is in {folder}"]


def report_crash(exc: BaseException, command: str, debug: bool) -> ExitCode:
    """Say on stderr what failed (see the module docstring); the exit code to return (3)."""
    from passport._errors import PassportError, StageFailure

    stage, folder, cause = None, None, exc
    if isinstance(exc, StageFailure):
        stage, cause = exc.stage, exc.cause
        folder = Path(exc.folder) if exc.folder else None
    text = _scrub("".join(traceback.format_exception(cause)))
    log = _write_log(text, folder, command)
    where = f" while {stage}" if stage else ""
    kind = "" if isinstance(cause, PassportError) else f"{type(cause).__name__}: "
    lines = [f"ERROR: passport {command} failed{where}: {kind}{_scrub(str(cause)) or 'no message'}"]
    if folder is not None and folder.is_dir():
        lines += [f"  {line}" for line in _next_step(folder, stage or "")]
    if not isinstance(cause, PassportError):
        lines.append("  this is a defect in passport, not in your input: please report it with the log")
    if log is not None:
        lines.append(f"  the full traceback is in {log}" + ("" if debug else " (--debug prints it here)"))
    if debug:
        print(text, file=sys.stderr, end="")
    print("\n".join(lines), file=sys.stderr)
    return ExitCode.INTERNAL
