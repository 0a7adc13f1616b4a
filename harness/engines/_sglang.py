"""SGLang: owned_by `sglang`; identity from /server_info (or the old /get_server_info); prefix
cache flushed by POST /flush_cache (retried while requests drain), else a per-run
`cache_salt`; Prometheus /metrics (with --enable-metrics); POST /tokenize; `json_schema` as a
string on /completions."""

from __future__ import annotations

from typing import Any

import orjson

from harness.engines._common import OPENAI_STYLE_TOKENIZE, sha256_text
from harness.engines._profile import Api, EngineProfile, ProbeContext, StructuredForm
from harness.engines._vllm import salted_reset

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    control, card = p.control, p.card
    info, via = control.get_json("/server_info"), "/server_info"
    if info is None:
        info, via = control.get_json("/get_server_info"), "/get_server_info"
    info = info or {}
    p.put("engine.version", info.get("version"), via)
    p.put("model.root", info.get("model_path") or card.get("root"), via if info.get("model_path") else "/v1/models")
    p.put("model.revision", info.get("revision"), via)
    p.put("model.dtype", info.get("dtype"), via)
    p.put("model.quantization", info.get("quantization"), via)
    p.put("engine.kv_cache_dtype", info.get("kv_cache_dtype"), via)
    p.put("engine.tensor_parallel_size", info.get("tp_size"), via)
    if "speculative_algorithm" in info:
        p.put("engine.speculative", info.get("speculative_algorithm") or "none", via)
    if "disable_radix_cache" in info:
        p.put("engine.prefix_caching", not info["disable_radix_cache"], via + " disable_radix_cache")
    p.put("model.chat_template_sha256", sha256_text(info.get("chat_template")), via + " chat_template")
    p.put("capacity.kv_tokens", info.get("max_total_num_tokens"), via + " max_total_num_tokens")
    p.put("model.max_context", card.get("max_model_len") or info.get("context_length"), "/v1/models max_model_len")
    p.put("capacity.context_per_sequence", info.get("max_req_input_len"), via + " max_req_input_len")


def _structured(schema: dict[str, Any], api: Api) -> StructuredForm | None:
    if api != "completions":
        return None
    return {"json_schema": orjson.dumps(schema).decode()}, "json_schema string (SGLang)"


PROFILE = EngineProfile(
    name="sglang",
    owned_by=("sglang",),
    probe=_probe,
    ignore_eos=True,
    structured_output=_structured,
    reset_prefix_cache=salted_reset("/flush_cache", 6, "SGLang refuses while requests run"),
    cache_salt=True,
    prometheus_path="/metrics",
    metrics_hint="SGLang needs --enable-metrics",
    series={
        "kv_cache_usage": ("sglang:token_usage",),
        "requests_running": ("sglang:num_running_reqs",),
        "requests_waiting": ("sglang:num_queue_reqs",),
        "preemptions_total": ("sglang:num_retracted_requests_total",),
        "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
        "prompt_tokens_total": ("sglang:prompt_tokens_total",),
        "generation_tokens_total": ("sglang:generation_tokens_total",),
        "kv_cache_tokens": ("sglang:num_used_tokens",),
    },
    tokenize=OPENAI_STYLE_TOKENIZE,
)
