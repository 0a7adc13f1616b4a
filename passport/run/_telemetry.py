"""Which telemetry sources a run samples, chosen from the spec and the detected engine.

`auto` uses the engine's own metrics endpoint (checked once before timing: an engine started
without metrics, e.g. llama-server without --metrics, is noted, not scraped), NVML when a GPU
driver is present, and a DCGM exporter when the spec names one. What was sampled, and what was
not and why, goes into the protocol.
"""

from __future__ import annotations

from typing import Any

from harness import ControlClient, NvmlSource, PrometheusSource, TrtllmJsonSource, engines, nvml_devices, samples
from passport.model import RunSpec
from passport.run._endpoint import Access

__all__ = ["choose_sources"]


def _answers_prometheus(control: ControlClient, path: str) -> bool:
    text = control.get_text(path)
    if not text:
        return False
    try:
        return bool(samples(text))
    except ValueError:
        return False


def _engine_sources(found: engines.EngineProfile | None, engine: str | None, control: ControlClient,
                    way: Access) -> tuple[list[Any], list[str], list[str]]:
    """The engine's own metrics endpoints, as its profile names them: (sources, used, notes)."""
    root = control.root_url
    if found is None or (found.prometheus_path is None and found.json_metrics_path is None):
        return [], [], [f"engine {engine or 'unknown'}: no metrics endpoint known"]
    sources: list[Any] = []
    used: list[str] = []
    if found.json_metrics_path is not None:
        sources.append(TrtllmJsonSource(f"{root}{found.json_metrics_path}", **way.scrape))
        used.append(f"trtllm json {root}{found.json_metrics_path}")
    path = found.prometheus_path
    if path is not None and _answers_prometheus(control, path):
        sources.append(PrometheusSource(f"{root}{path}", headers=way.headers, **way.scrape))
        used.append(f"prometheus {root}{path}")
    elif path is not None and not sources:
        hint = f" ({found.metrics_hint})" if found.metrics_hint else ""
        return [], [], [f"{root}{path} did not answer Prometheus text{hint}: no server-side series"]
    return sources, used, []


def choose_sources(spec: RunSpec, engine: str | None, control: ControlClient,
                   way: Access) -> tuple[list[Any], dict[str, Any]]:
    """(sources to sample, the protocol's record of them)."""
    t = spec.telemetry
    sources: list[Any] = []
    used: list[str] = []
    notes: list[str] = []
    if t.metrics == "off":
        notes.append("engine metrics: off in the spec")
    elif t.metrics != "auto":
        sources.append(PrometheusSource(t.metrics, headers=way.headers, **way.scrape))
        used.append(f"prometheus {t.metrics}")
    else:
        sources, used, notes = _engine_sources(engines.profile(engine), engine, control, way)
    if t.dcgm_url:
        sources.append(PrometheusSource(t.dcgm_url, dcgm=True, **way.scrape))
        used.append(f"dcgm {t.dcgm_url}")
    gpus = nvml_devices() if t.nvml == "auto" else []
    if gpus:
        sources.append(NvmlSource())
        used.append(f"nvml ({len(gpus)} GPU)")
    elif t.nvml == "auto":
        notes.append("NVML: no GPU driver on this machine (GPU memory, power and energy not sampled here)")
    return sources, {"interval_s": t.interval_s, "sources": used, "notes": notes}
