"""The shapes of what the auditor's arithmetic returns, as TypedDicts (JSON-shaped, no pydantic).

`compute_results` returns a `ResultsFigures`, `evaluate_rules` a list of `RuleFigures`: plain
dicts that `verify` compares field by field with passport.json. `passport.model` validates the
same shapes with pydantic for the written passport; tests/unit/audit/test_types.py keeps each
TypedDict's keys equal to its model's fields. The traffic figures of schema 1.2 (`lengths`,
`sessions`, `checks`, `shapes`) are used by the model as they are.
"""

from __future__ import annotations

from typing import Literal, NotRequired

try:  # pydantic (which validates these in passport.model) needs typing_extensions' TypedDict before 3.12
    from typing_extensions import TypedDict
except ImportError:  # an auditor's environment without pydantic: the standard one serves
    from typing import TypedDict

__all__ = [
    "Scalar", "RuleStatus", "StatFigures", "WindowFigures", "PeakMemoryFigures", "ClientFigures", "ServerFigures",
    "SloTargetFigures", "SloFigures", "CostRates", "WorkerFigures",
    "CostFigures", "DiscardedFigures", "NotEvaluable", "DiscardFigures", "CacheUsageFigures",
    "Distribution", "InputLengths", "OutputLengths", "LengthFigures", "TurnContext", "SessionFigures",
    "CheckFigures", "ShapeFigures", "TrafficFigures", "ResultsFigures", "RuleFigures", "Verdict", "CanaryStatus",
    "CanaryFailureFigures", "CanaryUnderLoadFigures", "CanaryFigures", "ValidityLimits",
]

Scalar = bool | int | float | str | None
RuleStatus = Literal["PASS", "FAIL", "WARN", "SKIP"]


class StatFigures(TypedDict):
    """One metric's summary (latencies in seconds); rates carry n, mean, std, min, max only."""

    n: int
    mean: NotRequired[float | None]
    std: NotRequired[float | None]
    min: NotRequired[float | None]
    max: NotRequired[float | None]
    p50: NotRequired[float | None]
    p90: NotRequired[float | None]
    p95: NotRequired[float | None]
    p99: NotRequired[float | None]
    p99_9: NotRequired[float | None]
    ci95: NotRequired[dict[str, list[float] | None] | None]
    n_failed: NotRequired[int | None]


class WindowFigures(TypedDict):
    repetition: int
    start_ns: int | None
    end_ns: int | None
    duration_s: float | None
    measured_requests: int


class PeakMemoryFigures(TypedDict):
    value_bytes: int | None
    source: str | None
    reason: str | None


class WorkerFigures(TypedDict):
    """One worker process of a run sent by several (load.workers)."""

    worker: int
    requests: int
    cpu_share_mean: float | None
    cpu_share_max: float | None
    loop_lag_p99_ms: float | None
    dispatch_lag_p99_ms: float | None


class ClientFigures(TypedDict):
    cpu_share_mean: float | None
    cpu_share_max: float | None
    loop_lag_p99_ms: float | None
    dispatch_lag_p99_ms: float | None
    workers: NotRequired[list[WorkerFigures] | None]


class ServerFigures(TypedDict):
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
    measured_s: float | None
    met: bool


class SloFigures(TypedDict):
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
    goodput: CostRates | None


class ResultsFigures(TrafficFigures):
    """Every figure of a passport's `results`, as `compute_results` recomputes them."""

    metrics: dict[str, StatFigures]
    metrics_failure_inclusive: dict[str, StatFigures]
    outcomes: dict[str, int]
    windows: list[WindowFigures]
    peak_memory: PeakMemoryFigures
    engine_restarts: int | None
    client: ClientFigures
    server: ServerFigures | None
    prefix_cache_usage: CacheUsageFigures | None
    slo: SloFigures | None
    discard: DiscardFigures | None
    cost: CostFigures | None


Verdict = Literal["VALID", "INVALID", "HOLD", "INCOMPLETE"]
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
    share: float
    n_cases: int
    n_failed: int
    failures: list[CanaryFailureFigures]


class CanaryFigures(TypedDict):
    """The pre-timing canary gate as the passport records it (`validity.canaries`)."""

    status: CanaryStatus
    suite: str
    reason: str | None
    suite_sha256: str | None
    suite_version: int | None
    n_cases: int | None
    n_failed: int | None
    forced: bool
    failures: list[CanaryFailureFigures]
    largest_context_served_tokens: int | None
    under_load: CanaryUnderLoadFigures | None


class ValidityLimits(TypedDict):
    """Thresholds of the validity rules, as the effective spec's `validity` section declares them."""

    max_error_rate: float
    min_completed_requests: int
    max_dispatch_lag_p99_ms: float
    max_client_cpu_share: float
    max_loop_lag_p99_ms: float
    min_achieved_rate_fraction: float
    max_lag_share: NotRequired[float]
    lag_floor_ms: NotRequired[float]
    lag_ceiling_ms: NotRequired[float]


class RuleFigures(TypedDict):
    """One validity rule: status, measured value against its threshold, and the remedy."""

    name: str
    status: RuleStatus
    measured: Scalar
    threshold: Scalar
    message: str
    recommendation: str | None
