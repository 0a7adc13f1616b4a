"""`passport gate`: declared conditions evaluated against a passport, for release managers.

A condition is `<name> <op> <value>`, with `op` one of `< <= > >= == !=`:
- `<metric id>.<stat>`: a success-only figure, e.g. `ttft.any.p99 < 2s`, `itl.chunk.p50 <= 50ms`,
  `throughput.output_tokens_per_s.mean >= 20`; stats: n, mean, std, min, max, p50, p90, p95, p99,
  p99_9. `failure_inclusive.<metric id>.<stat>` reads the failure-inclusive figure.
- `error_rate`: failed / measured requests, e.g. `error_rate < 0.5%`.
- `verdict` (VALID, INVALID, HOLD, INCOMPLETE), `canaries` (pass, fail, not_run) and `slo` (met,
  not_met; a run that declared no SLO has no value, so the condition fails).
- `outcomes.<class>` and `counts.<name>`: counts of measured requests, e.g. `outcomes.timeout == 0`.

Values: latencies take durations (`2s`, `200ms`, `150us`; a bare number is seconds), rates and
counts take numbers, `error_rate` takes a fraction or a percentage. An unknown name or a value
of the wrong kind is a GateError (a usage error); a figure the passport does not have (null) is
a FAIL, never a pass.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from passport._errors import PassportError
from passport.audit import METRICS, PERCENTILES, parse_duration_s, parse_fraction
from passport.model import Passport

__all__ = ["GateError", "Condition", "ConditionResult", "parse_condition", "evaluate_gate", "load_gate_file"]

_STATS = ("n", "mean", "std", "min", "max", *PERCENTILES)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|==|!=|<|>)\s*(\S.*?)\s*$")
_CANARY_WORDS = {"pass": "passed", "passed": "passed", "fail": "failed", "failed": "failed", "not_run": "not_run"}


class GateError(PassportError):
    """A gate condition cannot be understood (unknown name, bad operator or value)."""


@dataclass(frozen=True)
class Condition:
    """One parsed condition; `kind` is latency, number, fraction, verdict, canaries or slo."""

    text: str
    name: str
    op: str
    value: Any
    kind: str


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    passed: bool
    measured: Any
    message: str


def _kind_of(name: str) -> str:
    if name == "error_rate":
        return "fraction"
    if name in ("verdict", "canaries", "slo"):
        return name
    parts = name.split(".")
    if parts[0] in ("outcomes", "counts") and len(parts) == 2:
        return "number"
    if parts[0] == "failure_inclusive":
        parts = parts[1:]
    metric_id, stat = ".".join(parts[:-1]), parts[-1]
    if metric_id not in METRICS or stat not in _STATS:
        known = ", ".join(sorted(METRICS))
        raise GateError(
            f"unknown gate name {name!r}: use <metric id>.<stat> (metric ids: {known}; stats: {', '.join(_STATS)}), "
            "failure_inclusive.<metric id>.<stat>, error_rate, verdict, canaries, slo, outcomes.<class> or "
            "counts.<name>"
        )
    if stat != "n" and METRICS[metric_id].unit == "s":
        return "latency"
    return "number"


def parse_condition(text: str) -> Condition:
    """Parse `<name> <op> <value>`; raises GateError naming what is wrong."""
    match = _CONDITION.match(text)
    if not match:
        raise GateError(f"cannot read gate condition {text!r}: write <name> <op> <value>, e.g. 'ttft.any.p99 < 2s'")
    name, op, raw = match.groups()
    kind = _kind_of(name)
    value: Any
    try:
        if kind == "latency":
            value = parse_duration_s(raw)
        elif kind == "fraction":
            value = parse_fraction(raw)
        elif kind == "number":
            value = float(raw)
        elif kind == "verdict":
            value = raw.upper()
            if value not in ("VALID", "INVALID", "HOLD", "INCOMPLETE"):
                raise ValueError(raw)
        elif kind == "slo":
            value = raw.lower()
            if value not in ("met", "not_met"):
                raise ValueError(raw)
        else:
            value = _CANARY_WORDS[raw.lower()]
    except (ValueError, KeyError) as exc:
        raise GateError(f"gate condition {text!r}: {raw!r} is not a valid value for {name} ({kind})") from exc
    if kind in ("verdict", "canaries", "slo") and op not in ("==", "!="):
        raise GateError(f"gate condition {text!r}: {name} can only be compared with == or !=")
    return Condition(text.strip(), name, op, value, kind)


def _measured(passport: Passport, condition: Condition) -> Any:
    name = condition.name
    if name == "verdict":
        return passport.verdict
    if name == "canaries":
        return passport.validity.canaries.status
    if name == "slo":
        slo = passport.results.slo
        return None if slo is None else ("met" if slo.met else "not_met")
    counts = passport.validity.counts
    if name == "error_rate":
        measured, succeeded = counts.get("measured"), counts.get("succeeded")
        return None if not measured or succeeded is None else (measured - succeeded) / measured
    head, _, rest = name.partition(".")
    if head == "outcomes":
        return passport.results.outcomes.get(rest, 0)
    if head == "counts":
        if rest not in counts:
            raise GateError(f"unknown count {rest!r}; this passport has: {', '.join(counts)}")
        return counts[rest]
    table = passport.results.metrics
    if head == "failure_inclusive":
        table, name = passport.results.metrics_failure_inclusive, rest
    metric_id, _, stat = name.rpartition(".")
    entry = table.get(metric_id)
    return None if entry is None else getattr(entry, stat)


def _show(kind: str, value: Any) -> str:
    if value is None:
        return "no value"
    if kind == "latency":
        return f"{value * 1000:.3f} ms" if value < 1 else f"{value:.3f} s"
    if kind == "fraction":
        return f"{value * 100:.3f} %"
    if kind == "number":
        return f"{value:g}"
    return str(value)


def evaluate_gate(passport: Passport, conditions: list[Condition]) -> list[ConditionResult]:
    """Evaluate each condition; a missing (null) figure fails."""
    results = []
    for condition in conditions:
        measured = _measured(passport, condition)
        if measured is None:
            results.append(ConditionResult(condition, False, None, "the passport has no value for it"))
            continue
        passed = bool(_OPS[condition.op](measured, condition.value))
        results.append(ConditionResult(condition, passed, measured, f"measured {_show(condition.kind, measured)}"))
    return results


def load_gate_file(path: Path) -> list[str]:
    """A YAML gate file: `require: [<condition>, ...]`."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise GateError(f"cannot read gate file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise GateError(f"gate file {path} is not valid YAML: {exc}") from exc
    require = data.get("require") if isinstance(data, dict) else None
    if not isinstance(require, list) or not all(isinstance(c, str) for c in require) or not require:
        raise GateError(f"gate file {path} must hold `require:` with a list of conditions, e.g. - ttft.any.p99 < 2s")
    return list(require)
