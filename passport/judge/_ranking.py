"""Ranking arms by repetitions: each arm's mean with a 95 % interval, pairwise tests corrected
together, rank groups, and a best arm only when one is separated from every other.

- **Interval.** An arm's objective is the mean of its repetitions (one value per run). Its 95 %
  interval is Student's t over the repetitions: mean +- t(0.975, n - 1) * sd / sqrt(n). The
  repetitions are whole runs, in rounds whose order rotates, so what varies between them (the
  machine's drift, a launch's luck, order effects) is what the interval carries; requests inside
  one run are not independent draws of that and are never used as the sample. With one
  repetition no interval exists and no arm is separated from any other.
- **Pairs.** Every two ranked arms are compared by Welch's t on their repetitions (no equal
  variances assumed; not paired by round: arms of one round still run minutes apart), two-sided,
  and all pairs are corrected together with Holm's step-down method (family-wise error rate
  `ALPHA`). Two arms are *separated* when the difference survives Holm and is at least
  `min_difference` of the better arm's value: a certain difference too small to act on is a tie.
- **Groups.** An arm's rank is 1 + the number of arms separated from it and better than it;
  arms sharing a rank form a group, and each arm lists the arms it is `tied_with` (not separated
  from it). `best` is the rank-1 arm only when it is alone there, which happens exactly when it is
  separated from every other ranked arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from passport.judge._stats import Test, difference, holm, mean_estimate, t_critical

__all__ = ["ALPHA", "Interval", "Pair", "Ranking", "interval_of", "rank_by_repetitions"]

ALPHA = 0.05  # family-wise error rate of the pairwise tests, and 1 - the intervals' level


@dataclass(frozen=True)
class Interval:
    """An arm's objective over its repetitions."""

    mean: float
    sd: float | None  # None with one repetition
    n: int
    low: float | None  # the 95 % t-interval; None with one repetition
    high: float | None


def interval_of(values: list[float]) -> Interval:
    """Mean, standard deviation and 95 % t-interval of an arm's repetition values."""
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return Interval(mean, None, n, None, None)
    sd = float(np.std(values, ddof=1))
    half = t_critical(ALPHA, n - 1) * sd / math.sqrt(n)
    return Interval(mean, sd, n, mean - half, mean + half)


@dataclass(frozen=True)
class Pair:
    """Two arms compared: a - b, how large against the better arm, the tests' p-values."""

    a: str
    b: str
    difference: float
    relative: float  # |a - b| / |the better arm's value|
    p: float | None  # None: too few repetitions to test
    p_holm: float | None
    significant: bool
    separated: bool
    why: str


@dataclass(frozen=True)
class Ranking:
    ranks: dict[str, int]
    tied_with: dict[str, list[str]]
    groups: list[list[str]]
    pairs: list[Pair]
    best: str | None
    tied_for_first: list[str]


def _pairs(values: dict[str, list[float]], higher: bool, min_difference: float) -> list[Pair]:
    names = list(values)
    stats = {n: interval_of(v) for n, v in values.items()}
    tests: dict[tuple[str, str], Test] = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if stats[a].n >= 2 and stats[b].n >= 2:
                ea = mean_estimate(stats[a].mean, stats[a].sd or 0.0, stats[a].n)
                eb = mean_estimate(stats[b].mean, stats[b].sd or 0.0, stats[b].n)
                tests[a, b] = Test(difference(eb, ea).p)  # a - b
    holm(list(tests.values()), ALPHA)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            d = stats[a].mean - stats[b].mean
            better = max(stats[a].mean, stats[b].mean) if higher else min(stats[a].mean, stats[b].mean)
            relative = abs(d) / max(abs(better), 1e-12)  # finite, so the record stays plain JSON
            test = tests.get((a, b))
            if test is None:
                out.append(Pair(a, b, d, relative, None, None, False, False,
                                "fewer than two repetitions: no test"))
                continue
            big = relative >= min_difference
            why = (f"separated: Holm-adjusted p {test.p_adjusted:.3g}, {relative:.1%} apart" if test.significant and big
                   else f"tied: the difference ({relative:.1%}) is under min_difference {min_difference:.0%}"
                   if test.significant else f"tied: Holm-adjusted p {test.p_adjusted:.3g} >= {ALPHA:g}")
            out.append(Pair(a, b, d, relative, test.p, test.p_adjusted, test.significant, test.significant and big,
                            why))
    return out


def rank_by_repetitions(values: dict[str, list[float]], higher: bool, min_difference: float) -> Ranking:
    """Rank arms (name -> repetition values, in the campaign's order) by the rules above."""
    pairs = _pairs(values, higher, min_difference)
    means = {n: float(np.mean(v)) for n, v in values.items()}
    separated = {(p.a, p.b) for p in pairs if p.separated} | {(p.b, p.a) for p in pairs if p.separated}

    def better(x: str, y: str) -> bool:
        return means[x] > means[y] if higher else means[x] < means[y]

    ranks = {n: 1 + sum(1 for m in values if m != n and (m, n) in separated and better(m, n)) for n in values}
    tied_with = {n: [m for m in values if m != n and (m, n) not in separated] for n in values}
    order = sorted(values, key=lambda n: (ranks[n], -means[n] if higher else means[n], n))
    groups: list[list[str]] = []
    for name in order:
        if groups and ranks[groups[-1][0]] == ranks[name]:
            groups[-1].append(name)
        else:
            groups.append([name])
    first = groups[0] if groups else []
    best = first[0] if len(first) == 1 and all(len(v) >= 2 for v in values.values()) else None
    return Ranking(ranks, tied_with, groups, pairs, best, [] if best else first)
