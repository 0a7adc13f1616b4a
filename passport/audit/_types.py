"""The shapes of a passport's `results` and `validity`, as TypedDicts (JSON-shaped, no pydantic):
the one definition of each. `compute_results` returns a `ResultsFigures`, `evaluate_rules` a list
of `RuleFigures`: plain dicts that `verify` compares field by field with passport.json, and that
`passport.model.Passport` validates as they are (unknown keys refused) for the written passport.

A key marked NotRequired is one an older schema version did not write yet (its reader takes it
as null); the auditor always writes every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired

try:  # pydantic (which validates these in passport.model) needs typing_extensions' TypedDict before 3.12
    from typing_extensions import TypedDict
except ImportError:  # an auditor's environment without pydantic: the standard one serves
    from typing import TypedDict

__all__ = [
    "Scalar", "RuleStatus", "StatFigures", "WindowFigures", "PeakMemoryFigures", "ClientFigures", "HeadroomFigures",
    "PacerFigures", "HeadroomCalibration", "ServerFigures",
    "SloTargetFigures", "SloFigures", "CostRates", "WorkerFigures",
    "CostFigures", "DiscardedFigures", "NotEvaluable", "DiscardFigures", "CacheUsageFigures",
    "Distribution", "InputLengths", "OutputLengths", "LengthFigures", "TurnContext", "SessionFigures",
    "CheckFigures", "ShapeFigures", "TrafficFigures", "ResultsFigures", "RuleFigures", "Verdict", "CanaryStatus",
    "CanaryFailureFigures", "CanaryUnderLoadFigures", "AccuracyPhaseFigures", "AccuracyDropFigures",
    "AccuracyFigures", "CanaryFigures", "ValidityLimits", "FileFacts",
]

Scalar = bool | int | float | str | None
RuleStatus = Literal["PASS", "FAIL", "WARN", "SKIP"]


class StatFigures(TypedDict):
    """Summary of one metric. Latencies in seconds; rates carry n, mean, std, min and max, the
    rest null. Percentiles: linear interpolation between order statistics (numpy 'linear');
    `ci95`: distribution-free 95 % intervals of percentiles from binomial order statistics (null
    when n is too small). Failure-inclusive stats count each failed request as +infinity: a
    statistic that lands on a failure is null, `n_failed` says why."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None
    ci95: dict[str, list[float] | None] | None
    n_failed: int | None


class WindowFigures(TypedDict):
    """One repetition's measurement window on the run clock: first measured send to last end."""

    repetition: int
    start_ns: int | None
    end_ns: int | None
    duration_s: float | None
    measured_requests: int


class PeakMemoryFigures(TypedDict):
    value_bytes: int | None
    source: str | None
    reason: NotRequired[str | None]


class WorkerFigures(TypedDict):
    """One worker process of a run sent by several (load.workers)."""

    worker: int
    requests: int
    cpu_share_mean: float | None
    cpu_share_max: float | None
    loop_lag_p99_ms: float | None
    dispatch_lag_p99_ms: float | None


class HeadroomCalibration(TypedDict):
    """The client calibration a headroom was computed from (the run folder's calibration.json)."""

    cpu_us_per_request: float
    cpu_us_per_chunk: float
    fixed_cpu_share: float
    pacing_cpu_share: float
    measured_utc: str
    how: str


class HeadroomFigures(TypedDict):
    """What the run sent against what this client paces here (passport.audit._headroom)."""

    factor: float
    requests_per_s: float
    chunks_per_s: float
    chunks_per_request: float
    workers: int
    ceiling_requests_per_s: float
    predicted_cpu_share: float
    calibration: HeadroomCalibration


class PacerFigures(TypedDict):
    """The pacer thread's account of the timed phase, summed over workers (harness._pacer)."""

    sends_raw: int  # written by the thread at their deadline
    sends_via_loop: int  # handed to the event loop at their deadline (TLS: only its transport writes)
    withdrawn: int  # taken back before their deadline (the connection closed first)
    armed_late: int  # armed after their deadline had passed (the loop was behind)
    cpu_s: float
    cpu_us_per_send: float | None
    # the thread was the C helper's (harness/_pacer.c) in every worker, not a Python thread
    native: NotRequired[bool | None]
    realtime: NotRequired[bool | None]  # and ran under SCHED_FIFO (it preempts the loop on a shared core)


class ClientFigures(TypedDict):
    """This process's CPU share, loop lag and dispatch lag; `workers`: per worker process of a
    run sent by several (null: one); `headroom`: the run's load against the client's calibrated
    ceiling (null: no calibration.json); `pacer`: what the pacer thread did (null: no paced send,
    e.g. a closed loop)."""

    cpu_share_mean: float | None
    cpu_share_max: float | None
    loop_lag_p99_ms: float | None
    dispatch_lag_p99_ms: float | None
    workers: NotRequired[list[WorkerFigures] | None]
    headroom: NotRequired[HeadroomFigures | None]
    pacer: NotRequired[PacerFigures | None]


class ServerFigures(TypedDict):
    """Server-side series over the measurement windows (see passport.audit._server_stats)."""

    gauges: dict[str, dict[str, float]]
    counter_deltas: dict[str, float]
    prefix_cache_hit_rate: float | None
    gpu_memory_peak_bytes: int | None
    gpu_source: str | None
    gpu_utilization_mean_pct: float | None
    power_mean_w: float | None
    energy_j: float | None
    energy_reason: str | None
    scrape_failures: int


class SloTargetFigures(TypedDict):
    name: str
    bound_s: float
    measured_s: float | None  # the target's percentile over measured requests, failures as +inf
    met: bool


class SloFigures(TypedDict):
    """The declared SLO: each target, whether all were met, and the share of requests meeting all."""

    targets: list[SloTargetFigures]
    met: bool
    requests_meeting: int
    requests_measured: int
    attainment: float | None


class DiscardedFigures(TypedDict):
    repetition: int
    rule: str
    measured: Scalar
    message: str


class NotEvaluable(TypedDict):
    rule: str
    reason: str


class DiscardFigures(TypedDict):
    """Pre-registered discard rules, the repetitions they discarded, and those they could not judge."""

    rules: list[str]
    discarded: list[DiscardedFigures]
    not_evaluable: list[NotEvaluable]


class CacheUsageFigures(TypedDict):
    requests_reporting: int
    cached_tokens: int
    share_of_prompt_tokens: float | None


class Distribution(TypedDict):
    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float


class InputLengths(TypedDict):
    target: Distribution | None
    client: Distribution | None
    server: Distribution | None


class OutputLengths(TypedDict):
    target: Distribution | None
    realized: Distribution | None
    met_target_share: float | None


class LengthFigures(TypedDict):
    input_tokens: InputLengths
    output_tokens: OutputLengths
    reasoning_tokens: Distribution | None


class TurnContext(TypedDict):
    n: int
    p50: float
    max: float


class SessionFigures(TypedDict):
    started: int
    completed: int
    cut_short: int
    turns_sent: int
    turns_planned: int
    context_tokens_by_turn: dict[str, TurnContext]


class CheckFigures(TypedDict):
    requests: int
    checked: int
    passed: int
    pass_rate: float | None
    results: dict[str, int]


class ShapeFigures(TypedDict):
    requests: int
    outcomes: dict[str, int]
    ttft_p50_s: float | None
    e2e_p50_s: float | None


class TrafficFigures(TypedDict):
    lengths: LengthFigures
    sessions: SessionFigures | None
    checks: dict[str, CheckFigures] | None
    shapes: dict[str, ShapeFigures] | None


class CostRates(TypedDict):
    """What the window cost divided by the tokens of one class (each takes the whole cost, so the
    three do not add up): input, output, and input + output tokens."""

    usd_per_million_input_tokens: float | None
    usd_per_million_output_tokens: float | None
    usd_per_million_tokens: float | None


class CostFigures(TypedDict):
    """`cost:` of the spec applied to the measured window (see `passport.audit._cost`)."""

    basis: str
    input_usd_per_million: float | None
    output_usd_per_million: float | None
    gpu_hour_usd: float | None
    gpus: int | None
    usd_per_hour: float | None
    window_s: float
    input_tokens: int
    output_tokens: int
    usd_for_window: float
    throughput: CostRates
    goodput: CostRates | None  # counting only requests that met the SLO; null without one


class AccuracyPhaseFigures(TypedDict):
    """A set's items in one phase (alone, or under load): answered items, right ones, requests
    that failed (no answer, not counted as wrong), the share right with its Wilson 95 % interval."""

    n: int
    correct: int
    failed: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None


class AccuracyDropFigures(TypedDict):
    """Items answered alone and under load, paired: alone minus under load (a Student 95 %
    interval on the paired differences), items right alone and wrong under load (`worse`, the
    first ids in `changed`) and the reverse (`better`), and the one-sided exact sign test's p."""

    n_pairs: int
    worse: int
    better: int
    drop: float
    drop_low: float
    drop_high: float
    p_value: float
    changed: list[str]


class AccuracyFigures(TypedDict):
    """One accuracy set's results (`passport.audit._accuracy`): every answer re-scored from
    accuracy.parquet; `rescored_differ` counts rows whose stored verdict the re-scoring does not
    give (0 in a passport the run wrote)."""

    scorer: str
    set_sha256: str
    n_items: int
    alone: AccuracyPhaseFigures | None
    under_load: AccuracyPhaseFigures | None
    paired: AccuracyDropFigures | None
    rescored_differ: int


class ResultsFigures(TypedDict):
    """Every figure of a passport's `results`, as `compute_results` recomputes them. Schema 1.1
    added `slo`, `discard` and `server`; 1.2 the traffic figures (`lengths`: input tokens target /
    realized by our tokenizer / by the server, output tokens target / realized, reasoning tokens
    apart; `sessions`; `checks`: answers checked against their request's JSON Schema or tools;
    `shapes`: outcomes per shape) and `prefix_cache_usage` (cached prompt tokens as usage reported
    them); 1.4 `cost` (USD per million tokens at the declared prices)."""

    metrics: dict[str, StatFigures]
    metrics_failure_inclusive: dict[str, StatFigures]
    outcomes: dict[str, int]
    windows: list[WindowFigures]
    peak_memory: PeakMemoryFigures
    engine_restarts: int | None
    client: ClientFigures
    slo: NotRequired[SloFigures | None]
    discard: NotRequired[DiscardFigures | None]
    server: NotRequired[ServerFigures | None]
    prefix_cache_usage: NotRequired[CacheUsageFigures | None]
    lengths: NotRequired[LengthFigures | None]
    sessions: NotRequired[SessionFigures | None]
    checks: NotRequired[dict[str, CheckFigures] | None]
    shapes: NotRequired[dict[str, ShapeFigures] | None]
    cost: NotRequired[CostFigures | None]
    accuracy: NotRequired[dict[str, AccuracyFigures] | None]


Verdict = Literal["VALID", "INVALID", "HOLD", "INCOMPLETE", "SATURATED"]
CanaryStatus = Literal["passed", "failed", "not_run"]


class CanaryFailureFigures(TypedDict):
    """A failed canary case: what was expected and what the engine answered."""

    case_id: str
    kind: str
    category: str
    reason: str
    expected: str
    actual: str


class CanaryUnderLoadFigures(TypedDict):
    """Cases sampled during the timed run (canary_share), kept apart from the gate."""

    share: float
    n_cases: int
    n_failed: int
    failures: NotRequired[list[CanaryFailureFigures]]


class CanaryFigures(TypedDict):
    """The pre-timing canary gate as the passport records it (`validity.canaries`; every case is
    in canaries.parquet). Schema 1.1 added the suite's hash, version and counts, the failures and
    `forced`; 1.2 `largest_context_served_tokens` (the largest prompt a long-context case had
    answered) and `under_load`."""

    status: CanaryStatus
    suite: str
    reason: NotRequired[str | None]
    suite_sha256: NotRequired[str | None]
    suite_version: NotRequired[int | None]
    n_cases: NotRequired[int | None]
    n_failed: NotRequired[int | None]
    forced: NotRequired[bool]
    failures: NotRequired[list[CanaryFailureFigures]]
    largest_context_served_tokens: NotRequired[int | None]
    under_load: NotRequired[CanaryUnderLoadFigures | None]


# The thresholds of the validity rules: the effective spec's `validity` section as the run wrote it
# (passport.model.ValiditySpec defines its fields, defaults and bounds; an older spec lacks the later ones).
ValidityLimits = Mapping[str, float]


class RuleFigures(TypedDict):
    """One validity rule: status, measured value against its threshold, and the remedy."""

    name: str
    status: RuleStatus
    measured: Scalar
    threshold: Scalar
    message: str
    recommendation: str | None


class FileFacts(TypedDict):
    """One file of the passport's `files` table (`rows`: a Parquet table's)."""

    sha256: str
    bytes: int
    rows: int | None
