"""Format versions an auditor needs to know before reading anything (history in
`passport.model`, whose pydantic model imports these)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS", "DERIVED_VALIDITY_SINCE", "SIGNED_SINCE", "RULES_KEY",
           "RULES_VERSION", "LAYOUT_KEY", "version_tuple", "downgrade_problem"]

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
# for is not among the ids the server's /v1/models listed (`_probes.py`). 6: the client_calibration
# rule warns when the client's measured CPU share is well above what its stated calibration
# predicts (the headroom it states is then overstated). 7: an open loop whose in-flight cap held 1 %
# or more of its measured requests WARNs on achieved_rate instead of failing (the cap is the load
# declared), with the slot waits said; and the requests in flight when a run is stopped are
# counted apart (counts.interrupted), not as failures of error_rate. 8: a closed loop's dispatch
# lag is judged less each new connection's setup (connect_ns, the server's accept), as the
# dispatch_lag metric has always been: a thousand users connecting at once to a server whose
# accept queue overflowed were INVALID for its one-second SYN retry. 9: achieved_rate reads the
# pace completions kept with the schedule from the slope of completion on intended time, with its
# 95 % interval (`_counts.achieved_pace`), and fails only when the interval lies below the limit (a
# short window at a high rate read 0.54 on a server that kept up, from one slow first or last
# request); a point below the limit with an interval reaching it WARNs that the window cannot tell.
# 10: the accuracy_drop rule judges a run that declares `accuracy`: a set answered worse under load
# than alone by more than accuracy.max_drop, beyond chance (exact sign test p < accuracy.alpha).
# 11: client_not_bound judges the client's samples (CPU share, loop lag) of the measurement windows
# only, and the CPU share at its tail quantile (five samples above it) as the lags are read, not
# at its maximum: a warm-up's burst of connections (4,000 users at once held a core for a second),
# and a tenth of a second at a full core when 1,000 users' answers end together (loop lag 2.5 ms),
# no longer fail a run. 12: server_counters lets a pooling request count as several, as engines
# count them (each input of an embeddings batch; each document of a rerank or score request and
# its query): vLLM's count of a rerank run was nine times the client's, a WARN of a shared server.
RULES_KEY = "passport.rules"
RULES_VERSION = 12

# Where a passport records the layout of its reports (passport.report.REPORT_LAYOUT).
LAYOUT_KEY = "passport.report-layout"


def version_tuple(text: str) -> tuple[int, ...]:
    """A dotted version ("1.3") as a tuple that compares in version order."""
    return tuple(int(part) for part in text.split("."))


# Rules first judged at a rules version: a passport whose validity lists one records that
# version or a later one.
_RULE_SINCE = {"server_counters": 4, "model_listed": 5, "client_calibration": 6, "accuracy_drop": 10}


def _claims(passport: Mapping[str, Any]) -> tuple[str, int, int]:
    """(schema version, rules version, report layout) a passport says it was written with."""
    protocol = passport.get("protocol")
    harness = protocol.get("harness") if isinstance(protocol, Mapping) else None
    libraries = harness.get("libraries") if isinstance(harness, Mapping) else None
    libraries = libraries if isinstance(libraries, Mapping) else {}
    try:
        rules, layout = int(libraries.get(RULES_KEY, "1")), int(libraries.get(LAYOUT_KEY, "1"))
    except (TypeError, ValueError):
        rules, layout = 0, 0
    return str(passport.get("schema_version")), rules, layout


def downgrade_problem(passport: Mapping[str, Any]) -> str | None:
    """Why a passport's schema or rules version is lower than its own records imply, or None.

    Older passports were not signed and were judged by fewer rules, so rewriting a passport to
    look older is how a forger switches signing (or a rule) off. What each record implies is
    when the harness first wrote it: a signature or rules version 4 on, schema 1.4; rules version
    2 on, report layout 2 on or a content hash, schema 1.3; a rule first judged at rules version N
    (server_counters 4, model_listed 5, client_calibration 6) in validity, rules version N. A forger who removes every
    such record as well makes a passport indistinguishable from an old one: it is then unsigned,
    which the door refuses unless told the run is an old one (--allow-unsigned)."""
    version, rules, layout = _claims(passport)
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        return None  # refused as unknown by whoever read it
    implied = [("a signature", "1.4", bool(passport.get("signature"))),
               (f"rules version {rules}", "1.4", rules >= 4),
               (f"rules version {rules}", "1.3", rules >= 2),
               (f"report layout {layout}", "1.3", layout >= 2),
               ("a content hash", "1.3", passport.get("content_sha256") is not None)]
    for what, since, present in implied:
        if present and version_tuple(version) < version_tuple(since):
            return (f"schema_version {version} is older than its own records: {what} was first written by schema "
                    f"{since}; a passport rewritten to look older is refused as a downgrade")
    validity = passport.get("validity") or {}
    names = [r.get("name") for r in validity.get("rules") or [] if isinstance(r, Mapping)] \
        if isinstance(validity, Mapping) else []
    for name in names:
        since_rules = _RULE_SINCE.get(str(name))
        if since_rules is not None and rules < since_rules:
            return (f"rules version {rules} is older than its own validity: rule {name} was first judged by rules "
                    f"version {since_rules}; a passport rewritten to look older is refused as a downgrade")
    return None
