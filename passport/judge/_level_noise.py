"""A sweep level's figures with their noise, so a knee or a saturation point is called only where
the levels' differences stand out from it (the standard `compare` and `campaign` hold to).

- **Throughput.** The level's requests/s with its standard error: over its repetitions when the
  run has two or more (`load.repetitions`, each replaying the schedule), else over ten equal time
  slices of its window (batch means), exactly as `compare` estimates a rate
  (`_compare.rate_estimate`).
- **An SLO target** `<metric>.p<q> <= bound` holds when at least a share q of the measured
  requests is within the bound (failures count as outside it, as in the run's own figure). The
  share is estimated over up to ten time blocks in send order: its error is the larger of the
  batch-means error (the blocks' spread, which carries the machine's drift within the run; on
  the blocks' degrees of freedom) and the binomial error at the threshold, sqrt(q (1 - q) / n),
  the error independent requests would have (on the normal). The target is *met* when the
  share's 95 % interval lies wholly at or above q, *missed* when wholly below, and *unclear*
  otherwise. Limits: the binomial floor needs about 1.96^2 q / (1 - q) requests to call a target
  met even when every request is within it (35 for p90, 381 for p99: close to `compare`'s
  `min_samples`, 35 and 368); fewer than 12 measured requests give no blocks, so no drift is
  seen and the binomial error alone is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from passport.audit import RunData, numeric_column, read_run
from passport.judge._compare import rate_estimate, run_samples
from passport.judge._ranking import ALPHA
from passport.judge._stats import BLOCKS, MIN_PER_BLOCK, Estimate, t_critical
from passport.model import Passport

__all__ = ["TargetCall", "LevelNoise", "level_noise", "interval_95"]


@dataclass(frozen=True)
class TargetCall:
    """One SLO target at one level: the share of requests within its bound, that share's 95 %
    interval, the share the target needs, and the call (met, missed or unclear) with why."""

    name: str
    bound_s: float
    share: float | None
    share_low: float | None
    share_high: float | None
    needs: float
    call: str  # met | missed | unclear
    why: str


@dataclass(frozen=True)
class LevelNoise:
    """What `summarize_level` adds to a level from its raw tables."""

    throughput: Estimate | None
    throughput_basis: str  # "repetitions", "time slices", or why there is no estimate
    targets: tuple[TargetCall, ...]


def interval_95(value: float, se: float, df: float) -> tuple[float, float]:
    """value +- t(0.975, df) * se."""
    half = t_critical(ALPHA, df) * se
    return value - half, value + half


def _share_call(name: str, bound_s: float, q: float, within: np.ndarray, counted: np.ndarray) -> TargetCall:
    """The call for one target from each measured request's count of samples within the bound and
    of samples counted (in send order)."""
    total = float(counted.sum())
    if total == 0:
        return TargetCall(name, bound_s, None, None, None, q, "unclear", "no measured sample")
    share = float(within.sum()) / total
    blocks = min(BLOCKS, len(counted) // MIN_PER_BLOCK)
    floor = q * (1.0 - q) / total
    batch = 0.0
    if blocks >= 2:
        edges = np.linspace(0, len(counted), blocks + 1).astype(int)
        shares = np.array([within[lo:hi].sum() / max(counted[lo:hi].sum(), 1)
                           for lo, hi in zip(edges[:-1], edges[1:])])
        batch = float(np.var(shares, ddof=1)) / blocks
    # the blocks' spread, on their degrees of freedom; or, where it is smaller (or there are too
    # few requests for blocks), the binomial error of independent requests, on the normal
    low, high = interval_95(share, math.sqrt(batch), blocks - 1) if batch > floor else \
        interval_95(share, math.sqrt(floor), math.inf)
    low, high = max(low, 0.0), min(high, 1.0)
    said = f"{share:.1%} within {bound_s * 1000:g} ms (95% interval {low:.1%} to {high:.1%}); it needs {q:.1%}"
    call = "met" if low >= q else "missed" if high < q else "unclear"
    if call == "unclear":
        said += ": the interval holds both sides"
        needed = math.ceil(t_critical(ALPHA, math.inf) ** 2 * q / (1.0 - q)) if q < 1.0 else None
        if needed is not None and total < needed:
            said += (f"; {total:g} samples, and a p{q * 100:g} target needs at least {needed} even with every "
                     f"one within (raise load.measure)")
    return TargetCall(name, bound_s, share, low, high, q, call, said)


def _target_calls(data: RunData) -> tuple[TargetCall, ...]:
    if not data.declared.slo:
        return ()
    rows = np.flatnonzero(data.measured)
    rows = rows[np.argsort(numeric_column(data.requests, "sent_ns")[rows], kind="stable")]
    ok = data.success[rows]
    calls = []
    for t in data.declared.slo:
        q = t.percentile / 100.0
        within, counted = np.zeros(len(rows)), np.zeros(len(rows))
        if t.metric == "itl.chunk":
            for i, rid in enumerate(data.request_ids[rows].tolist()):
                gaps = data.gaps_by_request.get(int(rid)) if np.isfinite(rid) else None
                if ok[i] and gaps is not None and len(gaps):
                    within[i], counted[i] = float((gaps <= t.bound_s).sum()), float(len(gaps))
        else:
            values = data.latencies[t.metric][rows]
            finite = np.isfinite(values)
            with np.errstate(invalid="ignore"):
                within = (ok & finite & (values <= t.bound_s)).astype(float)
            counted = ((ok & finite) | ~ok).astype(float)
        counted[~ok] = 1.0  # a failure is one sample outside the bound, as in the run's own figure
        within[~ok] = 0.0
        calls.append(_share_call(t.name, t.bound_s, q, within, counted))
    return tuple(calls)


def level_noise(folder: Path, passport: Passport) -> LevelNoise:
    """The level's throughput estimate and its SLO targets' calls, from its run folder."""
    data = read_run(folder)
    samples = run_samples(data, passport)
    estimate = rate_estimate("throughput.requests_per_s", passport, samples, samples.by_repetition)
    basis = ("repetitions" if samples.by_repetition else "time slices") if estimate is not None else \
        "too few completed requests for time slices (10 needed)"
    return LevelNoise(estimate, basis, _target_calls(data))
