"""MLX (`mlx_lm.server`): known by its fingerprint `{mlx_lm}-{mlx}-{platform}-{device}`, which
carries both versions and the device's architecture; a model served from a local folder is listed
under its resolved path, which is the model's root. No /version, /metrics, /tokenize or reset
over HTTP (docs/engines/research.md has its other quirks: keep-alive comments before the first token,
HTTP/1.0, a /v1/models that answers 200 with an empty body when no Hugging Face cache folder
exists)."""

from __future__ import annotations

import re

from harness.engines._profile import EngineProfile, ProbeContext

__all__ = ["PROFILE"]

_FINGERPRINT = re.compile(r"^(?P<mlx_lm>\d+\.\d+[\w.]*)-(?P<mlx>\d+\.\d+[\w.]*)-(?P<platform>.+)-(?P<device>[^-]+)$")


def _probe(p: ProbeContext) -> None:
    found = _FINGERPRINT.match(p.fingerprint or "")
    if found:
        via = "system_fingerprint"
        p.put("engine.version", found["mlx_lm"], via + " (mlx_lm version)")
        p.put("engine.mlx_version", found["mlx"], via + " (mlx version)")
        p.put("engine.device", found["device"], via + " (device architecture)")
    model_id = str(p.card.get("id") or "")
    if model_id.startswith("/"):
        p.put("model.root", model_id, "/v1/models id (the served folder)")


PROFILE = EngineProfile(
    name="mlx",
    fingerprint=_FINGERPRINT,
    probe=_probe,
)
