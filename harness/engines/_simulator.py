"""The simulated engine (`python -m harness.simulator`): owned_by `passport-sim`; honours
ignore_eos, has no prefix cache, serves Prometheus /metrics and POST /tokenize (words)."""

from __future__ import annotations

from typing import Any

from harness._control import ControlClient
from harness.engines._common import ANY_TOKENIZE
from harness.engines._profile import EngineProfile, PrefixCacheRecord, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    p.put("engine.version", "passport-simulator", "/v1/models owned_by")


def _no_cache(control: ControlClient, run_id: str, params: dict[str, Any]) -> PrefixCacheRecord:
    return {"enforced": True, "method": "none needed: the simulated engine has no prefix cache"}


PROFILE = EngineProfile(
    name="passport-simulator",
    owned_by=("passport-sim",),
    probe=_probe,
    ignore_eos=True,
    reset_prefix_cache=_no_cache,
    prometheus_path="/metrics",
    tokenize=ANY_TOKENIZE,
)
