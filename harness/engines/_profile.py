"""An engine family's profile: everything passport knows that belongs to one engine.

Adding an engine means writing one `EngineProfile` (a module beside the others, registered in
`harness.engines`) and its response fixtures; nothing else in the code base names an engine.
Each field is optional: a profile that leaves one out gets the engine-neutral behaviour, which
is what an unknown OpenAI-compatible server gets too (docs/engines/research.md is the reference).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness._control import ControlClient
from harness._openai import Api

__all__ = ["EngineProfile", "ProbeContext", "TokenizeRoute", "PrefixCacheRecord", "StructuredForm", "Api"]

# (body fields asking for JSON under a schema, a short name of that form for the protocol)
StructuredForm = tuple[dict[str, Any], str]
# The protocol's record of a prefix-cache reset: enforced, method, and a reason when it fell back.
PrefixCacheRecord = dict[str, Any]


@dataclass
class ProbeContext:
    """What an identity probe reads (`control`, the model's `/v1/models` `card`, the
    `system_fingerprint` of a 1-token request when one was sent) and where it writes: `put`
    keeps the first value said for a field, with the endpoint that said it (`via`)."""

    control: ControlClient
    card: dict[str, Any]
    fingerprint: str | None = None
    fields: dict[str, tuple[Any, str]] = field(default_factory=dict)

    def put(self, key: str, value: Any, via: str) -> None:
        if value is None or value == "" or key in self.fields:
            return
        self.fields[key] = (value, via)


@dataclass(frozen=True)
class TokenizeRoute:
    """The engine's tokenize endpoint: `path` under the server root and the JSON body for a
    text (special tokens off). The answer is read as `count` or the length of `tokens`."""

    path: str
    body: Callable[[str, str], dict[str, Any]]  # (text, model) -> body


@dataclass(frozen=True)
class EngineProfile:
    """One engine family. **Parameters:**

    - `name`: the engine's name in passports (`engine.name`), e.g. `vllm`.
    - Detection, tried in registration order: `owned_by` values of a `/v1/models` card naming
      it; `hosts` of a managed API (a host or any subdomain); `detect`, a control-plane check
      that only this engine passes (`detect_via` names it in the passport); `fingerprint`, a
      `system_fingerprint` pattern.
    - `probe_fingerprint`: send one 1-token request to read `system_fingerprint` (never for a
      paid API). `probe`: reads identity and capacity fields into a `ProbeContext`.
    - `ignore_eos`: it honours `ignore_eos`, so `max_tokens` can be the output target.
    - `openai_params_only`: it rejects open-engine sampling fields (`top_k`).
    - `structured_output(schema, api)`: its own field for JSON under a schema, or None for
      OpenAI's `response_format` json_schema.
    - `reset_prefix_cache(control, run_id, params)`: empties its prefix cache (may add request
      fields to `params`) and returns the protocol's record; None: no reset over HTTP.
    - `cache_salt`: it honours vLLM's per-request `cache_salt` (a request matches only cache entries
      made under the same salt), so one run can be kept apart from what others cached.
    - `prometheus_path` / `json_metrics_path`: its metrics endpoints (`metrics_hint`: how to turn
      them on, said when they do not answer); `series`: normalized
      telemetry name -> its metric names in preference order; `derive_series`: normalized
      values computed from several of its metrics.
    - `tokenize`: its tokenize route, or None when it has none.
    """

    name: str
    owned_by: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    detect: Callable[[ControlClient, dict[str, Any]], bool] | None = None
    detect_via: str = ""
    fingerprint: re.Pattern[str] | None = None
    probe_fingerprint: bool = False
    probe: Callable[[ProbeContext], None] | None = None
    ignore_eos: bool = False
    openai_params_only: bool = False
    structured_output: Callable[[dict[str, Any], Api], StructuredForm | None] | None = None
    reset_prefix_cache: Callable[[ControlClient, str, dict[str, Any]], PrefixCacheRecord] | None = None
    cache_salt: bool = False
    prometheus_path: str | None = None
    metrics_hint: str | None = None
    json_metrics_path: str | None = None
    series: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    derive_series: Callable[[Mapping[str, list[float]]], list[tuple[str, float]]] | None = None
    tokenize: TokenizeRoute | None = None
