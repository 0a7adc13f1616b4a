"""The simulated engine (`python -m harness.simulator`): owned_by `passport-sim`; honours
ignore_eos; a prefix cache only when started with --prefix-cache (reset as vLLM's, by POST
/reset_prefix_cache) and honours vLLM's `cache_salt`; serves Prometheus /metrics, POST /tokenize
(words) and GET /version (its `--build`: engine.build)."""

from __future__ import annotations

from typing import Any

from harness._control import ControlClient
from harness.engines._common import ANY_TOKENIZE
from harness.engines._profile import EngineProfile, PrefixCacheRecord, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    p.put("engine.version", "passport-simulator", "/v1/models owned_by")
    version = p.control.get_json("/version") or {}
    p.put("engine.build", version.get("build"), "/version")


def _reset(control: ControlClient, run_id: str, params: dict[str, Any]) -> PrefixCacheRecord:
    answer = control.request("POST", "/reset_prefix_cache")
    if answer is not None and answer.status_code == 200:
        return {"enforced": True, "method": "POST /reset_prefix_cache"}
    return {"enforced": True, "method": "none needed: the simulated engine runs without a prefix cache"}


PROFILE = EngineProfile(
    name="passport-simulator",
    owned_by=("passport-sim",),
    probe=_probe,
    ignore_eos=True,
    reset_prefix_cache=_reset,
    cache_salt=True,
    prometheus_path="/metrics",
    tokenize=ANY_TOKENIZE,
)
