"""`passport compare CAMPAIGN ARM ARM`: two arms of a campaign compared over their repetition
sets, on the variance between repetitions.

A single run's own error (time blocks of its window, `passport.judge._stats`) says how well one
run pinned its figures down; it cannot say how much the next launch, the next round or the
machine's next mood moves them. Two arms of a campaign each have several whole runs, in rounds
whose order rotates, so each headline statistic has one value per repetition: the comparison is
Welch's t over those values (the between-repetition variance, drift and launches included),
two-sided, Holm-corrected across the statistics, with differences under `min_effect` of the base
arm's mean not called. With fewer than two repetitions an arm has no between-repetition variance
and nothing is tested. Both arms come from one trusted campaign record, so the comparability
invariants already hold (the record's `not_comparable` status says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from passport._errors import PassportError
from passport.judge._compare import MetricComparison, difference_verdict, format_p, format_value
from passport.judge._stats import Difference, Test, difference, holm, mean_estimate
from passport.model import passport_of

if TYPE_CHECKING:
    from passport.judge._campaign import TrustedCampaign

__all__ = ["ARM_STATISTICS", "ArmComparison", "compare_arm_sets", "render_arm_comparison"]

# The headline statistics compared, (metric, stat).
ARM_STATISTICS = (("goodput.requests_per_s", "mean"), ("throughput.requests_per_s", "mean"),
                  ("throughput.output_tokens_per_s", "mean"), ("ttft.any", "p50"), ("ttft.any", "p99"),
                  ("tpot", "p50"), ("e2e", "p50"), ("e2e", "p99"))


@dataclass(frozen=True)
class ArmComparison:
    campaign: str
    base: str
    other: str
    n_base: int
    n_other: int
    alpha: float
    min_effect: float
    metrics: list[MetricComparison]


def _values(campaign: TrustedCampaign, arm: dict[str, Any]) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {key: [] for key in ARM_STATISTICS}
    for rep in arm["repetitions"]:
        if rep["run"] is None:
            continue
        passport = passport_of(campaign.runs[rep["run"]])
        for metric, stat in ARM_STATISTICS:
            value = passport.figure(metric, stat)
            if value is not None:
                out[metric, stat].append(value)
    return out


def compare_arm_sets(campaign: TrustedCampaign, base: str, other: str, alpha: float = 0.05,
                     min_effect: float = 0.10) -> ArmComparison:
    """Compare arm `other` with arm `base` of a trusted campaign."""
    record = campaign.record
    arms = {a["name"]: a for a in record["arms"]}
    for name in (base, other):
        if name not in arms:
            raise PassportError(f"the campaign has no arm named {name!r} (arms: {', '.join(arms)})")
    values = {name: _values(campaign, arms[name]) for name in (base, other)}
    tests: list[Test] = []
    pending: list[tuple[str, str, float | None, float | None, tuple[Test, Difference] | None]] = []
    for metric, stat in ARM_STATISTICS:
        a, b = values[base][metric, stat], values[other][metric, stat]
        mean_a = float(np.mean(a)) if a else None
        mean_b = float(np.mean(b)) if b else None
        tested = None
        if len(a) >= 2 and len(b) >= 2:
            found = difference(mean_estimate(float(np.mean(a)), float(np.std(a, ddof=1)), len(a)),
                               mean_estimate(float(np.mean(b)), float(np.std(b, ddof=1)), len(b)))
            tested = Test(found.p), found
            tests.append(tested[0])
        pending.append((metric, stat, mean_a, mean_b, tested))
    holm(tests, alpha)
    metrics = []
    for metric, stat, mean_a, mean_b, tested in pending:
        m = MetricComparison(metric, stat, mean_a, mean_b, None, "fewer than two repetitions in an arm: not tested")
        if tested is not None:
            test, found = tested
            assert test.level is not None
            m.level, m.ci = test.level, found.interval(test.level)
            m.verdict, m.p, m.p_raw = difference_verdict(m, test, min_effect), test.p_adjusted, test.p
        metrics.append(m)
    n = {name: sum(1 for r in arms[name]["repetitions"] if r["run"]) for name in (base, other)}
    return ArmComparison(str(record["name"]), base, other, n[base], n[other], alpha, min_effect, metrics)


def render_arm_comparison(c: ArmComparison) -> list[str]:
    """The comparison as terminal lines: the method in words, then one line per statistic."""
    lines = [f"campaign {c.campaign}: arm {c.other} ({c.n_other} repetitions) against arm {c.base} "
             f"({c.n_base} repetitions)",
             f"method: between-repetition variance: each statistic's value in each run, Welch's t over the runs "
             f"(what moves whole runs apart: drift, launches, order), Holm-corrected across {len(c.metrics)} "
             f"statistics at {c.alpha:g}; differences under {c.min_effect:.0%} of {c.base}'s mean are not called",
             f"{'statistic':<38} {c.base:>14} {c.other:>14} {'change':>8} {'p (Holm)':>9}  verdict"]
    for m in c.metrics:
        change = "—" if not m.base or m.other is None else f"{(m.other - m.base) / abs(m.base):+.1%}"
        lines.append(f"{m.metric + ' ' + m.stat:<38} {format_value(m.metric, m.base):>14} "
                     f"{format_value(m.metric, m.other):>14} {change:>8} {format_p(m.p):>9}  {m.verdict}")
    return lines
