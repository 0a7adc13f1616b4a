"""Which telemetry sources a run samples, chosen from the spec and the detected engine.

`auto` uses the engine's own metrics endpoint (checked once before timing: an engine started
without metrics, e.g. llama-server without --metrics, is noted, not scraped), NVML when a GPU
driver is present, and a DCGM exporter when the spec names one. What was sampled, and what was
not and why, goes into the protocol.
"""

from __future__ import annotations

from typing import Any

from harness import ControlClient, NvmlSource, PrometheusSource, TrtllmJsonSource, nvml_devices, samples
from passport._spec import RunSpec

__all__ = ["choose_sources"]

_PROMETHEUS_ENGINES = ("vllm", "sglang", "llama.cpp", "tgi", "passport-simulator")


def _answers_prometheus(control: ControlClient, path: str) -> bool:
    text = control.get_text(path)
    if not text:
        return False
    try:
        return bool(samples(text))
    except ValueError:
        return False


def choose_sources(spec: RunSpec, engine: str | None, control: ControlClient,
                   headers: dict[str, str]) -> tuple[list[Any], dict[str, Any]]:
    """(sources to sample, the protocol's record of them)."""
    t = spec.telemetry
    sources: list[Any] = []
    used: list[str] = []
    notes: list[str] = []
    root = control.root_url
    if t.metrics == "off":
        notes.append("engine metrics: off in the spec")
    elif t.metrics != "auto":
        sources.append(PrometheusSource(t.metrics, headers=headers))
        used.append(f"prometheus {t.metrics}")
    elif engine == "tensorrt-llm":
        sources.append(TrtllmJsonSource(f"{root}/metrics"))
        used.append(f"trtllm json {root}/metrics")
        if _answers_prometheus(control, "/prometheus/metrics"):
            sources.append(PrometheusSource(f"{root}/prometheus/metrics", headers=headers))
            used.append(f"prometheus {root}/prometheus/metrics")
    elif engine in _PROMETHEUS_ENGINES:
        if _answers_prometheus(control, "/metrics"):
            sources.append(PrometheusSource(f"{root}/metrics", headers=headers))
            used.append(f"prometheus {root}/metrics")
        else:
            notes.append(f"{root}/metrics did not answer Prometheus text (llama-server needs --metrics, SGLang "
                         "--enable-metrics): no server-side series")
    else:
        notes.append(f"engine {engine or 'unknown'}: no metrics endpoint known")
    if t.dcgm_url:
        sources.append(PrometheusSource(t.dcgm_url, dcgm=True))
        used.append(f"dcgm {t.dcgm_url}")
    gpus = nvml_devices() if t.nvml == "auto" else []
    if gpus:
        sources.append(NvmlSource())
        used.append(f"nvml ({len(gpus)} GPU)")
    elif t.nvml == "auto":
        notes.append("NVML: no GPU driver on this machine (GPU memory, power and energy not sampled here)")
    return sources, {"interval_s": t.interval_s, "sources": used, "notes": notes}
