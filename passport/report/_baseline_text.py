"""A gate condition against a baseline, in one line: both values, the regression (the relative
change in the worse direction: negative is better) with its interval and Holm-adjusted p, and
why the verdict is what it is."""

from __future__ import annotations

from passport.judge._baseline import BaselineResult

__all__ = ["baseline_line", "baseline_value"]


def baseline_value(value: float | None, unit: str) -> str:
    """A figure as the gate prints it: a latency in ms (s from 1 s), a rate per second."""
    if value is None:
        return "no value"
    if unit == "cases":
        return f"{value:.0f} cases"
    if unit == "s":
        return f"{value * 1000:.3f} ms" if value < 1 else f"{value:.3f} s"
    return f"{value:.4g}/s"


def _percent(value: float) -> str:
    return f"{value * 100:+.1f}%"


def baseline_line(r: BaselineResult) -> str:
    """What the gate prints after a baseline condition's verdict."""
    if r.change is None:
        return r.message
    parts = [f"baseline {baseline_value(r.baseline, r.unit)}, now {baseline_value(r.current, r.unit)}, "
             f"regression {_percent(r.change)}"]
    if r.interval is not None and r.level is not None:
        parts.append(f" [{_percent(r.interval[0])}, {_percent(r.interval[1])}] at {r.level:.1%}")
    if r.p is not None:
        parts.append(f", Holm p {'<0.0001' if r.p < 1e-4 else f'{r.p:.4f}'}")
    return "".join(parts) + f": {r.message}"
