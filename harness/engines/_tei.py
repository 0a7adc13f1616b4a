"""Text Embeddings Inference (Hugging Face's embedder and reranker server): `/info` naming its
`model_type` (embedding with its pooling, reranker or classifier) tells it apart from TGI, whose
`/info` has none. Identity from `/info` (huggingface/text-embeddings-inference router/src/lib.rs,
`Info`): version, model id and revision, dtype, pooling, the longest input it takes
(`max_input_length`, tokens) and its batch limits. Requests go to its OpenAI-compatible
`/v1/embeddings`; its own `/embed` and `/rerank` answers (bare lists) parse as well
(harness._pooling). No tokenize route passport uses, no prefix cache; its Prometheus metrics
(`te_*`, on a port of their own in recent versions) are not read."""

from __future__ import annotations

from typing import Any

from harness.engines._common import put_hf_info
from harness.engines._profile import EngineProfile, ProbeContext

__all__ = ["PROFILE"]


def _model_type(info: dict[str, Any]) -> dict[str, Any] | None:
    kind = info.get("model_type")
    return kind if isinstance(kind, dict) and kind.keys() & {"embedding", "reranker", "classifier"} else None


def _probe(p: ProbeContext) -> None:
    info = p.control.get_json("/info") or {}
    put_hf_info(p, info)
    p.put("model.dtype", info.get("model_dtype"), "/info model_dtype")
    p.put("model.max_context", info.get("max_input_length"), "/info max_input_length")
    kind = _model_type(info) or {}
    embedding = kind.get("embedding")
    p.put("model.task", next(iter(kind), None), "/info model_type")
    if isinstance(embedding, dict):
        p.put("model.pooling", embedding.get("pooling"), "/info model_type.embedding.pooling")
    p.put("engine.max_batch_tokens", info.get("max_batch_tokens"), "/info max_batch_tokens")
    p.put("engine.max_client_batch_size", info.get("max_client_batch_size"), "/info max_client_batch_size")


PROFILE = EngineProfile(
    name="tei",
    detect=lambda control, card: _model_type(control.get_json("/info") or {}) is not None,
    detect_via="/info model_type",
    probe=_probe,
)
