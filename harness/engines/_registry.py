"""The registry of engine profiles, in the order detection tries them, and detection itself."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from harness._control import ControlClient
from harness.engines import _llamacpp, _managed, _mlx, _ollama, _sglang, _simulator, _tei, _tgi, _trtllm, _vllm
from harness.engines._profile import EngineProfile

__all__ = ["register", "unregister", "profiles", "profile", "detect", "engine_of_card", "engine_of_fingerprint"]

# Order matters where two checks could both pass: an MLX fingerprint also fits TGI's pattern,
# so MLX comes first; TEI's /info (with a model_type) before TGI's; TGI's /info check is tried
# before Ollama's /api/version and llama.cpp's /props.
_PROFILES: list[EngineProfile] = [
    _vllm.PROFILE, _sglang.PROFILE, _trtllm.PROFILE, _mlx.PROFILE, _tei.PROFILE, _tgi.PROFILE, _ollama.PROFILE,
    _llamacpp.PROFILE, _simulator.PROFILE, *_managed.PROFILES,
]


def register(new: EngineProfile) -> None:
    """Add an engine (tried after the built-in ones); a name already registered is an error."""
    if any(p.name == new.name for p in _PROFILES):
        raise ValueError(f"engine {new.name!r} is already registered")
    _PROFILES.append(new)


def unregister(name: str) -> None:
    """Remove a registered engine (tests use it to undo `register`)."""
    _PROFILES[:] = [p for p in _PROFILES if p.name != name]


def profiles() -> tuple[EngineProfile, ...]:
    """Every registered profile, in detection order."""
    return tuple(_PROFILES)


def profile(name: str | None) -> EngineProfile | None:
    """The profile of an engine name as passports record it, or None (unknown engine)."""
    return next((p for p in _PROFILES if p.name == name), None) if name else None


def engine_of_card(card: dict[str, Any]) -> str | None:
    """The engine a `/v1/models` card's `owned_by` names, or None."""
    owned_by = str(card.get("owned_by", ""))
    return next((p.name for p in _PROFILES if owned_by in p.owned_by), None)


def engine_of_fingerprint(fingerprint: str) -> str | None:
    """The engine whose `system_fingerprint` pattern matches, or None."""
    return next((p.name for p in _PROFILES if p.fingerprint is not None and p.fingerprint.match(fingerprint)), None)


def detect(control: ControlClient, card: dict[str, Any], base_url: str) -> tuple[str | None, str]:
    """(engine name or None, how it was told) from the card, the host, then each profile's
    control-plane check; the fingerprint is tried later, by the caller, when this says None."""
    engine = engine_of_card(card)
    if engine:
        return engine, "/v1/models owned_by"
    host = urlparse(base_url).hostname or ""
    for p in _PROFILES:
        if any(host == h or host.endswith("." + h) for h in p.hosts):
            return p.name, "endpoint host"
    for p in _PROFILES:
        if p.detect is not None and p.detect(control, card):
            return p.name, p.detect_via
    return None, ""
