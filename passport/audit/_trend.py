"""A least-squares slope with its 95 % Student interval, pooled within groups: what the pace of
completions against the schedule (`_counts.achieved_pace`) and the saturation watch
(`passport.run._saturation`) read a trend from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from passport.audit._student import t_critical_95

__all__ = ["Slope", "slope", "RunningSlope"]


@dataclass(frozen=True)
class Slope:
    """A slope (y units per x unit) and its 95 % interval over `n` points."""

    value: float
    low: float
    high: float
    n: int


def slope(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> Slope | None:
    """The slope of y on x, each group (xs[i], ys[i]) centred on its own means so that groups on
    different offsets (repetitions) pool, with the interval from the residuals on n - groups - 1
    degrees of freedom. None without three points in some group, without spread in x, or without
    a degree of freedom left."""
    kept = [(x - x.mean(), y - y.mean()) for x, y in zip(xs, ys, strict=True) if len(x) >= 3]
    if not kept:
        return None
    x = np.concatenate([k[0] for k in kept])
    y = np.concatenate([k[1] for k in kept])
    sxx = float(x @ x)
    dof = len(x) - len(kept) - 1
    if sxx <= 0 or dof < 1:
        return None
    value = float(x @ y) / sxx
    residual = y - value * x
    return _with_interval(value, float(residual @ residual), sxx, dof, len(x))


def _with_interval(value: float, rss: float, sxx: float, dof: int, n: int) -> Slope:
    half = t_critical_95(dof) * float(np.sqrt(max(rss, 0.0) / dof / sxx))
    return Slope(value, value - half, value + half, n)


class RunningSlope:
    """`slope` of one group kept point by point in constant time and memory (Welford's updates of
    the means and the centred sums of squares and products, stable over long windows), for a
    watch that looks at a growing window every quarter second."""

    def __init__(self) -> None:
        self.n = 0
        self._mx = self._my = self._sxx = self._sxy = self._syy = 0.0

    def add(self, x: float, y: float) -> None:
        self.n += 1
        dx = x - self._mx
        self._mx += dx / self.n
        dy = y - self._my
        self._my += dy / self.n
        self._sxx += dx * (x - self._mx)
        self._sxy += dx * (y - self._my)
        self._syy += dy * (y - self._my)

    def slope(self) -> Slope | None:
        """The slope so far with its 95 % interval; None as `slope` gives it."""
        dof = self.n - 2
        if self.n < 3 or self._sxx <= 0 or dof < 1:
            return None
        value = self._sxy / self._sxx
        return _with_interval(value, self._syy - self._sxy * value, self._sxx, dof, self.n)
