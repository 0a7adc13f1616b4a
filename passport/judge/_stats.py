"""The statistics behind `passport compare`, chosen so a verdict is fit for a decision.

- **Enough samples.** A percentile is compared only when each run has enough samples for a
  distribution-free 95 % interval of it (binomial order statistics): 6 for p50, 72 for p95,
  368 for p99 (`min_samples`). Below that the verdict says how many are needed, never a number.
- **Time blocks, so the machine's drift counts.** A run's requests are not independent draws: a
  busy engine slows its neighbours, and the machine itself drifts (another process takes a core,
  the CPU clocks down) for seconds at a time, so two runs of one spec differ by more than either
  run's sampling error (within-run bootstraps were overconfident: 9 of 20 A/A pairs were called on
  a quiet 2-core machine). Each run's window is cut into up to ten consecutive blocks in send
  order (`BLOCKS`, at least `MIN_PER_BLOCK` requests each) and the statistic is taken in every
  block. The run's variance is the batch-means variance (the spread of the block values over
  their number) plus a drift variance: how much more the block values spread than sampling within
  a block explains (each block's own sampling variance from resampling its requests). Without
  drift that term is zero and the test is as sharp as batch means; with drift, the next run may
  sit anywhere this run's blocks sat, and a difference smaller than that is not evidence.
  Throughput is a rate over time: its blocks are equal time slices (batch means; with 2+
  repetitions in each run, the repetitions).
- **Few blocks, honest tails.** The difference of two runs is tested with Welch's t on the
  blocks' degrees of freedom (Student's t, not the normal: ten blocks are few), two-sided.
- **Many metrics.** Each comparison's tests are corrected together with Holm's step-down method
  (family-wise error rate `alpha`, 5 % by default): a difference is called only when it survives.
- **A floor.** A level shift between runs that no block of either run shows cannot be measured
  from two runs; differences smaller than `min_effect` of the base value (10 % by default) are
  not called a change, and say so with their size ("under --min-effect 10% (slower by 5.0%,
  significant)", `passport.judge._compare`).

Limits: batch means assume the blocks are roughly independent of one another (blocks of ten or
more requests of a closed loop are); a p99 taken in blocks of a few dozen requests is close to
each block's maximum, so its spread, and the interval, is wide: conservative, never optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa

from passport.audit import numeric_column
from passport.audit._student import t_critical, t_two_sided_p

__all__ = ["min_samples", "slice_rates", "holm", "Test", "Estimate", "quantile_estimate", "pooled_quantile_estimate",
           "mean_estimate", "Difference", "difference", "t_two_sided_p", "t_critical", "BLOCKS", "MIN_PER_BLOCK"]

BLOCKS = 10  # time blocks per run, at most
MIN_PER_BLOCK = 6  # requests per block, at least (a block's median then has a distribution-free interval)
_RESAMPLES = 100  # bootstrap draws of a block's statistic, for its sampling variance alone
_CAP = 2_000  # requests per block resampled, at most (the variance scaled to the block's size)
_SEED = 0  # the same runs always give the same figures


@cache
def min_samples(q: float, level: float = 0.95) -> int:
    """The smallest n with a distribution-free `level` interval of quantile q (0 < q < 1): both
    tails of Binomial(n, q) beyond the sample's extremes hold at most (1 - level) / 2."""
    tail = (1.0 - level) / 2.0
    n = 1
    while q**n > tail or (1.0 - q) ** n > tail:
        n += 1
    return n


@dataclass(frozen=True)
class Estimate:
    """A run's statistic: its value over the whole window, its standard error and that error's
    degrees of freedom (blocks - 1)."""

    value: float
    se: float
    df: int


def _bounds(n: int) -> np.ndarray | None:
    """Edges of up to `BLOCKS` consecutive blocks of n items in send order; None below two."""
    blocks = min(BLOCKS, n // MIN_PER_BLOCK)
    return np.linspace(0, n, blocks + 1).astype(int) if blocks >= 2 else None


def _estimate(value: float, per_block: np.ndarray, within: np.ndarray) -> Estimate:
    """A run's estimate from its blocks: the batch-means variance (spread of the block values over
    their number) plus the drift variance, the spread of the block values beyond what sampling
    within a block explains (`within`: each block value's own sampling variance). Without drift
    the second term is zero; with it, the next run may sit anywhere this run's blocks sat."""
    blocks = len(per_block)
    spread = float(np.var(per_block, ddof=1))
    drift = max(0.0, spread - float(np.mean(within)))
    return Estimate(value, math.sqrt(spread / blocks + drift), blocks - 1)


def _rng() -> np.random.Generator:
    return np.random.default_rng(_SEED)


def quantile_estimate(values: np.ndarray, q: float) -> Estimate | None:
    """Quantile q of one value per request (in send order), its error from the quantile of each
    time block; None with fewer than two blocks' worth of requests."""
    bounds = _bounds(len(values))
    if bounds is None:
        return None
    rng = _rng()
    parts = [values[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    per_block = np.array([np.quantile(part, q) for part in parts])
    within = np.array([np.var(np.quantile(part[rng.integers(0, len(part), (_RESAMPLES, min(len(part), _CAP)))], q,
                                          axis=1), ddof=1) * min(len(part), _CAP) / len(part) for part in parts])
    return _estimate(float(np.quantile(values, q)), per_block, within)


def _pooled_within(groups: list[np.ndarray], q: float, rng: np.random.Generator) -> float:
    """Sampling variance of the pooled quantile of a block of whole requests, resampling them
    (past `_CAP` requests, of a sample of `_CAP`, scaled)."""
    taken = min(len(groups), _CAP)
    draws = [np.quantile(np.concatenate([groups[i] for i in rng.integers(0, len(groups), taken)]), q)
             for _ in range(_RESAMPLES)]
    return float(np.var(draws, ddof=1)) * taken / len(groups)


def pooled_quantile_estimate(groups: list[np.ndarray], q: float) -> Estimate | None:
    """Quantile q of the pooled values of requests (each a group, e.g. its chunk gaps, in send
    order), its error from the pooled quantile of each time block of whole requests; None with
    fewer than two blocks' worth of requests."""
    bounds = _bounds(len(groups))
    if bounds is None:
        return None
    rng = _rng()
    parts = [groups[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    per_block = np.array([np.quantile(np.concatenate(part), q) for part in parts])
    within = np.array([_pooled_within(part, q, rng) for part in parts])
    return _estimate(float(np.quantile(np.concatenate(groups), q)), per_block, within)


def mean_estimate(value: float, std: float, n: int) -> Estimate:
    """A mean over n blocks (time slices or repetitions) with their standard deviation."""
    return Estimate(value, std / math.sqrt(n), n - 1)


@dataclass(frozen=True)
class Difference:
    """other - base, its standard error, Welch's degrees of freedom and the two-sided p."""

    value: float
    se: float
    df: float
    p: float

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        half = t_critical(1.0 - level, self.df) * self.se
        return self.value - half, self.value + half


def difference(base: Estimate, other: Estimate) -> Difference:
    """Welch's t for other - base."""
    d = other.value - base.value
    var_b, var_o = base.se**2, other.se**2
    se = math.sqrt(var_b + var_o)
    if se == 0:
        return Difference(d, 0.0, math.inf, 0.0 if d != 0 else 1.0)
    denominator = (var_b**2 / base.df if var_b else 0.0) + (var_o**2 / other.df if var_o else 0.0)
    df = (var_b + var_o) ** 2 / denominator
    return Difference(d, se, df, t_two_sided_p(d / se, df))


def slice_rates(requests: pa.Table, measured: np.ndarray, ok: np.ndarray, meets: np.ndarray | None,
                slices: int) -> dict[str, np.ndarray]:
    """Output tokens/s and requests/s (and, with `meets`, goodput requests/s) in each of `slices`
    equal slices of the measurement window (first measured send to last measured end), by the end
    time of successful requests."""
    sent, end = numeric_column(requests, "sent_ns"), numeric_column(requests, "end_ns")
    tokens = np.nan_to_num(numeric_column(requests, "completion_tokens"))
    lo, hi = float(np.nanmin(sent[measured])), float(np.nanmax(end[measured]))
    edges = np.linspace(lo, hi, slices + 1)
    width_s = (hi - lo) / slices / 1e9

    def per_slice(rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        which = np.clip(np.searchsorted(edges, end[rows], side="right") - 1, 0, slices - 1)
        return np.bincount(which, None if weights is None else weights[rows], slices) / width_s

    rates = {"throughput.output_tokens_per_s": per_slice(ok, tokens), "throughput.requests_per_s": per_slice(ok)}
    if meets is not None:
        rates["goodput.requests_per_s"] = per_slice(meets)
    return rates


@dataclass
class Test:
    """One statistic's comparison: the p-value and, after `holm`, whether it survives, its
    Holm-adjusted p and the confidence level of an interval consistent with that verdict."""

    p: float
    significant: bool = False
    p_adjusted: float | None = None
    level: float | None = None


def holm(tests: list[Test], alpha: float) -> None:
    """Holm's step-down correction at family-wise error rate `alpha`. Sets on each test:
    `significant`; `p_adjusted` (significant exactly when it is <= alpha); and `level`, the
    confidence level whose interval excludes zero exactly when the test is significant: the test
    of rank i (0-based, smallest p first) was judged at alpha / (m - i), and every test after the
    first that failed at the level of that one (so the intervals and the verdicts never disagree)."""
    ordered = sorted(tests, key=lambda t: t.p)
    m = len(ordered)
    stopped: int | None = None
    running = 0.0
    for i, test in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * test.p))
        test.p_adjusted = running
        if stopped is None and test.p > alpha / (m - i):
            stopped = i
        test.significant = stopped is None
        test.level = 1.0 - alpha / (m - (i if stopped is None else stopped))
