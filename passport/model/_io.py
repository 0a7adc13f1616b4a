"""Reading a passport back: refuses a schema version it does not know."""

from __future__ import annotations

from pathlib import Path

from passport.audit import read_passport_json
from passport.model._passport import Passport

__all__ = ["read_passport", "read_passport_json"]


def read_passport(path: Path) -> Passport:
    """Load a passport.json (or a run folder's) as the model; RunFolderError when it is missing,
    not JSON, of a schema version this passport does not know, or edited after it was written."""
    return Passport.model_validate(read_passport_json(path, sealed=True))
