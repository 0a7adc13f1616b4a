"""Decisions over passports: are runs comparable and which differences are real (`compare`),
does a run meet a release gate (`gate`), where a sweep's knee and saturation lie, and how a
campaign's arms rank (what fits before anything is measured is `passport.plan`). Validity rules are the
auditor's (`passport.audit`), so `verify` can re-derive a verdict; this package reads passports,
never raw timings it did not get from `passport.audit`. It renders nothing (`passport.report`)
and sends nothing (`passport.run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passport._lazy import lazy_names

# Loaded on first use (PEP 562): a command loads only the modules of the names it uses.
if TYPE_CHECKING:
    from passport.judge._campaign import (
        CAMPAIGN_FILE,
        CAMPAIGN_VERSION,
        ROW_PATHS,
        SWEEP_FILE,
        ArmRow,
        ArmSummary,
        Fit,
        Progress,
        TrustedCampaign,
        arm_counts,
        campaign_record,
        check_fit,
        evaluate_campaign_gate,
        failed_arm,
        gate_view,
        judged_at_knee,
        managed_lines,
        no_best_reason,
        read_campaign,
        recompute_campaign,
        recorded_rows,
        resolve_campaign_name,
        spec_digest,
        summarize_arm,
        summarize_arms,
        trusted_campaign,
        turns,
    )
    from passport.judge._compare import (
        INVARIANTS,
        MIN_EFFECT,
        Comparison,
        MetricComparison,
        compare_runs,
        format_interval,
        format_p,
        format_value,
        invariant_text,
        invariant_values,
        method_line,
        render_comparison,
    )
    from passport.judge._gate import (
        Condition,
        ConditionResult,
        GateError,
        evaluate_gate,
        load_gate_file,
        parse_condition,
    )
    from passport.judge._names import resolve
    from passport.judge._sweep import (
        SWEEP_VERSION,
        LevelResult,
        SweepOutcome,
        TargetCall,
        auto_concurrency,
        knee,
        load_text,
        saturation,
        stop_reason,
        summarize_level,
    )

__all__ = [
    "CAMPAIGN_FILE",
    "CAMPAIGN_VERSION",
    "campaign_record",
    "SWEEP_FILE",
    "judged_at_knee",
    "gate_view",
    "resolve_campaign_name",
    "resolve",
    "read_campaign",
    "recompute_campaign",
    "ROW_PATHS",
    "ArmRow",
    "Fit",
    "arm_counts",
    "check_fit",
    "failed_arm",
    "managed_lines",
    "summarize_arm",
    "summarize_arms",
    "ArmSummary",
    "Progress",
    "recorded_rows",
    "spec_digest",
    "turns",
    "evaluate_campaign_gate",
    "no_best_reason",
    "trusted_campaign",
    "TrustedCampaign",
    "INVARIANTS",
    "MIN_EFFECT",
    "SWEEP_VERSION",
    "Comparison",
    "Condition",
    "ConditionResult",
    "GateError",
    "LevelResult",
    "TargetCall",
    "MetricComparison",
    "SweepOutcome",
    "auto_concurrency",
    "compare_runs",
    "evaluate_gate",
    "format_interval",
    "format_p",
    "format_value",
    "invariant_text",
    "invariant_values",
    "knee",
    "load_gate_file",
    "load_text",
    "method_line",
    "parse_condition",
    "render_comparison",
    "saturation",
    "stop_reason",
    "summarize_level",
]

_HOME = {name: module for module, names in {
    "passport.judge._campaign": (
        "CAMPAIGN_FILE", "CAMPAIGN_VERSION", "ROW_PATHS", "ArmRow", "Fit", "arm_counts", "campaign_record",
        "check_fit", "failed_arm", "managed_lines", "read_campaign", "recompute_campaign",
        "summarize_arm", "gate_view", "resolve_campaign_name", "SWEEP_FILE", "judged_at_knee", "ArmSummary",
        "Progress", "summarize_arms", "recorded_rows", "spec_digest", "turns", "evaluate_campaign_gate",
        "no_best_reason", "trusted_campaign", "TrustedCampaign",
    ),
    "passport.judge._names": ("resolve",),
    "passport.judge._compare": (
        "INVARIANTS", "MIN_EFFECT", "Comparison", "MetricComparison", "compare_runs", "format_interval", "format_p",
        "format_value", "invariant_text", "invariant_values", "method_line", "render_comparison",
    ),
    "passport.judge._gate": (
        "Condition", "ConditionResult", "GateError", "evaluate_gate", "load_gate_file", "parse_condition",
    ),
    "passport.judge._sweep": (
        "SWEEP_VERSION", "LevelResult", "SweepOutcome", "auto_concurrency", "knee", "load_text", "saturation",
        "stop_reason", "summarize_level", "TargetCall",
    ),
}.items() for name in names}


if not TYPE_CHECKING:  # for the type checker every name is imported above; unknown ones are errors
    __getattr__, __dir__ = lazy_names(__name__, _HOME)
