"""The declared prefix-cache state (`prefix_cache: cold | warm`), enforced and recorded.

`cold` empties the engine's prefix cache right before the timed phase (after the canaries), by
the best means the engine's profile offers (`harness.engines`; ../shared/engines.md section 4):
a reset endpoint, else a per-run salt or no prompt reuse at all, and the protocol says which.
An engine with no reset over HTTP is recorded as not enforced, with the reason (restart the
server for a cold start). `warm` resets nothing: the cache holds what earlier traffic, the
canaries and the warm-up left. Either way results report the cached prompt tokens usage carried.
"""

from __future__ import annotations

from typing import Any

from harness import ControlClient, engines

__all__ = ["apply_prefix_cache_policy"]


def apply_prefix_cache_policy(policy: str, engine: str | None, control: ControlClient, run_id: str,
                              params: dict[str, Any]) -> dict[str, Any]:
    """Apply `policy` (may add request fields to `params`); returns the protocol's record."""
    record: dict[str, Any] = {"declared": policy}
    if policy == "warm":
        record.update(enforced=True, method="no reset: the cache holds what earlier traffic, the canaries and the "
                                            "warm-up requests left")
        return record
    found = engines.profile(engine)
    if found is not None and found.reset_prefix_cache is not None:
        record.update(found.reset_prefix_cache(control, run_id, params))
        return record
    record.update(enforced=False, method="none",
                  reason=f"{engine or 'this engine'} offers no prefix-cache reset over HTTP; restart the server "
                         "for a cold start")
    return record
