"""A least-squares slope with its 95 % Student interval, pooled within groups: what the pace of
completions against the schedule (`_counts.achieved_pace`) and the saturation watch
(`passport.run._saturation`) read a trend from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from passport.audit._student import t_critical_95

__all__ = ["Slope", "slope"]


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
    half = t_critical_95(dof) * float(np.sqrt(residual @ residual / dof / sxx))
    return Slope(value, value - half, value + half, len(x))
