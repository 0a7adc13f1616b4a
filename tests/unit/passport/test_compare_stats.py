"""compare's statistics by hand and against scipy: Student's t, Welch's degrees of freedom, and
time blocks that widen a run's error when the machine drifts within it (issue 28)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from passport.judge._stats import (
    Difference,
    Estimate,
    difference,
    holm,
    mean_estimate,
    pooled_quantile_estimate,
    quantile_estimate,
    t_critical,
    t_two_sided_p,
)
from passport.judge._stats import (
    Test as HolmTest,
)


@pytest.mark.parametrize("df", [1, 2.5, 4, 9, 17.3, 120])
@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.2, 5.0, 40.0])
def test_students_t_matches_scipy(t: float, df: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-300)
    assert t_two_sided_p(-t, df) == t_two_sided_p(t, df)


@pytest.mark.parametrize("df", [1, 4, 9, 30])
def test_critical_t_matches_scipy(df: float) -> None:
    assert t_critical(0.05, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)


def test_welch_difference_matches_scipy_from_block_means() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 10), rng.normal(11, 3, 8)
    base = mean_estimate(float(a.mean()), float(a.std(ddof=1)), len(a))
    other = mean_estimate(float(b.mean()), float(b.std(ddof=1)), len(b))
    diff = difference(base, other)
    expected = stats.ttest_ind(b, a, equal_var=False)
    assert diff.value == pytest.approx(b.mean() - a.mean())
    assert diff.p == pytest.approx(expected.pvalue, rel=1e-9)
    assert diff.df == pytest.approx(expected.df, rel=1e-9)
    low, high = diff.interval()
    ci = expected.confidence_interval(0.95)
    assert (low, high) == (pytest.approx(ci.low, rel=1e-9), pytest.approx(ci.high, rel=1e-9))


def test_identical_constant_runs_differ_in_nothing_and_different_constants_certainly() -> None:
    same = Estimate(0.003, 0.0, 9)
    assert difference(same, same).p == 1.0
    assert difference(same, Estimate(0.004, 0.0, 9)).p == 0.0


def test_blocks_that_differ_beyond_sampling_count_as_drift_by_hand() -> None:
    # ten blocks of 20, each constant (no sampling spread within a block), levels 1..10 ms
    values = np.repeat(np.arange(1.0, 11.0), 20) / 1000
    est = quantile_estimate(values, 0.5)
    assert est is not None and est.df == 9
    spread = np.var(np.arange(1.0, 11.0) / 1000, ddof=1)  # every block's median is its level
    # batch means (spread / 10) plus the whole spread as drift: the next run may sit at any level
    assert est.se == pytest.approx(math.sqrt(spread / 10 + spread))
    assert est.value == pytest.approx(np.median(values))


def test_drift_within_a_run_widens_its_error_and_a_steady_run_keeps_batch_means() -> None:
    rng = np.random.default_rng(0)
    steady = rng.normal(3.0, 0.1, 200)
    drifting = steady * np.where(np.arange(200) < 100, 1.0, 1.1)  # the second half 10 % slower
    s, d = quantile_estimate(steady, 0.5), quantile_estimate(drifting, 0.5)
    assert s is not None and d is not None
    medians = [np.median(block) for block in np.split(steady, 10)]
    batch = np.std(medians, ddof=1) / math.sqrt(10)
    # steady: the blocks differ by sampling alone, so (nearly) no drift term is added
    assert batch <= s.se < 1.5 * batch
    assert d.se > 0.1 and d.se > 10 * s.se  # about the 0.3 ms the machine moved, not its sampling error


def test_pooled_blocks_keep_each_requests_gaps_together() -> None:
    groups = [np.full(3, float(i)) for i in range(12)]  # request i's gaps all equal i
    est = pooled_quantile_estimate(groups, 0.5)
    assert est is not None and est.df == 1  # 12 requests: two blocks of six
    assert est.value == pytest.approx(5.5)
    # block medians 2.5 and 8.5 (by hand); resampling whole requests within a block moves its median too
    spread = np.var([2.5, 8.5], ddof=1)
    assert math.sqrt(spread / 2) <= est.se <= math.sqrt(spread / 2 + spread)


def test_too_few_requests_for_two_blocks_give_no_estimate() -> None:
    assert quantile_estimate(np.arange(11.0), 0.5) is None
    assert pooled_quantile_estimate([np.ones(50)] * 11, 0.5) is None


def test_holm_adjusted_p_by_hand() -> None:
    # m = 4, alpha 0.05: sorted p 0.005, 0.01, 0.03, 0.04 meet 0.0125, 0.0167, then 0.03 > 0.025
    # stops; adjusted p = running max of (m - i) p: 0.02, 0.03, 0.06, max(0.06, 0.04)
    tests = [HolmTest(0.01), HolmTest(0.04), HolmTest(0.03), HolmTest(0.005)]
    holm(tests, 0.05)
    assert [t.significant for t in tests] == [True, False, False, True]
    assert [t.p_adjusted for t in tests] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [t.level for t in tests] == pytest.approx([1 - 0.05 / 3, 0.975, 0.975, 1 - 0.05 / 4])


@pytest.mark.parametrize("seed", range(20))
def test_holm_verdicts_p_and_intervals_never_disagree(seed: int) -> None:
    # The compare table's p column and interval are the ones its verdict is read from: a
    # significant difference has adjusted p <= alpha and an interval without zero, and only it
    rng = np.random.default_rng(seed)
    diffs = [Difference(float(d), 1.0, 12.0, t_two_sided_p(float(d), 12.0)) for d in rng.normal(0, 3, 12)]
    tests = [HolmTest(d.p) for d in diffs]
    holm(tests, 0.05)
    for d, t in zip(diffs, tests):
        assert t.level is not None and t.p_adjusted is not None
        low, high = d.interval(t.level)
        assert (t.p_adjusted <= 0.05) == t.significant == (low > 0 or high < 0), (d, t)


def test_the_fast_95_percent_t_quantile_is_scipys_at_every_degree_of_freedom() -> None:
    from passport.audit._student import t_critical_95

    worst = max(abs(t_critical_95(df) - stats.t.ppf(0.975, df)) for df in range(1, 3000))
    assert worst < 1e-6


@pytest.mark.parametrize(("interval", "significant", "other", "said"), [
    # base 30 ms, min effect 10 %: 3 ms either way
    ((-0.002, 0.0025), False, 0.0302, "no significant difference"),
    ((-0.003, 0.003), False, 0.030, "no significant difference"),  # exactly at the floor: still ruled out
    ((-0.0237, 0.0236), False, 0.030, "inconclusive (interval reaches -79.0%, beyond --min-effect 10%)"),
    ((-0.001, 0.0045), False, 0.0317, "inconclusive (interval reaches +15.0%, beyond --min-effect 10%)"),
    ((0.010, 0.019), True, 0.0445, "slower"),
    ((0.0005, 0.0015), True, 0.031, "under --min-effect 10% (slower by 3.3%, significant)"),
    ((-0.0237, 0.0236), False, None, "no significant difference"),  # a first value of 0: no relative reach to judge
])
def test_a_difference_not_called_is_the_same_only_when_its_interval_rules_out_the_minimum_effect(
        interval: tuple[float, float], significant: bool, other: float | None, said: str) -> None:
    from passport.judge._compare import MetricComparison, difference_verdict

    m = MetricComparison("ttft.any", "p50", 0.030 if other is not None else 0.0, other, interval, "")
    assert difference_verdict(m, HolmTest(0.5, significant=significant), 0.10) == said
