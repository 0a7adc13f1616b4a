"""Identity and capacity from the endpoint itself, engine by engine (../shared/engines.md).

`probe_endpoint` detects the engine (the `/v1/models` card's `owned_by`, the host of a managed
API, then engine-specific endpoints), runs that engine's probes, and returns identity fields,
each with its source (`probed`, `via` the endpoint that said it). What no probe can tell is
filled from the spec's `identity` section (`declared`) or marked `unknown` for the standard
fields (`STANDARD_FIELDS`), so a reader sees what is known, from where, and what is not.
A probe that fails (404, not JSON, unreachable) means "feature absent", never an error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from harness import ControlClient, Sample, detect_engine, samples
from passport._model import SourcedValue

__all__ = ["STANDARD_FIELDS", "DECLARED_ALIASES", "MANAGED_HOSTS", "probe_endpoint", "complete_identity"]

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
    "max_context": "model.max_context", "engine_version": "engine.version",
}
MANAGED_HOSTS = {
    "api.openai.com": "openai", "openrouter.ai": "openrouter", "api.together.xyz": "together",
    "api.fireworks.ai": "fireworks", "api.cloudflare.com": "cloudflare-workers-ai",
    "gateway.ai.cloudflare.com": "cloudflare-workers-ai",
}


class _Fields:
    """Collects probed fields; the first source to say something wins."""

    def __init__(self) -> None:
        self.values: dict[str, SourcedValue] = {}

    def put(self, key: str, value: Any, via: str) -> None:
        if value is None or value == "" or key in self.values:
            return
        self.values[key] = SourcedValue(value=value, source="probed", via=via)


def _sha(text: Any) -> str | None:
    return hashlib.sha256(text.encode()).hexdigest() if isinstance(text, str) and text else None


def _metrics(control: ControlClient, path: str = "/metrics") -> list[Sample]:
    text = control.get_text(path)
    if not text:
        return []
    try:
        return samples(text)
    except ValueError:
        return []


def _vllm(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    version = control.get_json("/version") or {}
    f.put("engine.version", version.get("version"), "/version")
    f.put("model.root", card.get("root"), "/v1/models")
    f.put("model.max_context", card.get("max_model_len"), "/v1/models max_model_len")
    info = control.get_json("/server_info?config_format=json") or {}  # dev mode only
    config = info.get("vllm_config") or {}
    if isinstance(config, dict) and config:
        via = "/server_info (dev mode)"
        model = config.get("model_config") or {}
        cache = config.get("cache_config") or {}
        parallel = config.get("parallel_config") or {}
        f.put("model.revision", model.get("revision"), via)
        f.put("model.dtype", model.get("dtype"), via)
        f.put("model.quantization", model.get("quantization"), via)
        f.put("engine.kv_cache_dtype", cache.get("cache_dtype"), via)
        f.put("engine.prefix_caching", cache.get("enable_prefix_caching"), via)
        f.put("engine.tensor_parallel_size", parallel.get("tensor_parallel_size"), via)
        f.put("engine.speculative", config.get("speculative_config") or "none", via)
    for s in _metrics(control):
        if s.name == "vllm:cache_config_info":
            via = "/metrics vllm:cache_config_info"
            f.put("engine.kv_cache_dtype", s.labels.get("cache_dtype"), via)
            caching = s.labels.get("enable_prefix_caching")
            f.put("engine.prefix_caching", None if caching is None else caching.lower() == "true", via)
            blocks, size = s.labels.get("num_gpu_blocks"), s.labels.get("block_size")
            if blocks and size and blocks.isdigit() and size.isdigit():
                f.put("capacity.kv_tokens", int(blocks) * int(size), via + " num_gpu_blocks x block_size")
            f.put("engine.gpu_memory_utilization", s.labels.get("gpu_memory_utilization"), via)


def _sglang(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    info, via = control.get_json("/server_info"), "/server_info"
    if info is None:
        info, via = control.get_json("/get_server_info"), "/get_server_info"
    info = info or {}
    f.put("engine.version", info.get("version"), via)
    f.put("model.root", info.get("model_path") or card.get("root"), via if info.get("model_path") else "/v1/models")
    f.put("model.revision", info.get("revision"), via)
    f.put("model.dtype", info.get("dtype"), via)
    f.put("model.quantization", info.get("quantization"), via)
    f.put("engine.kv_cache_dtype", info.get("kv_cache_dtype"), via)
    f.put("engine.tensor_parallel_size", info.get("tp_size"), via)
    if "speculative_algorithm" in info:
        f.put("engine.speculative", info.get("speculative_algorithm") or "none", via)
    if "disable_radix_cache" in info:
        f.put("engine.prefix_caching", not info["disable_radix_cache"], via + " disable_radix_cache")
    f.put("model.chat_template_sha256", _sha(info.get("chat_template")), via + " chat_template")
    f.put("capacity.kv_tokens", info.get("max_total_num_tokens"), via + " max_total_num_tokens")
    f.put("model.max_context", card.get("max_model_len") or info.get("context_length"), "/v1/models max_model_len")
    f.put("capacity.context_per_sequence", info.get("max_req_input_len"), via + " max_req_input_len")


def _trtllm(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    version = control.get_json("/version") or {}
    f.put("engine.version", version.get("version"), "/version")
    stats = control.get_any("/metrics")  # JSON iteration stats, drained when read
    if isinstance(stats, list) and stats and isinstance(stats[-1], dict):
        kv = stats[-1].get("kvCacheStats") or {}
        if kv.get("maxNumBlocks") and kv.get("tokensPerBlock"):
            f.put("capacity.kv_tokens", int(kv["maxNumBlocks"]) * int(kv["tokensPerBlock"]),
                  "/metrics kvCacheStats maxNumBlocks x tokensPerBlock")
        f.put("engine.gpu_memory_bytes", stats[-1].get("gpuMemUsage"), "/metrics gpuMemUsage")


_GGUF_QUANT = re.compile(r"[-_.]((?:i?q\d(?:_[a-z0-9]+)*)|f16|bf16|f32)\.gguf$", re.IGNORECASE)


def _llamacpp(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    props = control.get_json("/props") or {}
    settings = props.get("default_generation_settings") or {}
    f.put("engine.build", props.get("build_info"), "/props")
    f.put("engine.version", props.get("build_info"), "/props build_info")
    f.put("model.root", props.get("model_path"), "/props")
    quant = _GGUF_QUANT.search(str(props.get("model_path") or "").rsplit("/", 1)[-1])
    f.put("model.quantization", quant.group(1).upper() if quant else None, "/props model_path (GGUF file name)")
    f.put("model.chat_template_sha256", _sha(props.get("chat_template")), "/props chat_template")
    slots, n_ctx = props.get("total_slots"), settings.get("n_ctx")
    f.put("engine.total_slots", slots, "/props")
    f.put("capacity.context_per_sequence", n_ctx, "/props default_generation_settings.n_ctx")
    if isinstance(slots, int) and isinstance(n_ctx, int):
        f.put("capacity.kv_tokens", slots * n_ctx, "/props total_slots x n_ctx")
    params = settings.get("params") or {}
    n_max = params.get("speculative.n_max")
    f.put("engine.speculative", {"n_max": n_max, "n_min": params.get("speculative.n_min")} if n_max else None,
          "/props params")
    meta = card.get("meta") or {}
    f.put("model.n_ctx_train", meta.get("n_ctx_train"), "/v1/models meta")
    f.put("model.max_context", meta.get("n_ctx_train"), "/v1/models meta n_ctx_train")
    f.put("model.n_params", meta.get("n_params"), "/v1/models meta")
    f.put("model.size_bytes", meta.get("size"), "/v1/models meta")


def _tgi(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    info = control.get_json("/info") or {}
    f.put("engine.version", info.get("version"), "/info")
    f.put("engine.build", info.get("sha") or info.get("docker_label"), "/info")
    f.put("model.root", info.get("model_id"), "/info")
    f.put("model.revision", info.get("model_sha"), "/info model_sha")
    f.put("model.max_context", info.get("max_total_tokens"), "/info max_total_tokens")
    f.put("capacity.context_per_sequence", info.get("max_total_tokens"), "/info max_total_tokens")
    for s in _metrics(control):
        if s.name == "tgi_batch_max_total_tokens":
            f.put("capacity.kv_tokens", int(s.value), "/metrics tgi_batch_max_total_tokens")


def _ollama(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    version = control.get_json("/api/version") or {}
    f.put("engine.version", version.get("version"), "/api/version")
    model = str(card.get("id", ""))
    show = control.get_json("/api/show", method="POST", body={"model": model}) or {}
    details = show.get("details") or {}
    f.put("model.quantization", details.get("quantization_level"), "/api/show details")
    f.put("model.format", details.get("format"), "/api/show details")
    f.put("model.parameter_size", details.get("parameter_size"), "/api/show details")
    f.put("model.chat_template_sha256", _sha(show.get("template")), "/api/show template")
    info = show.get("model_info") or {}
    trained = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    f.put("model.max_context", trained, "/api/show model_info context_length")
    ps = control.get_json("/api/ps") or {}
    for loaded in ps.get("models") or []:
        if loaded.get("name") == model or loaded.get("model") == model:
            f.put("capacity.context_per_sequence", loaded.get("context_length"), "/api/ps context_length")
            f.put("engine.size_vram_bytes", loaded.get("size_vram"), "/api/ps size_vram")


def _mlx(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    """Nothing but the model id; its version is in system_fingerprint (see `fingerprint`)."""


def _simulator(control: ControlClient, card: dict[str, Any], f: _Fields) -> None:
    f.put("engine.version", "passport-simulator", "/v1/models owned_by")


_PROBES: dict[str, Callable[[ControlClient, dict[str, Any], _Fields], None]] = {
    "vllm": _vllm, "sglang": _sglang, "tensorrt-llm": _trtllm, "llama.cpp": _llamacpp, "tgi": _tgi,
    "ollama": _ollama, "mlx": _mlx, "passport-simulator": _simulator,
}
_FINGERPRINT = {
    re.compile(r"^b\d+-[0-9a-f]+$|^b0-unknown$"): "llama.cpp",
    re.compile(r"^fp_ollama$"): "ollama",
    re.compile(r"^\d+\.\d+[\w.]*-\d+\.\d+[\w.]*-.+-.+$"): "mlx",  # mlx_lm-mlx-platform-gpu
    re.compile(r"^\d+\.\d+\.\d+[\w.]*-(native|[\w.-]+)$"): "tgi",
}


def _detect(control: ControlClient, card: dict[str, Any], base_url: str) -> tuple[str | None, str]:
    engine = detect_engine(card)
    if engine:
        return engine, "/v1/models owned_by"
    host = urlparse(base_url).hostname or ""
    for suffix, provider in MANAGED_HOSTS.items():
        if host == suffix or host.endswith("." + suffix):
            return f"managed:{provider}", "endpoint host"
    if str(card.get("owned_by", "")) == str(card.get("id")) and control.get_json("/info"):
        return "tgi", "/info"
    if control.get_json("/api/version"):
        return "ollama", "/api/version"
    if control.get_json("/props"):
        return "llama.cpp", "/props"
    return None, ""


def fingerprint(control: ControlClient, model: str, api: str) -> str | None:
    """`system_fingerprint` of a one-token, non-streamed request (untimed), or None."""
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": False}
    body.update({"messages": [{"role": "user", "content": "Hi"}]} if api == "chat" else {"prompt": "Hi"})
    answer = control.get_json(path, method="POST", body=body)
    value = (answer or {}).get("system_fingerprint")
    return value if isinstance(value, str) else None


def probe_endpoint(control: ControlClient, cards: list[dict[str, Any]], model_id: str, base_url: str,
                   api: str = "chat") -> dict[str, SourcedValue]:
    """Every identity and capacity field the endpoint can tell (see the module docstring)."""
    card = next((c for c in cards if c.get("id") == model_id), {})
    f = _Fields()
    f.put("model.id", model_id, "/v1/models")
    f.put("model.owned_by", card.get("owned_by"), "/v1/models")
    engine, via = _detect(control, card, base_url)
    mark = None
    if engine is None or engine in ("tgi", "llama.cpp", "ollama"):  # never a paid managed API
        mark = fingerprint(control, model_id, api)
        f.put("engine.fingerprint", mark, "system_fingerprint of a 1-token request")
    if engine is None and mark:
        engine = next((name for pattern, name in _FINGERPRINT.items() if pattern.match(mark)), None)
        via = "system_fingerprint"
    if engine is not None:
        f.put("engine.name", engine, via)
        probe = _PROBES.get(engine)
        if probe is not None:
            probe(control, card, f)
    if "@" in model_id:  # transformers serve (and others) accept id@revision
        f.put("model.revision", model_id.split("@", 1)[1], "/v1/models id@revision")
    if engine == "mlx" and mark:
        f.put("engine.version", mark.split("-")[0], "system_fingerprint (mlx_lm version)")
    return f.values


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
