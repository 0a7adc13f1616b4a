"""The campaign spec: one workload, load and SLO (`run:`), and the arms that serve it.

A campaign answers "which launch of this model serves my traffic best, and is it correct?".
Everything about the traffic lives once, in `run:` (a run spec without an engine or endpoint
URL), so the six comparability invariants hold by construction: every arm gets the same
decoding, workload, schedule, load, window and warm-up. An arm is only the system under test:
an engine launch (or an endpoint to attach to), its identity declarations, its cost, the
capacity arithmetic to check before launching it, and what it declares it `varies` (a model or
precision differing from the other arms' is a broken invariant unless declared).

    name: gemma-campaign
    objective: goodput.requests_per_s      # how arms are ranked (never raw peak tokens/s)
    repetitions: 3                         # rounds, each arm once per round, the order rotating
    relaunch: once                         # or per_round: a fresh engine every round
    min_difference: 0.05                   # smaller differences are ties, however certain
    cost: {gpu_hour_usd: 1.2}              # each arm's unless it declares its own
    managed: {input_usd_per_million: 0.45, output_usd_per_million: 3.20}
    run: {workload: ..., load: ..., slo: {ttft.any.p99: 2s}, canaries: gemma3-270m}
    arms:
      - name: np1
        engine: {launch: "llama-server ... -np 1", model_path: ...}
        varies: {engine: "one slot"}
      - name: hosted
        endpoint: {base_url: https://api.example.com/v1, api_key_env: HOSTED_KEY}
        cost: {input_usd_per_million: 0.45, output_usd_per_million: 3.20}
        varies: {model: "the provider's build", precision: "unknown"}
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from passport._errors import SpecError
from passport.model._spec import (
    CostSpec,
    EndpointSpec,
    EngineSpec,
    RunSpec,
    _format_errors,
    _Strict,
    parse_spec,
    read_yaml_file,
)

__all__ = ["ARM_COUNTS", "RESERVED_ARM_NAMES", "CampaignSpec", "ArmSpec", "ArmCapacitySpec", "OBJECTIVES",
           "INVARIANT_VARIES", "load_campaign",
           "parse_campaign", "arm_raw_spec", "configured_kv_tokens"]

# Objective -> True when higher is better. Sustained rates over the window, never a peak.
OBJECTIVES: dict[str, bool] = {
    "goodput.requests_per_s": True,
    "goodput.output_tokens_per_s": True,
    "throughput.requests_per_s": True,
    "throughput.output_tokens_per_s": True,
    "cost.usd_per_million_tokens": False,
}
# The invariants an arm may declare it varies; the others (decoding, workload, load, window) come
# from `run:` and cannot differ.
INVARIANT_VARIES = ("model", "precision")
# How a campaign counts its arms by the way they ended (passport.judge._campaign); with `best`,
# names a gate reads under `arms.`, so no arm may take them.
ARM_COUNTS = ("total", "ranked", "held", "failed", "does_not_fit", "incomplete", "invalid", "not_comparable",
              "no_value")
RESERVED_ARM_NAMES = ("best", *ARM_COUNTS)


class ArmCapacitySpec(_Strict):
    """The arithmetic before launching (`passport capacity`): do the weights and the KV cache the
    workload needs fit in this arm's memory? An arm that does not fit is recorded and never
    launched. Give the pool (`kv_pool_gib`), or the memory with the parameter count."""

    gpu_memory_gib: float | None = Field(None, gt=0, le=1e6)
    utilization: float = Field(0.9, gt=0, le=1)
    reserve_gib: float = Field(0.0, ge=0)
    activations_gib: float = Field(0.0, ge=0)
    params: float | None = Field(None, gt=0, description="Parameter count, e.g. 7.6e9.")
    weights: str = Field("bf16", description="Weight format (bf16, fp8, q4_k_m, ...).")
    kv_dtype: str = Field("bf16", description="KV-cache dtype.")
    kv_pool_gib: float | None = Field(None, gt=0, le=1e6)
    kv_kib_per_token: float = Field(gt=0, le=1e6, description="KV bytes per token, KiB (passport capacity shows it).")
    state_mib_per_sequence: float = Field(0.0, ge=0, description="Fixed state per live sequence, MiB.")
    context_tokens: int = Field(ge=1, le=1 << 24, description="Tokens each live sequence needs.")
    sequences: int | None = Field(None, ge=1, description="Live sequences needed; default: the load's concurrency.")

    @model_validator(mode="after")
    def _pool_or_memory(self) -> Self:
        if self.kv_pool_gib is None and (self.gpu_memory_gib is None or self.params is None):
            raise ValueError("give kv_pool_gib, or gpu_memory_gib with params")
        return self


class ArmSpec(_Strict):
    """One system under test: an engine the campaign launches, or an endpoint it attaches to."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    engine: EngineSpec | None = None
    endpoint: EndpointSpec | None = Field(None, description="Attach here instead of launching (base_url).")
    identity: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    canaries: str | None = Field(
        None, description="This arm's canary suite instead of run.canaries: exact references belong to an engine "
                          "and a precision, so an arm of another precision brings its own (gemma3-270m-bf16).")
    varies: dict[str, str] = Field(
        default_factory=dict,
        description="What this arm changes, in words: {engine: '-np 2', precision: '4-bit KV'}; `model` and "
                    "`precision` here allow those invariants to differ from the other arms'.")
    cost: CostSpec | None = None
    capacity: ArmCapacitySpec | None = None
    configured_kv_tokens: int | None = Field(
        None, ge=1, description="KV tokens the launch asks for; default: read from its flags (-c, --ctx-size, "
                                "--max-model-len, --context-length).")

    @model_validator(mode="after")
    def _engine_or_endpoint(self) -> Self:
        attach = self.endpoint is not None and self.endpoint.base_url is not None
        if self.engine is None and not attach:
            raise ValueError("an arm needs engine.launch or endpoint.base_url")
        if self.engine is not None and attach:
            raise ValueError("an arm either launches (engine) or attaches (endpoint.base_url), not both")
        return self


class CampaignSpec(_Strict):
    """A campaign, as declared (see the module docstring)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    objective: str = Field("goodput.requests_per_s", description=f"One of {', '.join(OBJECTIVES)}.")
    mode: Literal["run", "sweep"] = Field("run", description="run: one timed run per arm; sweep: run.sweep's levels "
                                                             "per arm, the arm judged at its knee.")
    cost: CostSpec | None = Field(None, description="Each arm's cost unless it declares its own.")
    managed: CostSpec | None = Field(None, description="A managed endpoint's prices, priced against owned arms.")
    repetitions: int = Field(3, ge=1, le=50, description="Runs of every arm, in rounds whose order rotates (round 1: "
                                                         "A B C, round 2: B C A, ...); 1 gives no interval and "
                                                         "names no arm best.")
    relaunch: Literal["once", "per_round"] | None = Field(
        None, description="once (default in mode run): each arm's engine is launched, probed and checked by the "
                          "canaries once and kept up for every round (the engines must fit side by side); "
                          "per_round (always in mode sweep): restarted each round, so launch-to-launch variance is "
                          "measured too.")
    min_difference: float = Field(0.05, ge=0, lt=1, description="The smallest difference worth a decision, as a "
                                                                 "share of the better arm's objective: a smaller one, "
                                                                 "however certain, is a tie.")
    min_accuracy: float | None = Field(
        None, ge=0, le=1, description="An arm whose accuracy under load (any set of run.accuracy) is below this is "
                                      "held from the ranking, as one whose accuracy_drop rule warned always is.")
    run: dict[str, Any] = Field(description="The run spec every arm gets (no engine, no endpoint.base_url).")
    arms: list[ArmSpec] = Field(min_length=1, max_length=64)

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: str) -> str:
        if value not in OBJECTIVES:
            raise ValueError(f"must be one of {', '.join(OBJECTIVES)} (ranking by raw peak tokens/s is not offered)")
        return value

    @model_validator(mode="after")
    def _relaunch(self) -> Self:
        if self.relaunch is None:
            self.relaunch = "per_round" if self.mode == "sweep" else "once"
        elif self.mode == "sweep" and self.relaunch == "once":
            raise ValueError("relaunch: once needs mode: run; a sweep launches its engine for its own levels, so "
                             "mode: sweep relaunches every round (relaunch: per_round)")
        return self

    @field_validator("managed")
    @classmethod
    def _managed(cls, value: CostSpec | None) -> CostSpec | None:
        if value is not None and value.basis != "managed":
            raise ValueError("managed: needs input_usd_per_million and output_usd_per_million")
        return value

    @field_validator("arms")
    @classmethod
    def _unique(cls, arms: list[ArmSpec]) -> list[ArmSpec]:
        seen: dict[str, int] = {}
        for i, arm in enumerate(arms):
            if arm.name in RESERVED_ARM_NAMES:
                raise ValueError(f"arm {i + 1} is named {arm.name!r}, which a gate reads as arms.{arm.name}; "
                                 f"choose another name (reserved: {', '.join(RESERVED_ARM_NAMES)})")
            if arm.name in seen:
                raise ValueError(f"two arms are named {arm.name!r} (arms {seen[arm.name] + 1} and {i + 1}); "
                                 "each arm's name must be unique: it names its run folder and its row")
            seen[arm.name] = i
        return arms


def arm_raw_spec(campaign: CampaignSpec, arm: ArmSpec) -> dict[str, Any]:
    """The run spec of one arm, as written: `run:` with the arm's name, engine or endpoint,
    canaries (else run's), identity (added to run's) and cost (else the campaign's)."""
    raw = copy.deepcopy(campaign.run)
    raw.pop("name", None)
    raw["name"] = f"{campaign.name}-{arm.name}"
    endpoint = dict(raw.get("endpoint") or {})
    if arm.endpoint is not None:
        endpoint.update(arm.endpoint.model_dump(mode="json", exclude_unset=True))
    if endpoint:
        raw["endpoint"] = endpoint
    if arm.engine is not None:
        raw["engine"] = arm.engine.model_dump(mode="json", exclude_unset=True)
    if arm.canaries is not None:
        raw["canaries"] = arm.canaries
    identity = {**(raw.get("identity") or {}), **arm.identity}
    if identity:
        raw["identity"] = identity
    cost = arm.cost or campaign.cost
    if cost is not None:
        raw["cost"] = cost.model_dump(mode="json", exclude_unset=True)
    return raw


def _check_run_section(run: dict[str, Any]) -> None:
    if "engine" in run:
        raise SpecError("campaign run: has an engine section; each arm launches its own (arms[].engine)")
    if isinstance(run.get("endpoint"), dict) and run["endpoint"].get("base_url"):
        raise SpecError("campaign run.endpoint.base_url is set; each arm names its endpoint (arms[].endpoint) or "
                        "launches an engine")


def parse_campaign(data: Any, source: str = "") -> tuple[CampaignSpec, dict[str, RunSpec]]:
    """Validate a campaign and every arm's run spec; raises SpecError naming each bad field."""
    if not isinstance(data, dict):
        raise SpecError(f"campaign {source} must be a YAML mapping of fields (got {type(data).__name__})")
    try:
        campaign = CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_errors(exc, source).replace("invalid spec", "invalid campaign", 1)) from None
    _check_run_section(campaign.run)
    arms = {arm.name: parse_spec(arm_raw_spec(campaign, arm), f"{source} (arm {arm.name})") for arm in campaign.arms}
    first = next(iter(arms.values()))
    if campaign.objective.startswith("goodput") and not first.slo:
        raise SpecError(f"campaign {source}: objective {campaign.objective} ranks by goodput under the SLO; declare "
                        "run.slo (e.g. {ttft.any.p99: 2s}) or choose objective: throughput.requests_per_s")
    if campaign.objective.startswith("cost") and any(s.cost is None for s in arms.values()):
        raise SpecError(f"campaign {source}: objective {campaign.objective} needs a cost for every arm (cost: or "
                        "arms[].cost)")
    if campaign.mode == "sweep" and first.sweep is None:
        raise SpecError(f"campaign {source}: mode: sweep needs run.sweep (its levels)")
    return campaign, arms


def load_campaign(path: Path) -> tuple[CampaignSpec, dict[str, RunSpec], dict[str, Any]]:
    """Read a campaign YAML: (campaign, each arm's validated run spec by name, the mapping as written)."""
    raw = read_yaml_file(path, "campaign", "specs/*campaign*.yaml")
    campaign, arms = parse_campaign(raw, str(path))
    return campaign, arms, raw


_CONFIGURED_FLAGS = re.compile(r"(?:^|\s)(?:-c|--ctx-size|--max-model-len|--context-length)[\s=]+(\d+)")


def configured_kv_tokens(arm: ArmSpec) -> int | None:
    """KV tokens the arm's launch asks for: declared, else its context flag (llama.cpp -c /
    --ctx-size, vLLM --max-model-len, SGLang --context-length); None when neither says."""
    if arm.configured_kv_tokens is not None:
        return arm.configured_kv_tokens
    if arm.engine is None:
        return None
    found = _CONFIGURED_FLAGS.findall(arm.engine.launch)
    return int(found[-1]) if found else None
