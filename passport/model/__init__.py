"""The data at passport's boundaries, validated with pydantic: the run spec coming in (YAML ->
`RunSpec`, one clear message per bad field) and the passport going out (`Passport`, its
versioned JSON Schema, `read_passport` that refuses unknown versions). It computes nothing:
figures come from `passport.audit`, whose TypedDict shapes these models validate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passport._lazy import lazy_names

# Loaded on first use (PEP 562): a command pays only for the names it uses.
if TYPE_CHECKING:
    from passport.model._campaign import (
        ARM_COUNTS,
        INVARIANT_VARIES,
        OBJECTIVES,
        RESERVED_ARM_NAMES,
        ArmCapacitySpec,
        ArmSpec,
        CampaignSpec,
        arm_raw_spec,
        configured_kv_tokens,
        load_campaign,
        parse_campaign,
    )
    from passport.model._io import passport_model, passport_of, read_passport, read_passport_json
    from passport.model._passport import (
        SCHEMA_VERSION,
        SUPPORTED_SCHEMA_VERSIONS,
        ClockInfo,
        DeclaredInfo,
        HarnessInfo,
        MetricDefinition,
        Override,
        Passport,
        PassportDraft,
        Protocol,
        RuleStatus,
        ScheduleInfo,
        Signature,
        Source,
        SourcedValue,
        TimingEnd,
        Validity,
        Verdict,
        WorkloadInfo,
    )
    from passport.model._schema import SCHEMA_PATH, generate_schema, render_schema
    from passport.model._spec import (
        AccuracySetSpec,
        AccuracySpec,
        CostSpec,
        DecodingSpec,
        EndpointSpec,
        EngineSpec,
        RunSpec,
        SweepSpec,
        TimeoutSpec,
        ValiditySpec,
        load_spec,
        parse_spec,
        with_overrides,
    )

__all__ = [
    "INVARIANT_VARIES",
    "ARM_COUNTS",
    "RESERVED_ARM_NAMES",
    "OBJECTIVES",
    "ArmCapacitySpec",
    "ArmSpec",
    "CampaignSpec",
    "arm_raw_spec",
    "configured_kv_tokens",
    "load_campaign",
    "parse_campaign",
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "ClockInfo",
    "DecodingSpec",
    "DeclaredInfo",
    "EndpointSpec",
    "EngineSpec",
    "HarnessInfo",
    "MetricDefinition",
    "Override",
    "Passport",
    "PassportDraft",
    "TimingEnd",
    "Signature",
    "Protocol",
    "RuleStatus",
    "RunSpec",
    "ScheduleInfo",
    "Source",
    "SourcedValue",
    "SweepSpec",
    "CostSpec",
    "TimeoutSpec",
    "Validity",
    "ValiditySpec",
    "AccuracySpec",
    "AccuracySetSpec",
    "Verdict",
    "WorkloadInfo",
    "generate_schema",
    "load_spec",
    "with_overrides",
    "parse_spec",
    "read_passport",
    "passport_model",
    "passport_of",
    "read_passport_json",
    "render_schema",
]

_HOME = {name: module for module, names in {
    "passport.model._campaign": (
        "ARM_COUNTS", "INVARIANT_VARIES", "OBJECTIVES", "RESERVED_ARM_NAMES", "ArmCapacitySpec", "ArmSpec",
        "CampaignSpec", "arm_raw_spec", "configured_kv_tokens", "load_campaign", "parse_campaign",
    ),
    "passport.model._io": (
        "passport_model", "passport_of", "read_passport", "read_passport_json",
    ),
    "passport.model._passport": (
        "SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS",
        "ClockInfo", "DeclaredInfo", "HarnessInfo",
        "MetricDefinition", "Override", "Passport", "PassportDraft", "TimingEnd", "Signature", "Protocol",
        "RuleStatus", "ScheduleInfo", "Source",
        "SourcedValue", "Validity", "Verdict", "WorkloadInfo",
    ),
    "passport.model._schema": (
        "SCHEMA_PATH", "generate_schema", "render_schema",
    ),
    "passport.model._spec": (
        "CostSpec", "DecodingSpec", "EndpointSpec", "EngineSpec", "RunSpec", "SweepSpec", "TimeoutSpec",
        "ValiditySpec", "AccuracySpec", "AccuracySetSpec", "load_spec", "parse_spec", "with_overrides",
    ),
}.items() for name in names}

if not TYPE_CHECKING:  # for the type checker every name is imported above; unknown ones are errors
    __getattr__, __dir__ = lazy_names(__name__, _HOME)
