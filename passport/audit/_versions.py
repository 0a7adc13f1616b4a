"""Format versions an auditor needs to know before reading anything (history in
`passport.model`, whose pydantic model imports these)."""

from __future__ import annotations

__all__ = ["SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS", "DERIVED_VALIDITY_SINCE", "SIGNED_SINCE", "RULES_KEY",
           "RULES_VERSION"]

SCHEMA_VERSION = "1.4"
SUPPORTED_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
# From this version on, verify re-derives validity, counts, canaries and the verdict, and checks
# the passport's content hash; older passports carry neither the inputs nor the hash.
DERIVED_VALIDITY_SINCE = "1.3"
# From this version on, every passport carries the signature of its content hash.
SIGNED_SINCE = "1.4"

# The wording of the validity rules, recorded in protocol.harness.libraries[RULES_KEY] ("1" when
# absent): verify re-derives each rule's message as the run's version wrote it, so a message can
# say more in a later version without breaking earlier passports. 2: dispatch_lag names the
# requests that found an open loop's in-flight cap full. 3: dispatch_lag and client_not_bound
# judge each lag against the latency it distorts, at a tail quantile that is not the maximum of
# a few samples, and name the cause (this process or others on the machine): `_lag.py`. 4: the
# server_counters rule holds the client's totals against the engine's own counters read around
# the timed phase (`_counters.py`). 5: the model_listed rule warns when the model the run asked
# for is not among the ids the server's /v1/models listed (`_probes.py`).
RULES_KEY = "passport.rules"
RULES_VERSION = 5
