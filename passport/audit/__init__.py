"""The auditor's arithmetic: every figure of a passport, recomputed from a run folder.

Metric definitions (one record per id), results, the declarations frozen before the run (SLOs,
discard rules, realized capacity), discards, SLO attainment, traffic figures, server telemetry,
validity rules and `verify`. It needs numpy, pyarrow and the run folder only: importing it loads
neither the load generator (harness, canaries, workloads) nor pydantic, matplotlib or psutil
(tests/unit/audit/test_imports.py checks `sys.modules`). It does not send requests, render
reports or decide comparisons (that is `passport.judge`).

    from passport.audit import compute_results, verify_run
    verify_run(Path("results/my-run"))          # [] when every figure is reproduced
"""

from passport.audit._canaries import CANARIES_FILE, CANARY_COUNT_NAMES, canary_counts, canary_figures
from passport.audit._counts import (
    ACCOUNTING_PREFIX,
    COUNT_NAMES,
    OUTCOME_CLASSES,
    count_outcomes,
    found_cap_full,
    offered_and_achieved_rates,
)
from passport.audit._declared import (
    DECLARED_FILE,
    SLO_METRICS,
    SLO_STATS,
    Declarations,
    DiscardRule,
    SloTarget,
    parse_discard_rule,
    parse_slo,
    read_declared,
    write_declared,
)
from passport.audit._derive import NO_CANARIES, Derived, RunState, derive
from passport.audit._door import TRUSTED_KEYS_ENV, OpenRun, Trust, open_run, seal_problems
from passport.audit._export import EXPORT_TABLES, export_table
from passport.audit._files import (
    PROBES_FILE,
    RAW_FILES,
    REPORT_FILES,
    SPEC_FILE,
    RunFiles,
    RunSource,
    TamperedFileError,
    canonical_json,
    content_sha256,
    file_entries,
    sha256_bytes,
    sha256_file,
)
from passport.audit._headroom import CALIBRATION_FILE, ceiling_requests_per_s
from passport.audit._metrics import (
    METRICS,
    PERCENTILES,
    REQUEST_LATENCY_IDS,
    SUCCESS_OUTCOMES,
    MetricDef,
    MetricKind,
    empty_stat,
    itl_gaps_by_request,
    numeric_column,
    object_column,
    request_latencies,
    stat,
)
from passport.audit._peer_files import aiperf_export, guidellm_report
from passport.audit._results import compute_results, per_request_samples, read_run, tokens_per_s_per_user
from passport.audit._run_data import RunData
from passport.audit._server_stats import server_summary
from passport.audit._signature import (
    KEY_DIR_ENV,
    KEY_ENV,
    check_signing_key,
    key_fingerprint,
    sign_content,
    signature_problem,
    signing_fingerprint,
)
from passport.audit._slo import requests_meeting
from passport.audit._types import (
    CanaryFigures,
    Distribution,
    HeadroomFigures,
    PacerFigures,
    ResultsFigures,
    RuleFigures,
    StatFigures,
    ValidityLimits,
    Verdict,
)
from passport.audit._units import parse_duration_s, parse_fraction
from passport.audit._validity import SATURATED_PREFIX, RunFacts, evaluate, verdict_of
from passport.audit._verify import diff_values, read_passport_json, verify_run
from passport.audit._versions import (
    DERIVED_VALIDITY_SINCE,
    RULES_KEY,
    RULES_VERSION,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
)
from passport.audit._views import TOOLS, ToolFigure, ToolTotal, ToolView, inverse_cdf, tool_view

__all__ = [
    "SATURATED_PREFIX",
    "COUNT_NAMES",
    "ACCOUNTING_PREFIX",
    "DERIVED_VALIDITY_SINCE",
    "RULES_KEY",
    "RULES_VERSION",
    "Derived",
    "OUTCOME_CLASSES",
    "REPORT_FILES",
    "RunState",
    "canonical_json",
    "content_sha256",
    "derive",
    "CANARIES_FILE",
    "CANARY_COUNT_NAMES",
    "canary_counts",
    "canary_figures",
    "DECLARED_FILE",
    "CALIBRATION_FILE",
    "ceiling_requests_per_s",
    "METRICS",
    "PERCENTILES",
    "RAW_FILES",
    "PROBES_FILE",
    "SPEC_FILE",
    "REQUEST_LATENCY_IDS",
    "SCHEMA_VERSION",
    "SLO_METRICS",
    "SLO_STATS",
    "SUCCESS_OUTCOMES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "CanaryFigures",
    "Declarations",
    "Distribution",
    "HeadroomFigures",
    "PacerFigures",
    "DiscardRule",
    "MetricDef",
    "MetricKind",
    "ResultsFigures",
    "RuleFigures",
    "RunFacts",
    "SloTarget",
    "StatFigures",
    "ValidityLimits",
    "Verdict",
    "compute_results",
    "read_run",
    "guidellm_report",
    "inverse_cdf",
    "aiperf_export",
    "RunData",
    "count_outcomes",
    "diff_values",
    "evaluate",
    "found_cap_full",
    "NO_CANARIES",
    "file_entries",
    "itl_gaps_by_request",
    "RunFiles",
    "RunSource",
    "TamperedFileError",
    "open_run",
    "OpenRun",
    "Trust",
    "TRUSTED_KEYS_ENV",
    "seal_problems",
    "EXPORT_TABLES",
    "export_table",
    "TOOLS",
    "ToolFigure",
    "ToolTotal",
    "ToolView",
    "tool_view",
    "tokens_per_s_per_user",
    "numeric_column",
    "object_column",
    "offered_and_achieved_rates",
    "parse_discard_rule",
    "parse_duration_s",
    "parse_fraction",
    "parse_slo",
    "per_request_samples",
    "read_declared",
    "read_passport_json",
    "request_latencies",
    "requests_meeting",
    "server_summary",
    "sha256_bytes",
    "sha256_file",
    "stat",
    "empty_stat",
    "verdict_of",
    "verify_run",
    "KEY_ENV",
    "KEY_DIR_ENV",
    "key_fingerprint",
    "sign_content",
    "check_signing_key",
    "signing_fingerprint",
    "signature_problem",
    "write_declared",
]
