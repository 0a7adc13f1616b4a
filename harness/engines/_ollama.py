"""Ollama: answers /api/version (or the fingerprint `fp_ollama`); identity from /api/show and
/api/ps (the allocated context). No metrics endpoint, prefix-cache reset or tokenize route."""

from __future__ import annotations

import re

from harness.engines._common import sha256_text
from harness.engines._profile import EngineProfile, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    control = p.control
    version = control.get_json("/api/version") or {}
    p.put("engine.version", version.get("version"), "/api/version")
    model = str(p.card.get("id", ""))
    show = control.get_json("/api/show", method="POST", body={"model": model}) or {}
    details = show.get("details") or {}
    p.put("model.quantization", details.get("quantization_level"), "/api/show details")
    p.put("model.format", details.get("format"), "/api/show details")
    p.put("model.parameter_size", details.get("parameter_size"), "/api/show details")
    p.put("model.chat_template_sha256", sha256_text(show.get("template")), "/api/show template")
    info = show.get("model_info") or {}
    trained = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    p.put("model.max_context", trained, "/api/show model_info context_length")
    ps = control.get_json("/api/ps") or {}
    for loaded in ps.get("models") or []:
        if loaded.get("name") == model or loaded.get("model") == model:
            p.put("capacity.context_per_sequence", loaded.get("context_length"), "/api/ps context_length")
            p.put("engine.size_vram_bytes", loaded.get("size_vram"), "/api/ps size_vram")


PROFILE = EngineProfile(
    name="ollama",
    detect=lambda control, card: bool(control.get_json("/api/version")),
    detect_via="/api/version",
    fingerprint=re.compile(r"^fp_ollama$"),
    probe_fingerprint=True,
    probe=_probe,
)
