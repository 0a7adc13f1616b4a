"""Reaching the endpoint under test: its API key header, its model id, and a launcher for the
engine a spec declares. Shared by `run`, `sweep` and `canary`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness import Endpoint, EndpointError, EngineLauncher
from passport._errors import SpecError
from passport.model import RunSpec

__all__ = ["auth_headers", "model_of", "engine_launcher"]


def auth_headers(spec: RunSpec) -> dict[str, str]:
    """The Authorization header from `endpoint.api_key_env` (the key itself is never stored)."""
    if not spec.endpoint.api_key_env:
        return {}
    key = os.environ.get(spec.endpoint.api_key_env)
    if not key:
        raise SpecError(f"endpoint.api_key_env names {spec.endpoint.api_key_env!r}, which is not set; "
                        f"export {spec.endpoint.api_key_env}=<your key> and run again")
    return {"Authorization": f"Bearer {key}"}


def model_of(spec: RunSpec, cards: list[dict[str, Any]], base_url: str) -> str:
    """endpoint.model, or with `auto` the first id the endpoint's /models lists."""
    if spec.endpoint.model != "auto":
        return spec.endpoint.model
    if not cards:
        raise EndpointError(f"{base_url}/models lists no model; set endpoint.model explicitly")
    return str(cards[0].get("id"))


def engine_launcher(spec: RunSpec, log_path: Path) -> EngineLauncher:
    """A launcher (not yet started) for `spec.engine`, on the port of endpoint.base_url if given."""
    assert spec.engine is not None
    port = spec.engine.port
    if port is None and spec.endpoint.base_url:
        port = Endpoint.parse(spec.endpoint.base_url).port
    return EngineLauncher(spec.engine.launch, log_path, spec.engine.model_path, port=port,
                          health_timeout_s=spec.engine.health_timeout_s)
