"""llama.cpp's llama-server: owned_by `llamacpp` (or answering /props, or a `b<build>-<hash>`
fingerprint); identity from /props and the /v1/models `meta`; prefix cache emptied by erasing
every slot, else `cache_prompt: false`; Prometheus /metrics (with --metrics); POST /tokenize
reading `content`; `json_schema` on /completions.

Endpoint kinds past chat, live in the e2e tier (tests/e2e/test_llamacpp_kinds.py): /v1/embeddings
from a launch with `--embeddings --pooling mean` (Gemma 3 270M: 640-dimensional vectors,
normalised; the default-embeddings canaries pass; it does not report its pooling over HTTP, so
declare it: `identity: {pooling: mean}`), and the /v1/responses and /v1/messages streams of an
ordinary launch. Its Responses stream ends an answer that stopped at `max_output_tokens` with
`response.completed`, status `completed`, where the API says `incomplete`: passport reads an
answer that used its whole budget as `length`. /v1/rerank needs `--reranking` and a reranker
GGUF, which no package on the registry carries: its rerank is tested against the simulator only
(vLLM serves rerank and score live in the e2e tier)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness._control import ControlClient
from harness.engines._common import call_until_ok, sha256_text
from harness.engines._profile import Api, EngineProfile, PrefixCacheRecord, ProbeContext, StructuredForm, TokenizeRoute

__all__ = ["PROFILE"]

_GGUF_QUANT = re.compile(r"[-_.]((?:i?q\d(?:_[a-z0-9]+)*)|f16|bf16|f32)\.gguf$", re.IGNORECASE)


def _probe(p: ProbeContext) -> None:
    props = p.control.get_json("/props") or {}
    settings = props.get("default_generation_settings") or {}
    p.put("engine.build", props.get("build_info"), "/props")
    p.put("engine.version", props.get("build_info"), "/props build_info")
    p.put("model.root", props.get("model_path"), "/props")
    quant = _GGUF_QUANT.search(str(props.get("model_path") or "").rsplit("/", 1)[-1])
    p.put("model.quantization", quant.group(1).upper() if quant else None, "/props model_path (GGUF file name)")
    p.put("model.chat_template_sha256", sha256_text(props.get("chat_template")), "/props chat_template")
    slots, n_ctx = props.get("total_slots"), settings.get("n_ctx")
    p.put("engine.total_slots", slots, "/props")
    p.put("capacity.context_per_sequence", n_ctx, "/props default_generation_settings.n_ctx")
    if isinstance(slots, int) and isinstance(n_ctx, int):
        p.put("capacity.kv_tokens", slots * n_ctx, "/props total_slots x n_ctx")
    params = settings.get("params") or {}
    n_max = params.get("speculative.n_max")
    p.put("engine.speculative", {"n_max": n_max, "n_min": params.get("speculative.n_min")} if n_max else None,
          "/props params")
    meta = p.card.get("meta") or {}
    p.put("model.n_ctx_train", meta.get("n_ctx_train"), "/v1/models meta")
    p.put("model.max_context", meta.get("n_ctx_train"), "/v1/models meta n_ctx_train")
    p.put("model.n_params", meta.get("n_params"), "/v1/models meta")
    p.put("model.size_bytes", meta.get("size"), "/v1/models meta")


def _reset(control: ControlClient, run_id: str, params: dict[str, Any]) -> PrefixCacheRecord:
    """Erase every slot; a build that refuses (it needs --slot-save-path) gets `cache_prompt:
    false` on every request instead: no reuse at all, colder than a cold start, and said so."""
    slots = control.get_any("/slots")
    ids = [s.get("id") for s in slots if isinstance(s, dict)] if isinstance(slots, list) else []
    statuses = [call_until_ok(control, "POST", f"/slots/{i}?action=erase") for i in ids]
    if ids and all(s == 200 for s in statuses):
        return {"enforced": True, "method": f"POST /slots/{{id}}?action=erase for {len(ids)} slots"}
    params["cache_prompt"] = False
    return {"enforced": True, "method": "cache_prompt: false on every request (no prompt reuse at all)",
            "reason": f"slot erase answered {statuses or 'no /slots'} (llama-server needs --slot-save-path)"}


def _structured(schema: dict[str, Any], api: Api) -> StructuredForm | None:
    return ({"json_schema": schema}, "json_schema (llama.cpp)") if api == "completions" else None


def _derive(values: Mapping[str, list[float]]) -> list[tuple[str, float]]:
    """llama.cpp counts processed prompt tokens *excluding* the cached ones: queries = both."""
    cached = values.get("llamacpp:prompt_tokens_cached_total")
    processed = values.get("llamacpp:prompt_tokens_total")
    return [("prefix_cache_queries_total", sum(cached) + sum(processed))] if cached and processed else []


PROFILE = EngineProfile(
    name="llama.cpp",
    owned_by=("llamacpp",),
    detect=lambda control, card: bool(control.get_json("/props")),
    detect_via="/props",
    fingerprint=re.compile(r"^b\d+-[0-9a-f]+$|^b0-unknown$"),
    probe_fingerprint=True,
    probe=_probe,
    ignore_eos=True,
    structured_output=_structured,
    reset_prefix_cache=_reset,
    prometheus_path="/metrics",
    metrics_hint="llama-server needs --metrics",
    series={
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
        "requests_running": ("llamacpp:requests_processing",),
        "requests_waiting": ("llamacpp:requests_deferred",),
        "prefix_cache_hits_total": ("llamacpp:prompt_tokens_cached_total",),
        "prompt_tokens_total": ("llamacpp:prompt_tokens_total",),
        "generation_tokens_total": ("llamacpp:tokens_predicted_total",),
        "kv_cache_tokens": ("llamacpp:kv_cache_tokens",),
    },
    derive_series=_derive,
    tokenize=TokenizeRoute("/tokenize", lambda text, model: {"content": text, "add_special": False}),
)
