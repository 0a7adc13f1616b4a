"""Text Generation Inference: a /v1/models card whose owned_by is the model id and that answers
/info, or a `<version>-<label>` fingerprint; identity from /info; Prometheus /metrics (queue and
batch, `tgi_batch_max_total_tokens`); JSON Schema as `{"type": "json", "value": schema}` on
both APIs. No prefix-cache reset and no tokenize route over HTTP."""

from __future__ import annotations

import re
from typing import Any

from harness.engines._common import prometheus_samples, put_hf_info
from harness.engines._profile import Api, EngineProfile, ProbeContext, StructuredForm

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    info = p.control.get_json("/info") or {}
    put_hf_info(p, info)
    p.put("model.max_context", info.get("max_total_tokens"), "/info max_total_tokens")
    p.put("capacity.context_per_sequence", info.get("max_total_tokens"), "/info max_total_tokens")
    for s in prometheus_samples(p.control):
        if s.name == "tgi_batch_max_total_tokens":
            p.put("capacity.kv_tokens", int(s.value), "/metrics tgi_batch_max_total_tokens")


def _structured(schema: dict[str, Any], api: Api) -> StructuredForm | None:
    return {"response_format": {"type": "json", "value": schema}}, "response_format json (TGI)"


PROFILE = EngineProfile(
    name="tgi",
    detect=lambda control, card: (str(card.get("owned_by", "")) == str(card.get("id"))
                                  and bool(control.get_json("/info"))),
    detect_via="/info",
    fingerprint=re.compile(r"^\d+\.\d+\.\d+[\w.]*-(native|[\w.-]+)$"),
    probe_fingerprint=True,
    probe=_probe,
    structured_output=_structured,
    prometheus_path="/metrics",
    series={"requests_running": ("tgi_batch_current_size",), "requests_waiting": ("tgi_queue_size",),
            "requests_finished_total": ("tgi_request_success", "tgi_request_success_total")},
)
