"""Reading a passport back: refuses a schema version it does not know."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from passport._errors import RunFolderError
from passport.audit import OpenRun, read_passport_json
from passport.model._passport import Passport

__all__ = ["read_passport", "read_passport_json", "passport_model", "passport_of"]


def read_passport(path: Path) -> Passport:
    """Load a passport.json (or a run folder's) as the model; RunFolderError when it is missing,
    not JSON, of a schema version this passport does not know, edited after it was written, or
    not of the passport's shape (an unexpected key, a wrong type)."""
    return passport_model(read_passport_json(path, sealed=True), Path(path))


def passport_of(run: OpenRun) -> Passport:
    """The passport of a run opened through the door (`passport.audit.open_run`), as the model:
    the bytes the door read and checked, not the file read again."""
    return passport_model(run.data, run.folder)


def passport_model(data: dict[str, Any], where: Path) -> Passport:
    """`data` as the model; RunFolderError naming the first few fields that do not fit."""
    try:
        return Passport.model_validate(data)
    except ValidationError as exc:
        shown = "; ".join(f"{'.'.join(str(p) for p in e['loc'])[:80]}: {e['msg']}" for e in exc.errors()[:3])
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise RunFolderError(f"{where} is not a passport this version reads: {shown}{more}") from None
