"""Managed APIs, known by their host: they take OpenAI's parameters only (no `top_k`), are never
sent a probe request that may cost, and have no metrics, cache reset or tokenize route."""

from __future__ import annotations

from harness.engines._profile import EngineProfile

__all__ = ["PROFILES"]

_HOSTS = {
    "openai": ("api.openai.com",),
    "openrouter": ("openrouter.ai",),
    "together": ("api.together.xyz",),
    "fireworks": ("api.fireworks.ai",),
    "cloudflare-workers-ai": ("api.cloudflare.com", "gateway.ai.cloudflare.com"),
}

PROFILES = tuple(EngineProfile(name=f"managed:{provider}", hosts=hosts, openai_params_only=True)
                 for provider, hosts in _HOSTS.items())
