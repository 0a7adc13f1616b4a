"""Format versions an auditor needs to know before reading anything (history in
`passport.model`, whose pydantic model imports these)."""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS", "DERIVED_VALIDITY_SINCE"]

SCHEMA_VERSION = "1.3"
SUPPORTED_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3")
# From this version on, verify re-derives validity, counts, canaries and the verdict, and checks
# the passport's content hash; older passports carry neither the inputs nor the hash.
DERIVED_VALIDITY_SINCE = "1.3"
