"""`passport gate`: declared conditions evaluated against a passport, for release managers.

A condition is `<name> <op> <value>`, with `op` one of `< <= > >= == !=`. Names (see
`_names.py`, which resolves each against the passport's schema and vocabulary before reading):
- `<metric id>.<stat>`: a success-only figure, e.g. `ttft.any.p99 < 2s`, `itl.chunk.p50 <= 50ms`,
  `throughput.output_tokens_per_s.mean >= 20`; stats: n, mean, std, min, max, p50, p90, p95, p99,
  p99_9. `failure_inclusive.<metric id>.<stat>` reads the failure-inclusive figure.
- `error_rate`: failed / measured requests, e.g. `error_rate < 0.5%`.
- `verdict` (VALID, INVALID, HOLD, INCOMPLETE, SATURATED), `canaries` (pass, fail, not_run) and `slo` (met,
  not_met; a run that declared no SLO has no value, so the condition fails).
- `outcomes.<class>` and `counts.<name>`: counts of measured requests, e.g. `outcomes.timeout == 0`.
- a full path into passport.json: `validity.counts.schema_failures == 0`, `results.slo.attainment
  >= 0.99`, `results.client.cpu_share_max < 0.5`.

Values: latencies take durations with their unit (`2s`, `200ms`, `150us`; a bare number is a
usage error: `ttft.any.p99 < 2000` is as likely meant in ms as in s), rates and counts take
numbers, `error_rate` takes a fraction or a percentage. An unknown name (with the closest valid
ones) or a value of the wrong kind is a GateError (a usage error); a figure the passport does
not have (null) is a FAIL, never a pass.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passport._input import read_bounded
from passport.audit import parse_duration_s, parse_fraction
from passport.judge._names import GateError, Kind, Target, resolve
from passport.model import Passport

__all__ = ["GateError", "Condition", "ConditionResult", "parse_condition", "evaluate_gate", "load_gate_file"]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|==|!=|<|>)\s*(\S.*?)\s*$")
_BARE_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_CANARY_WORDS = {"pass": "passed", "passed": "passed", "fail": "failed", "failed": "failed", "not_run": "not_run"}


@dataclass(frozen=True)
class Condition:
    """One parsed condition and the passport field it reads."""

    text: str
    name: str
    op: str
    value: Any
    kind: Kind
    target: Target


@dataclass(frozen=True)
class ConditionResult:
    condition: Condition
    passed: bool
    measured: Any
    message: str


def parse_condition(text: str, resolver: Callable[[str], Target] = resolve) -> Condition:
    """Parse `<name> <op> <value>`, the name read by `resolver` (a passport's names by default; a
    campaign's: `passport.judge.resolve_campaign_name`); raises GateError naming what is wrong."""
    match = _CONDITION.match(text)
    if not match:
        raise GateError(f"cannot read gate condition {text!r}: write <name> <op> <value>, e.g. 'ttft.any.p99 < 2s'")
    name, op, raw = match.groups()
    target = resolver(name)
    kind = target.kind
    value: Any
    try:
        if kind == "latency":
            if _BARE_NUMBER.match(raw):
                raise GateError(f"gate condition {text!r}: {name} is a latency, and {raw} has no unit; write "
                                f"{raw}ms or {raw}s (units: s, ms, us)")
            value = parse_duration_s(raw)
        elif kind == "fraction":
            value = parse_fraction(raw)
        elif kind == "number":
            value = float(raw)
        elif kind == "bool":
            value = {"true": True, "false": False}[raw.lower()]
        elif kind == "text":
            value = raw
        elif kind == "verdict":
            value = raw.upper()
            if value not in ("VALID", "INVALID", "HOLD", "INCOMPLETE", "SATURATED"):
                raise ValueError(raw)
        elif kind == "slo":
            value = raw.lower()
            if value not in ("met", "not_met"):
                raise ValueError(raw)
        else:
            value = _CANARY_WORDS[raw.lower()]
    except (ValueError, KeyError) as exc:
        raise GateError(f"gate condition {text!r}: {raw!r} is not a valid value for {name} ({kind})") from exc
    if kind in ("verdict", "canaries", "slo", "bool", "text") and op not in ("==", "!="):
        raise GateError(f"gate condition {text!r}: {name} can only be compared with == or !=")
    return Condition(text.strip(), name, op, value, kind, target)


def _measured(passport: dict[str, Any], condition: Condition) -> Any:
    target = condition.target
    if condition.name == "error_rate":
        counts = passport["validity"]["counts"]
        measured, succeeded = counts.get("measured"), counts.get("succeeded")
        return None if not measured or succeeded is None else (measured - succeeded) / measured
    value: Any = passport
    for part in target.path:
        value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return target.absent
    if target.kind == "slo":
        return "met" if value else "not_met"
    return value


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


def evaluate_gate(passport: Passport | dict[str, Any], conditions: list[Condition]) -> list[ConditionResult]:
    """Evaluate each condition against a passport (or a campaign's `gate_view`); a missing (null)
    figure fails."""
    data = passport.json_dict() if isinstance(passport, Passport) else passport
    results = []
    for condition in conditions:
        measured = _measured(data, condition)
        if measured is None:
            results.append(ConditionResult(condition, False, None, "the passport has no value for it"))
            continue
        passed = bool(_OPS[condition.op](measured, condition.value))
        results.append(ConditionResult(condition, passed, measured, f"measured {_show(condition.kind, measured)}"))
    return results


def load_gate_file(path: Path) -> list[str]:
    """A YAML gate file: `require: [<condition>, ...]` (read bounded: see passport._input)."""
    from workloads import load_yaml

    try:
        data = load_yaml(read_bounded(path, "gate file"), f"gate file {path}")
    except OSError as exc:
        raise GateError(f"cannot read gate file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise GateError(str(exc)) from None
    require = data.get("require") if isinstance(data, dict) else None
    if not isinstance(require, list) or not all(isinstance(c, str) for c in require) or not require:
        raise GateError(f"gate file {path} must hold `require:` with a list of conditions, e.g. - ttft.any.p99 < 2s")
    return list(require)
