"""The simulated engine (`python -m harness.simulator`): owned_by `passport-sim`; honours
ignore_eos; a prefix cache only when started with --prefix-cache (reset as vLLM's, by POST
/reset_prefix_cache) and honours vLLM's `cache_salt`; serves Prometheus /metrics, POST /tokenize
(words) and GET /version (its `--build`: engine.build).

It serves every endpoint kind (harness/simulator/_kinds.py) with timings a test can predict: a
pooling answer (embeddings, rerank, score), whole, after the TTFT plus one ITL per input or
document past the first; Responses and Messages streams token by token as chat, in their own
events, the Responses API keeping each conversation under its response id for
`previous_response_id`; a transcription of 3 words a second of audio, as vLLM's chunks.
Embeddings are hashed bags of words normalised to length 1 (`--embedding-dim`, default 64): the
same text gives the same vector, a paraphrase is nearer than an unrelated text; rerank and score
give each document the share of the query's words it holds; a WAV carrying a `txt ` chunk is
"transcribed" to that text (its own convention, for the transcript canary's tests)."""

from __future__ import annotations

from typing import Any

from harness._control import ControlClient
from harness.engines._common import ANY_TOKENIZE
from harness.engines._profile import EngineProfile, PrefixCacheRecord, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    p.put("engine.version", "passport-simulator", "/v1/models owned_by")
    version = p.control.get_json("/version") or {}
    p.put("engine.build", version.get("build"), "/version")


def _reset(control: ControlClient, run_id: str, params: dict[str, Any]) -> PrefixCacheRecord:
    answer = control.request("POST", "/reset_prefix_cache")
    if answer is not None and answer.status_code == 200:
        return {"enforced": True, "method": "POST /reset_prefix_cache"}
    return {"enforced": True, "method": "none needed: the simulated engine runs without a prefix cache"}


PROFILE = EngineProfile(
    name="passport-simulator",
    owned_by=("passport-sim",),
    probe=_probe,
    ignore_eos=True,
    reset_prefix_cache=_reset,
    cache_salt=True,
    prometheus_path="/metrics",
    tokenize=ANY_TOKENIZE,
)
