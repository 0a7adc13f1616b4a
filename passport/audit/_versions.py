"""Format versions an auditor needs to know before reading anything (history in
`passport.model`, whose pydantic model imports these)."""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS"]

SCHEMA_VERSION = "1.2"
SUPPORTED_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2")
