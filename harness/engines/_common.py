"""Small helpers the engine profiles share: Prometheus samples of a control-plane path, the
sha256 of a template, a reset call with retries, and the two common tokenize bodies."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from harness._control import ControlClient
from harness._prom import Sample, samples
from harness.engines._profile import ProbeContext, TokenizeRoute

__all__ = ["prometheus_samples", "sha256_text", "call_until_ok", "salt_requests", "OPENAI_STYLE_TOKENIZE",
           "ANY_TOKENIZE"]


def prometheus_samples(control: ControlClient, path: str = "/metrics") -> list[Sample]:
    """The samples of a Prometheus text endpoint; empty when absent or not Prometheus."""
    text = control.get_text(path)
    if not text:
        return []
    try:
        return samples(text)
    except ValueError:
        return []


def sha256_text(text: Any) -> str | None:
    """sha256 of a non-empty string (a chat template), else None."""
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) and text else None


def put_hf_info(p: ProbeContext, info: dict[str, Any]) -> None:
    """The fields Hugging Face's servers (TGI, TEI) share in `GET /info`: version, build, model id
    and revision."""
    p.put("engine.version", info.get("version"), "/info")
    p.put("engine.build", info.get("sha") or info.get("docker_label"), "/info")
    p.put("model.root", info.get("model_id"), "/info")
    p.put("model.revision", info.get("model_sha"), "/info model_sha")


def call_until_ok(control: ControlClient, method: str, path: str, tries: int = 1) -> int | None:
    """Send `method path` up to `tries` times, 0.5 s apart, until it answers 200; the last status."""
    status = None
    for _ in range(tries):
        response = control.request(method, path)
        status = None if response is None else response.status_code
        if status == 200:
            return status
        time.sleep(0.5)
    return status


# vLLM and SGLang read `prompt`; llama.cpp reads `content`. An unknown engine is sent both.
OPENAI_STYLE_TOKENIZE = TokenizeRoute(
    "/tokenize", lambda text, model: {"prompt": text, "model": model, "add_special_tokens": False})
ANY_TOKENIZE = TokenizeRoute("/tokenize", lambda text, model: {
    "content": text, "prompt": text, "model": model, "add_special": False, "add_special_tokens": False})


def salt_requests(params: dict[str, Any], run_id: str) -> str:
    """Give every request of run `run_id` vLLM's `cache_salt` (it matches only cache entries made
    under the same salt); returns the protocol's method line."""
    params["cache_salt"] = f"passport-{run_id}"
    return f"cache_salt=passport-{run_id} on every request"
