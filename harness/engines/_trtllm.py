"""TensorRT-LLM (`trtllm-serve`): owned_by `tensorrt_llm`; identity from /version and the JSON
/metrics iteration stats (KV blocks, GPU memory); those stats are sampled during the run, with
/prometheus/metrics where it answers. No prefix-cache reset and no tokenize route over HTTP."""

from __future__ import annotations

from harness.engines._profile import EngineProfile, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    version = p.control.get_json("/version") or {}
    p.put("engine.version", version.get("version"), "/version")
    stats = p.control.get_any("/metrics")  # JSON iteration stats, drained when read
    if isinstance(stats, list) and stats and isinstance(stats[-1], dict):
        kv = stats[-1].get("kvCacheStats") or {}
        if kv.get("maxNumBlocks") and kv.get("tokensPerBlock"):
            p.put("capacity.kv_tokens", int(kv["maxNumBlocks"]) * int(kv["tokensPerBlock"]),
                  "/metrics kvCacheStats maxNumBlocks x tokensPerBlock")
        p.put("engine.gpu_memory_bytes", stats[-1].get("gpuMemUsage"), "/metrics gpuMemUsage")


PROFILE = EngineProfile(
    name="tensorrt-llm",
    owned_by=("tensorrt_llm",),
    probe=_probe,
    json_metrics_path="/metrics",
    prometheus_path="/prometheus/metrics",
    series={"requests_finished_total": ("trtllm_request_success_total", "request_success_total")},
)
