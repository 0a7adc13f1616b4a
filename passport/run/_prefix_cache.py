"""The declared prefix-cache state (`prefix_cache: auto | cold | warm`), enforced and recorded.

`auto` (the default) is `cold` for a synthetic workload, so the same spec run twice meets the
same cache state (a repeated run otherwise finds its own prompts cached by the first and looks
faster), and `warm` for a replayed request log or trace, whose prefixes are its own traffic.

`cold` empties the engine's prefix cache right before the timed phase (after the canaries), by
the best means the engine's profile offers (`harness.engines`; docs/engines/research.md section 4):
a reset endpoint, else a per-run salt or no prompt reuse at all, and the protocol says which.
An engine with no reset over HTTP is recorded as not enforced, with the reason (restart the
server for a cold start). `salted` is cold for this run without emptying a cache other clients
share: every request carries a per-run `cache_salt` (engines that honour it), so it matches
nothing cached before it; the policy recorded is `cold`, the method says how. `warm` resets
nothing: the cache holds what earlier traffic, the canaries and the warm-up left. Either way
results report the cached prompt tokens usage carried.
"""

from __future__ import annotations

from typing import Any

from harness import ControlClient, engines
from passport.model import RunSpec

__all__ = ["apply_prefix_cache_policy", "resolve_policy"]


def resolve_policy(spec: RunSpec) -> tuple[str, str]:
    """(cold or warm, why) for the spec's `prefix_cache`."""
    if spec.prefix_cache == "salted":
        return "cold", "declared salted: nothing cached before this run can match, the shared cache is left as it is"
    if spec.prefix_cache != "auto":
        return spec.prefix_cache, "declared"
    if spec.workload.source is not None or spec.load.pattern == "trace":
        return "warm", "auto: a replayed log keeps the prefixes its own traffic shares"
    return "cold", "auto: a synthetic workload starts from an empty cache, so a repeated run meets the same state"


def apply_prefix_cache_policy(spec: RunSpec, engine: str | None, control: ControlClient, run_id: str,
                              params: dict[str, Any]) -> dict[str, Any]:
    """Apply the spec's policy (may add request fields to `params`); returns the protocol's record:
    `declared` (as written), `policy` (cold or warm, as applied), `chosen` (why), `enforced`,
    `method` and, where the engine could not do what was asked, `reason`."""
    policy, why = resolve_policy(spec)
    record: dict[str, Any] = {"declared": spec.prefix_cache, "policy": policy, "chosen": why}
    if policy == "warm":
        record.update(enforced=True, method="no reset: the cache holds what earlier traffic, the canaries and the "
                                            "warm-up requests left")
        return record
    found = engines.profile(engine)
    if spec.prefix_cache == "salted":
        if found is not None and found.cache_salt:
            record.update(enforced=True, method=engines.salt_requests(params, run_id))
        else:
            record.update(enforced=False, method="none",
                          reason=f"{engine or 'this engine'} has no per-request cache salt; declare "
                                 "prefix_cache: cold to empty its cache instead")
        return record
    if found is not None and found.reset_prefix_cache is not None:
        record.update(found.reset_prefix_cache(control, run_id, params))
        return record
    record.update(enforced=False, method="none",
                  reason=f"{engine or 'this engine'} offers no prefix-cache reset over HTTP; restart the server "
                         "for a cold start")
    return record
