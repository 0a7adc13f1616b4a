"""The prefix-cache policy (`prefix_cache: cold | warm`) executed per engine, and recorded.

`cold` empties the engine's prefix cache right before the timed phase (after the canaries),
by the best means the engine offers (../shared/engines.md section 4):
- vLLM: POST /reset_prefix_cache (dev mode only); otherwise a per-run `cache_salt` on every
  request, so nothing cached before this run can match;
- SGLang: POST /flush_cache (retried while requests drain); otherwise a per-run `cache_salt`;
- llama.cpp: erase every slot (POST /slots/{id}?action=erase); a build that refuses (it needs
  --slot-save-path) gets `cache_prompt: false` on every request instead: no reuse at all, which
  is colder than a cold start, and the protocol says so;
- TGI, TRT-LLM, MLX, Ollama, managed APIs: no reset over HTTP: not enforced, with the reason
  (restart the server for a cold start).
`warm` resets nothing: the cache holds what earlier traffic, the canaries and the warm-up left.
Either way the protocol records the method, and results report the cached prompt tokens that
usage carried.
"""

from __future__ import annotations

import time
from typing import Any

from harness import ControlClient

__all__ = ["apply_prefix_cache_policy"]


def _reset(control: ControlClient, method: str, path: str, tries: int = 1) -> int | None:
    status = None
    for _ in range(tries):
        response = control.request(method, path)
        status = None if response is None else response.status_code
        if status == 200:
            return status
        time.sleep(0.5)
    return status


def apply_prefix_cache_policy(policy: str, engine: str | None, control: ControlClient, run_id: str,
                              params: dict[str, Any]) -> dict[str, Any]:
    """Apply `policy` (may add request fields to `params`); returns the protocol's record."""
    record: dict[str, Any] = {"declared": policy}
    if policy == "warm":
        record.update(enforced=True, method="no reset: the cache holds what earlier traffic, the canaries and the "
                                            "warm-up requests left")
        return record
    if engine == "passport-simulator":
        record.update(enforced=True, method="none needed: the simulated engine has no prefix cache")
        return record
    if engine in ("vllm", "sglang"):
        path, method, tries = ("/reset_prefix_cache", "POST", 1) if engine == "vllm" else ("/flush_cache", "POST", 6)
        status = _reset(control, method, path, tries)
        if status == 200:
            record.update(enforced=True, method=f"{method} {path}")
            return record
        params["cache_salt"] = f"passport-{run_id}"
        record.update(enforced=True, method=f"cache_salt=passport-{run_id} on every request",
                      reason=f"{method} {path} answered {status} (vLLM needs VLLM_SERVER_DEV_MODE=1; SGLang refuses "
                             "while requests run)")
        return record
    if engine == "llama.cpp":
        slots = control.get_any("/slots")
        ids = [s.get("id") for s in slots if isinstance(s, dict)] if isinstance(slots, list) else []
        statuses = [_reset(control, "POST", f"/slots/{i}?action=erase") for i in ids]
        if ids and all(s == 200 for s in statuses):
            record.update(enforced=True, method=f"POST /slots/{{id}}?action=erase for {len(ids)} slots")
            return record
        params["cache_prompt"] = False
        record.update(enforced=True, method="cache_prompt: false on every request (no prompt reuse at all)",
                      reason=f"slot erase answered {statuses or 'no /slots'} (llama-server needs --slot-save-path)")
        return record
    record.update(enforced=False, method="none",
                  reason=f"{engine or 'this engine'} offers no prefix-cache reset over HTTP; restart the server "
                         "for a cold start")
    return record
