"""IS IT RIGHT: correctness canaries, run through the harness's transport before any timing.

A suite (YAML, `canaries/suites/` or a user's file) holds cases of seven kinds (exact output,
JSON schema, tool call, multi-turn recall, coding in a sandbox, long-context needles,
accounting); `run_suite` sends them one at a time with greedy decoding and judges each answer;
`write_results` keeps every case in canaries.parquet. `record_suite` rewrites a suite's exact
cases with the outputs of a trusted endpoint. See README "Canaries" for writing a suite.
"""

from canaries._checks import SPECIAL_TOKENS, Answer, Check, check
from canaries._record import record_suite
from canaries._run import (
    CANARIES_SCHEMA,
    GREEDY,
    CaseResult,
    long_context_prompt,
    run_case,
    run_suite,
    send_body,
    write_results,
)
from canaries._sandbox import (
    SandboxResult,
    SandboxUnavailable,
    extract_code,
    require_sandbox,
    run_python,
    sandbox_unavailable,
)
from canaries._sets import (
    FORMATS,
    GENERATED_SETS,
    AccuracyItem,
    AccuracySet,
    generate_set,
    load_accuracy_set,
    read_jsonl_set,
)
from canaries._suite import CASE_APIS, KINDS, SUITES_DIR, CanaryError, CaseSpec, Suite, bundled_suites, load_suite

__all__ = [
    "AccuracyItem",
    "AccuracySet",
    "FORMATS",
    "GENERATED_SETS",
    "generate_set",
    "load_accuracy_set",
    "read_jsonl_set",
    "send_body",
    "Answer",
    "CANARIES_SCHEMA",
    "CanaryError",
    "CaseResult",
    "CaseSpec",
    "Check",
    "GREEDY",
    "KINDS",
    "CASE_APIS",
    "SPECIAL_TOKENS",
    "SUITES_DIR",
    "SandboxResult",
    "Suite",
    "bundled_suites",
    "check",
    "extract_code",
    "load_suite",
    "long_context_prompt",
    "SandboxUnavailable",
    "require_sandbox",
    "sandbox_unavailable",
    "record_suite",
    "run_case",
    "run_python",
    "run_suite",
    "write_results",
]
