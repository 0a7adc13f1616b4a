"""The statistics behind `passport compare`, chosen so a verdict is fit for a decision.

- **Enough samples.** A percentile is compared only when each run has enough samples for a
  distribution-free 95 % interval of it (binomial order statistics): 6 for p50, 72 for p95,
  368 for p99 (`min_samples`). Below that the verdict says how many are needed, never a number.
- **Correlated samples.** Requests of one run are not independent (a busy engine slows its
  neighbours): the bootstrap resamples moving blocks of consecutive requests in send order
  (block length about n^(1/3)); `itl.chunk` resamples whole requests, whose gaps stay together.
- **Single repetitions.** Throughput is a rate over time: each run's window is cut into equal time
  slices and the slices are resampled (with 2+ repetitions in each run, the repetitions are used).
- **Many metrics.** Each comparison's tests are corrected together with Holm's step-down method
  (family-wise error rate `alpha`, 5 % by default): a difference is called only when it survives.
- **Run-to-run variance.** One run cannot measure how much another run would differ: two runs of
  one simulator spec differed by up to 7.5 % in TTFT p50 here, 1.7x what each run's bootstrap
  allows (benchmarks/compare_aa.py). Differences smaller than `min_effect` of the base value (10 %
  by default) are reported as no meaningful difference.

p-values are two-sided, from the bootstrap standard error of the difference (normal
approximation); the interval shown is the bootstrap's 2.5-97.5 % range of the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa

from passport.audit import numeric_column

__all__ = ["min_samples", "block_length", "bootstrap_quantile", "bootstrap_pooled_quantile", "slice_rates",
           "bootstrap_mean", "holm", "Test", "two_sided_p"]

# Bootstrap draws per statistic; chunked so memory stays near 50 MB whatever the run size.
_CHUNK_ELEMENTS = 5_000_000


@cache
def min_samples(q: float, level: float = 0.95) -> int:
    """The smallest n with a distribution-free `level` interval of quantile q (0 < q < 1): both
    tails of Binomial(n, q) beyond the sample's extremes hold at most (1 - level) / 2."""
    tail = (1.0 - level) / 2.0
    n = 1
    while q**n > tail or (1.0 - q) ** n > tail:
        n += 1
    return n


def block_length(n: int) -> int:
    """Moving-block length for n consecutive samples: about n^(1/3)."""
    return max(1, int(round(n ** (1.0 / 3.0))))


def _block_indices(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`draws` rows of n indices, each row moving blocks of consecutive positions."""
    length = block_length(n)
    blocks = -(-n // length)
    starts = rng.integers(0, n - length + 1, size=(draws, blocks))
    return (starts[:, :, None] + np.arange(length)).reshape(draws, -1)[:, :n]


def _scaled(draws: np.ndarray, centre: np.ndarray, taken: int, total: int) -> np.ndarray:
    """Draws of a statistic of `taken` of `total` samples, re-centred and scaled to the spread
    of the whole (the spread of a quantile falls as 1/sqrt(n))."""
    if taken >= total:
        return draws
    return np.asarray(centre + (draws - draws.mean(axis=0)) * np.sqrt(taken / total))


def bootstrap_quantile(values: np.ndarray, qs: tuple[float, ...], draws: int, rng: np.random.Generator,
                       cap: int = 20_000) -> np.ndarray:
    """The quantiles `qs` (0..1) of `draws` moving-block resamples of `values` (in send order),
    shape (draws, len(qs)). Past `cap` samples, a random stretch of `cap` consecutive ones is
    resampled and the spread scaled to the whole (measured: 100,000 requests in about a second)."""
    n = len(values)
    start = int(rng.integers(0, n - cap + 1)) if n > cap else 0
    taken = values[start:start + cap] if n > cap else values
    out = np.empty((draws, len(qs)))
    step = max(1, _CHUNK_ELEMENTS // max(len(taken), 1))
    for lo in range(0, draws, step):
        hi = min(draws, lo + step)
        out[lo:hi] = np.quantile(taken[_block_indices(len(taken), hi - lo, rng)], qs, axis=1).T
    return _scaled(out, np.quantile(values, qs), len(taken), n)


def bootstrap_pooled_quantile(groups: list[np.ndarray], qs: tuple[float, ...], draws: int, rng: np.random.Generator,
                              cap: int = 100_000) -> np.ndarray:
    """The quantiles `qs` of the pooled values of `draws` moving-block resamples of whole groups
    (a request's gaps stay together), shape (draws, len(qs)); past `cap` values, a stretch of
    consecutive groups holding about `cap` is resampled and the spread scaled to the whole."""
    lengths = np.array([len(g) for g in groups])
    total = int(lengths.sum())
    take = len(groups) if total <= cap else max(2, int(len(groups) * cap / total))
    start = int(rng.integers(0, len(groups) - take + 1))
    chosen_groups = groups[start:start + take]
    sub_lengths = lengths[start:start + take]
    flat = np.concatenate(chosen_groups)
    offsets = np.concatenate([[0], np.cumsum(sub_lengths)[:-1]])
    out = np.empty((draws, len(qs)))
    for i in range(draws):
        chosen = _block_indices(take, 1, rng)[0]
        sizes = sub_lengths[chosen]
        ends = np.cumsum(sizes)
        within = np.arange(ends[-1]) - np.repeat(ends - sizes, sizes)
        out[i] = np.quantile(flat[np.repeat(offsets[chosen], sizes) + within], qs)
    return _scaled(out, np.quantile(np.concatenate(groups), qs), take, len(groups))


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


def bootstrap_mean(values: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """The mean of `draws` moving-block resamples of `values` (time slices in order)."""
    return np.asarray(values[_block_indices(len(values), draws, rng)].mean(axis=1))


def two_sided_p(difference: float, standard_error: float) -> float:
    """Two-sided p-value of a difference against zero, normal approximation."""
    if standard_error <= 0:
        return 0.0 if difference != 0 else 1.0
    return math.erfc(abs(difference) / standard_error / math.sqrt(2.0))


@dataclass
class Test:
    """One statistic's comparison: the p-value and, after `holm`, whether it survives."""

    p: float
    significant: bool = False


def holm(tests: list[Test], alpha: float) -> None:
    """Holm's step-down correction: sets `significant` on the tests that survive at family-wise
    error rate `alpha`."""
    ordered = sorted(tests, key=lambda t: t.p)
    m = len(ordered)
    for i, test in enumerate(ordered):
        if test.p > alpha / (m - i):
            break
        test.significant = True
