"""The achieved_rate rule of rules version 9: the pace completions kept with the schedule, read from
every request with its sampling interval, on hand-built windows whose answer is known."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from passport.audit import COUNT_NAMES, NO_CANARIES, RunFacts, evaluate, offered_and_achieved_rates
from passport.audit._counts import Pace, achieved_pace
from passport.audit._trend import RunningSlope, slope
from passport.audit._types import ResultsFigures, RuleFigures, ValidityLimits
from passport.model import ValiditySpec


def _window(intended_s: list[float] | np.ndarray, end_s: list[float] | np.ndarray,
            outcome: list[str] | None = None, repetition: list[int] | None = None) -> pa.Table:
    n = len(intended_s)
    return pa.table({
        "request_id": [f"r{i}" for i in range(n)],
        "phase": ["measure"] * n,
        "repetition": repetition or [0] * n,
        "outcome": outcome or ["ok"] * n,
        "intended_ns": (np.asarray(intended_s) * 1e9).astype(np.int64),
        "end_ns": (np.asarray(end_s) * 1e9).astype(np.int64),
    })


def test_a_server_that_keeps_up_reads_one_though_its_last_answer_is_slowest() -> None:
    # 30 arrivals 10 ms apart (100/s); every answer takes 200 ms but the last takes 300 ms
    intended = np.arange(30) * 0.010
    latency = np.full(30, 0.200)
    latency[-1] = 0.300
    table = _window(intended, intended + latency)
    offered, achieved = offered_and_achieved_rates(table)
    assert offered is not None and achieved is not None
    # rules version 8 read 0.744 (29 gaps over 0.39 s of completions): a false FAIL
    assert achieved / offered == pytest.approx(0.29 / 0.39)
    pace = achieved_pace(table)
    assert pace is not None
    # least squares over 30 points, one raised by 0.1 s at the last x: slope = 1 + 0.1 (x_n - x̄) / Sxx
    x = intended - intended.mean()
    assert pace.fraction == pytest.approx(1 / (1 + 0.1 * x[-1] / float(x @ x)))
    assert pace.low < pace.fraction < pace.high and pace.high > 0.9
    assert (pace.succeeded, pace.measured) == (30, 30)


def test_a_saturated_server_reads_its_service_rate_over_the_offered_rate() -> None:
    # offered 20/s, served one at a time at 12.5/s from the first arrival: completions 80 ms apart
    intended = np.arange(60) / 20.0
    end = 0.080 * (np.arange(60) + 1)
    pace = achieved_pace(_window(intended, end))
    assert pace is not None
    assert pace.fraction == pytest.approx(12.5 / 20.0)
    assert pace.high == pytest.approx(pace.fraction) and pace.low == pytest.approx(pace.fraction)  # no scatter


def test_failures_count_against_the_pace_and_repetitions_are_pooled_within_themselves() -> None:
    intended = np.arange(20) * 0.1
    end = intended + 0.5
    outcome = ["ok"] * 15 + ["http_error"] * 5
    pace = achieved_pace(_window(intended, end, outcome))
    assert pace is not None and pace.fraction == pytest.approx(15 / 20) and (pace.succeeded, pace.measured) == (15, 20)
    # two repetitions on clocks 1,000 s apart: each keeps pace; pooled without the offset between them
    both = _window(np.concatenate([intended, intended + 1000]), np.concatenate([end, end + 1000 + 7]),
                   repetition=[0] * 20 + [1] * 20)
    pace = achieved_pace(both)
    assert pace is not None and pace.fraction == pytest.approx(1.0)
    assert achieved_pace(_window([0.0, 0.1], [0.5, 0.6])) is None  # fewer than three: nothing to read


def _rule(pace: Pace | None, *, capped: bool = False) -> RuleFigures:
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": None, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None},
                                    "metrics": {"slot_wait": {"p50": 0.004, "p99": 0.020}}})
    limits = cast(ValidityLimits, ValiditySpec().model_dump())
    counts: dict[str, int | None] = {name: 0 for name in COUNT_NAMES}
    facts = RunFacts(complete=True, incomplete_reason=None, open_loop=True, launched_engine=False, git_dirty=False,
                     exact_lengths=True, canaries=NO_CANARIES, forced=False, offered_rate_per_s=100.0,
                     achieved_rate_per_s=60.0, declared_rate_per_s=100.0, pace=pace, pace_judged=True,
                     in_flight_cap=8 if capped else None, found_cap_full=(30, 100) if capped else None,
                     cap_is_load=True)
    return next(r for r in evaluate(results, counts, facts, limits) if r["name"] == "achieved_rate")


def test_the_rule_fails_only_when_the_whole_interval_lies_below_the_limit() -> None:
    passed = _rule(Pace(0.97, 0.85, 1.12, 30, 30))
    assert passed["status"] == "PASS" and passed["measured"] == 0.97
    assert passed["message"].startswith("achieved / offered = 0.970 [0.850, 1.120] (95 %): successful completions "
                                        "kept 0.970 of the schedule's pace, 97.000 req/s against 100.000 req/s")
    unclear = _rule(Pace(0.81, 0.67, 1.03, 30, 30))
    assert unclear["status"] == "WARN" and "this window cannot tell whether the server kept up" in unclear["message"]
    assert "load.measure; 30 now" in str(unclear["recommendation"])
    unbounded = _rule(Pace(0.5, 0.3, math.inf, 4, 4))
    assert unbounded["status"] == "WARN" and "[0.300, no upper bound]" in unbounded["message"]
    behind = _rule(Pace(0.64, 0.62, 0.67, 60, 60))
    assert behind["status"] == "FAIL" and "lower load.rate_per_s" in str(behind["recommendation"])
    capped = _rule(Pace(0.64, 0.62, 0.67, 60, 60), capped=True)
    assert capped["status"] == "WARN" and "in-flight cap" in capped["message"]


def test_a_window_too_short_for_a_pace_is_said_not_judged_by_the_old_spans() -> None:
    skipped = _rule(None)
    assert skipped["status"] == "SKIP" and "too few successful measured requests" in skipped["message"]


@given(st.lists(st.tuples(st.floats(0, 50), st.floats(-5, 5)), min_size=3, max_size=200), st.floats(0, 1e5))
def test_the_running_slope_is_the_batch_slope_far_from_the_origin(points: list[tuple[float, float]],
                                                                   offset: float) -> None:
    base = np.array([p[0] for p in points])
    assume(np.ptp(base) >= 1.0)  # a window's intended times span seconds; a spread of none is ill-posed either way
    x = base + offset
    y = 0.8 * x + np.array([p[1] for p in points])
    batch = slope([x], [y])
    running = RunningSlope()
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        running.add(a, b)
    kept = running.slope()
    assert batch is not None and kept is not None and kept.n == batch.n
    assert kept.value == pytest.approx(batch.value, rel=1e-6, abs=1e-6)
    # a perfect fit leaves a residual sum that is float noise either way (times t at one degree of freedom)
    assert kept.high - kept.value == pytest.approx(batch.high - batch.value, rel=1e-4, abs=1e-4)
