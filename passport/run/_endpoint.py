"""Reaching the endpoint under test: its credentials (never stored), its model id, a launcher for
the engine a spec declares, and `Access`, the one way every part of a run opens a connection to
it, so the spec's timeouts, limits and headers apply to each. Shared by run, sweep, canary, probe."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import (
    ANTHROPIC_VERSION,
    ControlClient,
    Endpoint,
    EndpointError,
    EngineLauncher,
    HttpClient,
    Limits,
    Timeouts,
    register_secret,
    strip_userinfo,
)
from passport._errors import SpecError
from passport.model import RunSpec

__all__ = ["Access", "access", "auth_headers", "model_of", "engine_launcher"]


def auth_headers(spec: RunSpec) -> dict[str, str]:
    """The Authorization header: a Bearer key from `endpoint.api_key_env`, else Basic from
    credentials in the base URL (`user:key@host`); for Anthropic Messages the key goes as
    `x-api-key`, with `anthropic-version`. Each secret is registered for scrubbing."""
    if spec.endpoint.api_key_env:
        key = os.environ.get(spec.endpoint.api_key_env)
        if not key:
            raise SpecError(f"endpoint.api_key_env names {spec.endpoint.api_key_env!r}, which is not set; "
                            f"export {spec.endpoint.api_key_env}=<your key> and run again")
        register_secret(key)
        if spec.endpoint.api == "anthropic_messages":
            return {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        return {"Authorization": f"Bearer {key}"}
    if spec.endpoint.base_url:
        _, user, password = strip_userinfo(spec.endpoint.base_url)
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            for secret in (token, password, f"{user}:{password}"):
                register_secret(secret)
            return {"Authorization": f"Basic {token}"}
    return {"anthropic-version": ANTHROPIC_VERSION} if spec.endpoint.api == "anthropic_messages" else {}


@dataclass(frozen=True)
class Access:
    """How a run reaches the endpoint: its URL without credentials, the headers that carry them,
    the CA file, and the spec's timeouts and limits for streams and control-plane calls."""

    base_url: str
    headers: dict[str, str]
    ca_file: str | None
    timeouts: Timeouts
    limits: Limits
    control_s: float
    control_bytes: int

    def control(self, record: list[dict[str, Any]] | None = None) -> ControlClient:
        """A control-plane client (probes, /metrics, /tokenize, cache resets), bounded in time and size."""
        return ControlClient(self.base_url, self.headers, timeout_s=self.control_s, ca_file=self.ca_file,
                             record=record, max_bytes=self.control_bytes)

    @property
    def scrape(self) -> dict[str, Any]:
        """Bounds of one telemetry scrape: `control_bytes`, and `control_s` but at most 2 s (a
        scrape is taken every `telemetry.interval_s`, and one still running skips the next)."""
        return {"timeout_s": min(self.control_s, 2.0), "max_bytes": self.control_bytes}

    def streams(self, max_idle: int) -> HttpClient:
        """A streaming client for timed requests or canaries, with the spec's timeouts and limits."""
        return HttpClient(Endpoint.parse(self.base_url), self.timeouts, max_idle=max_idle, extra_headers=self.headers,
                          ca_file=self.ca_file, limits=self.limits)


def access(spec: RunSpec, headers: dict[str, str], launcher: EngineLauncher | None = None,
           base_url: str | None = None) -> Access:
    """The spec's way to its endpoint: `base_url` (where a run already found it), else
    endpoint.base_url, else the launched engine's (credentials in the URL, if any, are carried by
    `headers` and stripped from it)."""
    base_url = base_url or spec.endpoint.base_url or (launcher.base_url if launcher is not None else None)
    assert base_url is not None, "a spec without endpoint.base_url declares an engine"
    return Access(strip_userinfo(base_url)[0], headers, spec.endpoint.ca_file, spec.timeouts.timeouts(),
                  spec.limits.limits(), spec.timeouts.control_s, spec.limits.control_bytes)


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
