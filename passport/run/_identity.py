"""Identity from the endpoint itself and from the spec: each field with its source.

`probe_endpoint` asks the engine registry (`harness.engines`) to detect the engine and run its
probes; every field it returns is `probed`, `via` the endpoint that said it. What no probe can
tell is filled from the spec's `identity` section (`declared`) or marked `unknown` for the
standard fields (`STANDARD_FIELDS`), so a reader sees what is known, from where, and what is not.
"""

from __future__ import annotations

from typing import Any

from harness import ControlClient, engines, scrub_json
from passport.model import SourcedValue

__all__ = ["STANDARD_FIELDS", "DECLARED_ALIASES", "probe_endpoint", "complete_identity"]

STANDARD_FIELDS = (
    "engine.name", "engine.version", "model.id", "model.root", "model.revision", "model.max_context",
    "model.quantization", "model.dtype", "engine.kv_cache_dtype", "engine.tensor_parallel_size",
    "engine.speculative", "engine.prefix_caching", "model.chat_template_sha256", "capacity.kv_tokens",
    "capacity.context_per_sequence",
)
DECLARED_ALIASES = {
    "weights_format": "model.quantization", "quantization": "model.quantization", "dtype": "model.dtype",
    "kv_cache_dtype": "engine.kv_cache_dtype", "tensor_parallel_size": "engine.tensor_parallel_size",
    "revision": "model.revision", "speculative": "engine.speculative", "prefix_caching": "engine.prefix_caching",
    "max_context": "model.max_context", "engine_version": "engine.version", "pooling": "model.pooling",
}


def probe_endpoint(control: ControlClient, cards: list[dict[str, Any]], model_id: str, base_url: str,
                   api: str = "chat") -> dict[str, SourcedValue]:
    """Every identity and capacity field the endpoint can tell, each marked `probed`; the model
    asked for is `declared` when the server's /v1/models does not list it (the model_listed rule
    says so)."""
    found = engines.probe_identity(control, cards, model_id, base_url, api)
    fields = {key: SourcedValue(value=scrub_json(value), source="probed", via=via)
              for key, (value, via) in found.items()}
    if "model.id" not in fields:
        fields["model.id"] = SourcedValue(
            value=model_id, source="declared",
            via="endpoint.model (--model): not among the ids the server's /v1/models lists")
    return fields


def complete_identity(probed: dict[str, SourcedValue], declared: dict[str, Any]) -> dict[str, SourcedValue]:
    """Probed fields, then declared ones (standard names via DECLARED_ALIASES; every declared
    key is also kept as `declared.<key>`), then `unknown` for each standard field left."""
    out = dict(probed)
    for key, value in declared.items():
        name = key if "." in key else f"declared.{key}"
        out[name] = SourcedValue(value=value, source="declared", via=f"identity.{key}")
        standard = DECLARED_ALIASES.get(key, key if key in STANDARD_FIELDS else None)
        if standard and standard not in out:
            out[standard] = SourcedValue(value=value, source="declared", via=f"identity.{key}")
    for key in STANDARD_FIELDS:
        if key not in out:
            out[key] = SourcedValue(value=None, source="unknown",
                                    via="not reported by this engine's endpoints; declare it under identity:")
    return out
