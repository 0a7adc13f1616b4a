"""vLLM: owned_by `vllm`; identity from /version, /v1/models, /server_info (dev mode) and the
`vllm:cache_config_info` metric; prefix cache reset by POST /reset_prefix_cache (dev mode), else
a per-run `cache_salt`; Prometheus /metrics; POST /tokenize; `structured_outputs` on /completions.

Endpoint kinds past chat: /v1/embeddings, /v1/rerank (the Jina/Cohere body), /v1/score (`text_1`,
`text_2`), /v1/responses and /v1/audio/transcriptions, sent and parsed as vLLM documents them
(harness._pooling, _responses, _audio); `passport show --as vllm` gives vLLM bench serve's own view
of each. Its Responses stream ends an answer cut at `max_output_tokens` with `response.completed`
carrying `status: incomplete` (read as `length`); its transcription stream carries usage only with
the form field `stream_include_usage` (`--set decoding.extra.stream_include_usage=true`).
Embeddings, rerank and score run live in the e2e tier: the CPU build serves Gemma 3 270M as an
embedder (`--runner pooling --convert embed`, last-token pooling, normalised, 640 dimensions;
specs/vllm-embeddings.yaml), and scores documents by the cosine of their embeddings. Its request
counter counts each input of a batch, and a rerank or score request's query and each document, as
requests of their own (server_counters allows for it, rules version 12)."""

from __future__ import annotations

import re
from typing import Any

from harness._control import ControlClient
from harness.engines._common import OPENAI_STYLE_TOKENIZE, call_until_ok, prometheus_samples, salt_requests
from harness.engines._profile import Api, EngineProfile, PrefixCacheRecord, ProbeContext, StructuredForm

__all__ = ["PROFILE", "salted_reset"]


def _dtype(value: Any) -> Any:
    """`torch.bfloat16` (how /server_info writes it) as `bfloat16`."""
    return value.removeprefix("torch.") if isinstance(value, str) else value


def _probe(p: ProbeContext) -> None:
    control, card = p.control, p.card
    version = control.get_json("/version") or {}
    p.put("engine.version", version.get("version"), "/version")
    p.put("model.root", card.get("root"), "/v1/models")
    p.put("model.max_context", card.get("max_model_len"), "/v1/models max_model_len")
    p.put("capacity.context_per_sequence", card.get("max_model_len"), "/v1/models max_model_len")
    info = control.get_json("/server_info?config_format=json") or {}  # dev mode only
    config = info.get("vllm_config") or {}
    if isinstance(config, dict) and config:
        via = "/server_info (dev mode)"
        model = config.get("model_config") or {}
        cache = config.get("cache_config") or {}
        parallel = config.get("parallel_config") or {}
        p.put("model.revision", model.get("revision"), via)
        p.put("model.dtype", _dtype(model.get("dtype")), via)
        p.put("model.quantization", model.get("quantization"), via)
        p.put("engine.kv_cache_dtype", cache.get("cache_dtype"), via)
        p.put("engine.kv_block_size", cache.get("block_size"), via)
        p.put("engine.prefix_caching", cache.get("enable_prefix_caching"), via)
        p.put("engine.max_num_seqs", (config.get("scheduler_config") or {}).get("max_num_seqs"), via)
        p.put("engine.tensor_parallel_size", parallel.get("tensor_parallel_size"), via)
        p.put("engine.speculative", config.get("speculative_config") or "none", via)
    for s in prometheus_samples(control):
        if s.name == "vllm:cache_config_info":
            _cache_config_info(p, s.labels)


def _cache_config_info(p: ProbeContext, labels: dict[str, str]) -> None:
    """The `vllm:cache_config_info` labels. Realized KV capacity is `kv_cache_size_tokens` where
    the version has it: `num_gpu_blocks x block_size` overstates it for a model with sliding-window
    layers (Gemma 3 270M on vLLM 0.32 CPU: 2730 x 128 = 349,440 against 55,356 tokens), so the
    product is only the fallback of older versions."""
    via = "/metrics vllm:cache_config_info"
    p.put("engine.kv_cache_dtype", labels.get("cache_dtype"), via)
    caching = labels.get("enable_prefix_caching")
    p.put("engine.prefix_caching", None if caching is None else caching.lower() == "true", via)
    size = labels.get("block_size")
    p.put("engine.kv_block_size", int(size) if size and size.isdigit() else None, via)
    tokens, blocks = labels.get("kv_cache_size_tokens"), labels.get("num_gpu_blocks")
    if tokens and tokens.isdigit():
        p.put("capacity.kv_tokens", int(tokens), via + " kv_cache_size_tokens")
    elif blocks and size and blocks.isdigit() and size.isdigit():
        p.put("capacity.kv_tokens", int(blocks) * int(size), via + " num_gpu_blocks x block_size")
    p.put("engine.gpu_memory_utilization", labels.get("gpu_memory_utilization"), via)


def salted_reset(path: str, tries: int, needs: str) -> Any:
    """A reset by `POST path` (tried `tries` times); when refused, a per-run `cache_salt` on every
    request, so nothing cached before this run can match (vLLM and SGLang)."""

    def reset(control: ControlClient, run_id: str, params: dict[str, Any]) -> PrefixCacheRecord:
        status = call_until_ok(control, "POST", path, tries)
        if status == 200:
            return {"enforced": True, "method": f"POST {path}"}
        return {"enforced": True, "method": salt_requests(params, run_id),
                "reason": f"POST {path} answered {status} ({needs})"}

    return reset


def _structured(schema: dict[str, Any], api: Api) -> StructuredForm | None:
    if api != "completions":
        return None
    return {"structured_outputs": {"json": schema}}, "structured_outputs.json (vLLM)"


PROFILE = EngineProfile(
    name="vllm",
    owned_by=("vllm",),
    fingerprint=re.compile(r"^vllm-\d"),
    probe_fingerprint=True,  # `vllm-0.32.0-03b4dd4a`: the build with a hash of its configuration
    probe=_probe,
    ignore_eos=True,
    structured_output=_structured,
    reset_prefix_cache=salted_reset("/reset_prefix_cache", 1, "vLLM needs VLLM_SERVER_DEV_MODE=1"),
    cache_salt=True,
    prometheus_path="/metrics",
    series={
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "requests_running": ("vllm:num_requests_running",),
        "requests_waiting": ("vllm:num_requests_waiting",),
        "preemptions_total": ("vllm:num_preemptions_total",),
        "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "prompt_tokens_total": ("vllm:prompt_tokens_total",),
        "generation_tokens_total": ("vllm:generation_tokens_total",),
        "requests_finished_total": ("vllm:request_success_total",),  # summed over finished_reason
    },
    tokenize=OPENAI_STYLE_TOKENIZE,
)
