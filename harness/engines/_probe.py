"""Identity and capacity from the endpoint itself: detect the engine, then run its probe.

A probe that fails (404, not JSON, unreachable) means "feature absent", never an error. Each
field comes back as (value, via): the endpoint that said it.
"""

from __future__ import annotations

import math
from typing import Any

from harness._control import ControlClient
from harness.engines._profile import ProbeContext
from harness.engines._registry import detect, engine_of_fingerprint, profile

__all__ = ["probe_identity", "fingerprint", "probe_embeddings"]

_NORM_TOLERANCE = 1e-3  # a vector whose length is within this of 1 is taken as normalised


def fingerprint(control: ControlClient, model: str, api: str) -> str | None:
    """`system_fingerprint` of a one-token, non-streamed request (untimed), or None."""
    if api not in ("chat", "completions"):
        return None  # the other kinds' answers carry none
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": False}
    body.update({"messages": [{"role": "user", "content": "Hi"}]} if api == "chat" else {"prompt": "Hi"})
    answer = control.get_json(path, method="POST", body=body)
    value = (answer or {}).get("system_fingerprint")
    return value if isinstance(value, str) else None


def probe_identity(control: ControlClient, cards: list[dict[str, Any]], model_id: str, base_url: str,
                   api: str = "chat") -> dict[str, tuple[Any, str]]:
    """Every identity and capacity field the endpoint can tell, as {field: (value, via)}.

    The fingerprint request goes to an unknown engine and to engines whose build shows only
    there (never to a managed API, where it may cost)."""
    card = next((c for c in cards if c.get("id") == model_id), {})
    p = ProbeContext(control, card)
    if card:  # an id the server does not list is what the run asked for, not what the server said
        p.put("model.id", model_id, "/v1/models")
    p.put("model.owned_by", card.get("owned_by"), "/v1/models")
    engine, via = detect(control, card, base_url)
    found = profile(engine)
    if engine is None or (found is not None and found.probe_fingerprint):
        p.fingerprint = fingerprint(control, model_id, api)
        p.put("engine.fingerprint", p.fingerprint, "system_fingerprint of a 1-token request")
    if engine is None and p.fingerprint:
        engine, via = engine_of_fingerprint(p.fingerprint), "system_fingerprint"
        found = profile(engine)
    if engine is not None:
        p.put("engine.name", engine, via)
        if found is not None and found.probe is not None:
            found.probe(p)
    if api == "embeddings":
        for key, value in probe_embeddings(control, model_id).items():
            p.put(key, value, "/v1/embeddings of two inputs (untimed)")
    if "@" in model_id:  # transformers serve (and others) accept id@revision
        p.put("model.revision", model_id.split("@", 1)[1], "/v1/models id@revision")
    return p.fields


def probe_embeddings(control: ControlClient, model_id: str) -> dict[str, Any]:
    """The embedding's dimension and whether vectors come back normalised (length 1), from one
    untimed request of a short and a longer input; {} when it fails."""
    body = {"model": model_id, "input": ["Hi", "A longer sentence, to see that its vector has the same length."],
            "encoding_format": "float"}
    answer = control.get_json("/v1/embeddings", method="POST", body=body)
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or not data:
        return {}
    vectors: list[list[float]] = [item["embedding"] for item in data if isinstance(item, dict)
                                  and isinstance(item.get("embedding"), list) and item["embedding"]
                                  and all(isinstance(x, (int, float)) for x in item["embedding"])]
    if len(vectors) != len(data):
        return {}
    dims = {len(v) for v in vectors}
    norms = [math.sqrt(sum(float(x) * float(x) for x in v)) for v in vectors]
    return {"model.embedding_dim": dims.pop() if len(dims) == 1 else sorted(dims),
            "model.embedding_normalized": all(abs(n - 1.0) <= _NORM_TOLERANCE for n in norms)}
