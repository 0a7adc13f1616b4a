"""Reading durations and fractions as people write them in specs and conditions.

Pure functions with no dependencies, so the auditor's package and the spec and gate parsers use them alike.
"""

from __future__ import annotations

import re

__all__ = ["parse_duration_s", "parse_fraction"]

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|us|µs|m)?\s*$")


def parse_duration_s(value: str | float | int) -> float:
    """'2s', '200ms', '150us', '1m' or a number of seconds, in seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a duration; write e.g. 2s, 200ms or 0.5")
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "m": 60.0}[unit]


def parse_fraction(value: str | float | int) -> float:
    """'0.5%' or 0.005 as a fraction; raises ValueError for anything else."""
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip()
    return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
