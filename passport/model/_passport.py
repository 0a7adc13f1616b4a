"""The passport: four parts (identity, protocol, validity, results) plus file hashes.

`schema_version` history (readers refuse versions they do not know):
- "1.0" (2026-11): first version: identity as sourced fields; protocol with the spec verbatim
  and effective, workload/schedule hashes, metric definitions and clock; validity rules with
  PASS/FAIL/WARN/SKIP; results per metric id (seconds; per-second units for rates), success-only
  and failure-inclusive; sha256 of every raw file.
- "1.1" (2026-11): `protocol.declared` (declared.json: SLOs, discard rules and realized capacity,
  written before the first timed request); `results.slo` (targets, attainment) with
  `goodput.*` rates in `results.metrics`; `results.discard` (pre-registered discard rules and
  the repetitions they discarded); `validity.canaries` with the suite hash, case counts and each
  failed case's expected and actual output; `results.server` (KV-cache usage, queues, preemptions,
  prefix-cache hit rate, GPU memory/power/energy over the window) and `protocol.telemetry`.
  A 1.0 passport reads as 1.1 with these fields null.
- "1.2" (2026-11): traffic shapes. `protocol.workload` gains `entries`, `shapes`,
  `structured_output_form` and `tokenizer_check` (the server's /tokenize against ours);
  `results.lengths` (target vs realized input and output tokens, reasoning tokens apart),
  `results.sessions` (multi-turn: sessions started and completed, context per turn),
  `results.checks` (structured-output and tool-call answers validated per request) and
  `results.shapes` (outcomes per shape). Raw schema 2 adds the columns behind them. Older
  passports read with these fields null, and `verify` does not ask an older passport for them.
- "1.3" (2026-12): a passport that cannot be forged, mistyped or over-read. `content_sha256`
  over the passport's own canonical form (every field but itself); `files` also lists the
  reports (report.md, report.html, plots/*.png) and probes.jsonl (every control-plane response
  identity was read from); `validity.launched_engine`; canary failures are counted apart from
  the workload's (`canary_schema_failures`, `canary_tool_failures`); declared.json records the
  workload's `context_needed_tokens`. `verify` re-derives validity, counts, canaries and the
  verdict of a 1.3 passport; older ones it verifies as before (results, files, declarations).
- "1.4" (2026-12): `signature`: the content hash signed with ed25519 at the end of the run (the
  public key, its fingerprint, and whether the key was this machine's or a team's from the
  environment); the content hash leaves the signature out. A 1.3 passport reads with none.

The generated JSON Schema is committed at `passport/model/schema/passport.schema.json`
(`python -m passport.model` rewrites it; a test fails when it drifts).
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import is_typeddict

from passport.audit import _types
from passport.audit._types import CanaryFigures, FileFacts, ResultsFigures, RuleFigures, RuleStatus, Verdict
from passport.audit._versions import SCHEMA_VERSION, SUPPORTED_SCHEMA_VERSIONS

__all__ = [
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Source",
    "SourcedValue",
    "Override",
    "MetricDefinition",
    "WorkloadInfo",
    "ScheduleInfo",
    "HarnessInfo",
    "ClockInfo",
    "DeclaredInfo",
    "Protocol",
    "RuleStatus",
    "Validity",
    "Passport",
    "PassportDraft",
    "Signature",
    "Verdict",
]

Source = Literal["probed", "declared", "launcher", "client", "unknown"]
JSONValue = str | int | float | bool | None | list[Any] | dict[str, Any]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# `results`, `validity.canaries`, `validity.rules` and `files` are the auditor's own shapes
# (passport.audit._types), validated as they are: one definition each. Unknown keys are refused
# in them as in every model here.
for _shape in vars(_types).values():
    if is_typeddict(_shape):
        _shape.__pydantic_config__ = ConfigDict(extra="forbid")


class SourcedValue(_Model):
    """One identity fact and where it came from (`via`: the endpoint or spec field)."""

    value: JSONValue = None
    source: Source = "unknown"
    via: str | None = None


class Override(_Model):
    """A spec value replaced on the command line."""

    field: str
    value: JSONValue
    source: str


class MetricDefinition(_Model):
    """A metric id's versioned definition (from `passport.audit.METRICS`)."""

    version: int
    unit: str
    definition: str


class WorkloadInfo(_Model):
    sha256: str
    n_requests: int
    seed: int
    tokenizer: str
    tokenizer_sha256: str | None
    exact_lengths: bool
    note: str | None = None
    salt: str | None = Field(None, description="Shared-prefix marker sent before every prompt, outside the hash.")
    entries: int | None = Field(None, description="Schedulable entries: requests, or whole sessions for multi-turn.")
    shapes: dict[str, int] | None = Field(None, description="Requests of the set per shape (or mix component).")
    structured_output_form: str | None = Field(
        None, description="How JSON Schema constraints were sent to this engine (response_format or its own field).")
    tokenizer_check: dict[str, Any] | None = Field(
        None, description="The first prompts counted by the server's /tokenize against the harness's tokenizer.")


class ScheduleInfo(_Model):
    sha256: str
    pattern: str
    n_scheduled: int
    n_warmup: int
    window_s: float | None
    seed: int


class HarnessInfo(_Model):
    version: str
    git_revision: str | None
    git_dirty: bool | None
    python: str
    platform: str
    uvloop: bool
    raw_schema_version: int
    libraries: dict[str, str] = Field(default_factory=dict)


class ClockInfo(_Model):
    """All `*_ns` columns are ns since `t0`, on CLOCK_MONOTONIC (`time.perf_counter_ns`)."""

    clock: str
    t0_perf_counter_ns: int
    t0_utc: str


class DeclaredInfo(_Model):
    """declared.json: the effective spec and realized capacity, frozen before the first timed request."""

    file: str
    sha256: str
    written_utc: str | None
    context_tokens_per_sequence: int | None = None
    capacity_source: str | None = None


class Protocol(_Model):
    spec: dict[str, Any]
    effective: dict[str, Any]
    overrides: list[Override]
    workload: WorkloadInfo
    schedule: ScheduleInfo
    harness: HarnessInfo
    clock: ClockInfo
    seeds: dict[str, int | None]
    request_params: dict[str, Any] = Field(description="Body fields sent with every request.")
    max_tokens_is_target: bool
    prefix_cache: dict[str, Any]
    metric_definitions: dict[str, MetricDefinition]
    started_utc: str
    finished_utc: str | None
    declared: DeclaredInfo | None = None
    telemetry: dict[str, Any] | None = Field(None, description="Sources sampled, interval, and what was not.")
    workers: dict[str, Any] | None = Field(
        None, description="Processes that sent the load (load.workers): count, declared or calibrated, and the "
                          "calibration's figures; null: one process.")
    canary_suite: dict[str, Any] | None = Field(None, description="The suite run before timing: name, version, "
                                                                  "sha256, case ids and versions.")
    accuracy_sets: dict[str, Any] | None = Field(
        None, description="The accuracy sets scored (spec accuracy): each one's source, item count, scorers and "
                          "sha256, whether items ran alone, and the share under load.")


class Validity(_Model):
    verdict: Verdict
    complete: bool
    incomplete_reason: str | None = None
    forced: bool = False
    launched_engine: bool | None = Field(None, description="The harness launched the engine (null before 1.3).")
    recovered: str | None = Field(
        None, description="How `passport recover` wrote this passport after its run stopped before writing it (null "
                          "for a passport its run wrote).")
    canaries: CanaryFigures
    rules: list[RuleFigures]
    counts: dict[str, int | None]


class Signature(_Model):
    """The content hash signed at the end of the run (passport.audit._signature)."""

    algorithm: Literal["ed25519"]
    public_key: str = Field(description="base64 of the raw public key.")
    fingerprint: str = Field(description="sha256: and 32 hex digits of the raw public key's sha256.")
    key: Literal["local", "environment"] = Field(description="this machine's key, or PASSPORT_SIGNING_KEY's.")
    value: str = Field(description="base64 of the signature over content_sha256 (its hex, as UTF-8).")


class Passport(_Model):
    """A benchmark passport (see the module docstring for the version history)."""

    schema_version: str = SCHEMA_VERSION
    content_sha256: str | None = Field(
        None, description="sha256 of this passport's canonical JSON without this field and `signature` (null before "
                          "1.3).")
    signature: Signature | None = Field(None, description="The content hash signed (null before 1.4).")
    run_id: str
    name: str
    created_utc: str
    verdict: Verdict
    identity: dict[str, SourcedValue]
    protocol: Protocol
    validity: Validity
    results: ResultsFigures
    files: dict[str, FileFacts]

    def json_dict(self) -> dict[str, Any]:
        """The passport as the JSON it is written as (plain types, canonical key names)."""
        return dict(json.loads(self.model_dump_json()))

    def figure(self, metric: str, stat: str) -> float | None:
        """One statistic of one result metric (`ttft.any`, `p99`), None when absent."""
        found = self.results["metrics"].get(metric)
        value = cast(dict[str, Any], found).get(stat) if found is not None else None
        return None if value is None else float(value)

    def discarded_repetitions(self) -> list[int]:
        """The repetitions this passport's pre-registered rules discarded."""
        discard = self.results.get("discard")
        return [] if discard is None else [d["repetition"] for d in discard["discarded"]]


class TimingEnd(_Model):
    """How the timed phase ended, recorded in the draft the moment it did: a run that fails
    after it (signing, the reports) is recovered with its real verdict, not as INCOMPLETE."""

    complete: bool
    incomplete_reason: str | None
    finished_utc: str


class PassportDraft(_Model):
    """What a run knows before its timed phase, written to passport.draft.json so that a run
    killed on the way can still be turned into a passport (`passport recover`); rewritten with
    `timing_end` (and the protocol as timing left it) when the timed phase ends."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    name: str
    identity: dict[str, SourcedValue]
    protocol: Protocol
    forced: bool
    launched_engine: bool
    timing_end: TimingEnd | None = None

