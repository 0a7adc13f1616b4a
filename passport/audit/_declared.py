"""What was declared before the first timed request: SLOs, discard rules, realized capacity.

`passport run` writes `declared.json` into the run folder after probing the endpoint and before
the first timed request: the effective spec, the UTC time it was written, and the capacity the
engine reported. Its sha256 is listed with the raw files, so a rule added afterwards (to the
passport or to this file) is visible: `passport verify` recomputes with the rules in this file
and reports any difference from the passport's protocol. That is what "pre-registered" means
here: results are only ever computed with rules that existed before the data.

Grammar (validated when the spec is read, evaluated by `compute_results`):

SLO targets, `slo: {<metric id>.<stat>: <duration>}`, e.g. `ttft.any.p99: 2s`. Stats: p50, p90,
p95, p99, p99_9 or max. A request meets a target when its own value is within the bound
(`itl.chunk`: when the same percentile of its own gaps is); the run meets a target when that
percentile over measured requests is, failures counting as infinitely slow.

Discard rules, `discard: [<rule>, ...]`, each evaluated per repetition:
- `engine_exited`: the launched engine exited during the repetition.
- `out_of_memory`: a request of the repetition failed with an out-of-memory error, or the engine
  exited during it and engine.log reports running out of memory.
- `capacity_below_workload`: a request of the repetition needed more context (prompt tokens +
  max_tokens) than the engine realized per sequence (not evaluable when the engine did not say).
- `canary_failed`: a canary case sampled during the repetition (`canary_share`) failed.
- `error_rate > <fraction or %>`: failed / measured requests of the repetition.
- `<metric id>.<stat> > <duration>`: that success-only statistic over the repetition.

Pure Python: an auditor's recomputation needs nothing from the load generator.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passport.audit._files import RunFiles, RunSource, canonical_json, sha256_bytes
from passport.audit._units import parse_duration_s, parse_fraction

__all__ = ["DECLARED_FILE", "SLO_METRICS", "SLO_STATS", "SloTarget", "DiscardRule", "Declarations",
           "parse_slo", "parse_discard_rule", "write_declared", "read_declared"]

DECLARED_FILE = "declared.json"
SLO_METRICS = ("ttft.any", "ttft.content", "ttft.any.sched", "ttft.content.sched", "tpot", "itl.chunk", "e2e",
               "e2e.sched")
SLO_STATS: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9, "max": 100.0}
_FLAG_RULES = ("engine_exited", "out_of_memory", "capacity_below_workload", "canary_failed")
_THRESHOLD = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(>=|>)\s*(\S+)\s*$")


@dataclass(frozen=True)
class SloTarget:
    """`<metric>.<stat> <= bound_s`, e.g. ttft.any.p99 <= 2.0."""

    name: str
    metric: str
    stat: str
    bound_s: float

    @property
    def percentile(self) -> float:
        return SLO_STATS[self.stat]


@dataclass(frozen=True)
class DiscardRule:
    """One discard rule; `kind` is a flag rule's name, `error_rate` or `metric`."""

    text: str
    kind: str
    metric: str | None = None
    stat: str | None = None
    op: str | None = None
    value: float | None = None


@dataclass(frozen=True)
class Declarations:
    """The contents of declared.json, parsed; empty when a run folder has none."""

    slo: tuple[SloTarget, ...] = ()
    discard: tuple[DiscardRule, ...] = ()
    context_tokens_per_sequence: int | None = None
    capacity_source: str | None = None
    written_utc: str | None = None
    context_needed_tokens: int | None = None
    cost: dict[str, Any] | None = None  # the spec's `cost:` (passport.audit._cost)
    api: str = "chat"  # the spec's endpoint.api: which kind's rates apply (passport.audit._metrics)


def _split_metric(name: str, stats: tuple[str, ...]) -> tuple[str, str]:
    metric, _, stat = name.rpartition(".")
    if metric not in SLO_METRICS or stat not in stats:
        raise ValueError(f"{name!r}: write <metric id>.<stat> with a metric id of {', '.join(SLO_METRICS)} "
                         f"and a stat of {', '.join(stats)}")
    return metric, stat


def parse_slo(mapping: dict[str, str | float]) -> tuple[SloTarget, ...]:
    """SLO targets from the spec's `slo` mapping; raises ValueError naming the bad entry."""
    targets = []
    for name, bound in mapping.items():
        metric, stat = _split_metric(name, tuple(SLO_STATS))
        bound_s = parse_duration_s(bound)
        if bound_s <= 0:
            raise ValueError(f"slo {name}: the bound must be positive (got {bound!r})")
        targets.append(SloTarget(name, metric, stat, bound_s))
    return tuple(targets)


def parse_discard_rule(text: str) -> DiscardRule:
    """One discard rule (see the module docstring); raises ValueError naming what is wrong."""
    stripped = text.strip()
    if stripped in _FLAG_RULES:
        return DiscardRule(stripped, stripped)
    grammar = (f"use one of {', '.join(_FLAG_RULES)}, 'error_rate > 5%' or '<metric id>.<stat> > <duration>' "
               "(e.g. 'e2e.p99 > 60s')")
    match = _THRESHOLD.match(stripped)
    if not match:
        raise ValueError(f"discard rule {text!r} not understood: {grammar}")
    name, op, raw = match.groups()
    if name == "error_rate":
        return DiscardRule(stripped, "error_rate", op=op, value=parse_fraction(raw))
    if "." not in name:
        raise ValueError(f"discard rule {text!r}: {name!r} is not understood: {grammar}")
    metric, stat = _split_metric(name, ("p50", "p90", "p95", "p99", "p99_9", "max"))
    return DiscardRule(stripped, "metric", metric=metric, stat=stat, op=op, value=parse_duration_s(raw))


def write_declared(folder: Path, effective_spec: dict[str, Any], context_tokens_per_sequence: int | None,
                   capacity_source: str | None, context_needed_tokens: int | None = None) -> tuple[str, str]:
    """Write declared.json (before the first timed request); returns (its sha256, the UTC time
    written into it). `context_needed_tokens`: the workload's longest request (prompt + output
    budget; a session's whole history), which the `context_capacity` rule checks against the
    realized context."""
    written = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    data = {"written_utc": written, "spec": effective_spec,
            "capacity": {"context_tokens_per_sequence": context_tokens_per_sequence, "source": capacity_source},
            "workload": {"context_needed_tokens": context_needed_tokens}}
    body = canonical_json(data)
    from harness import write_new  # never through a symlink planted in the folder

    write_new(Path(folder) / DECLARED_FILE, body + b"\n")
    return sha256_bytes(body + b"\n"), written


def read_declared(source: RunSource) -> Declarations:
    """Parse declared.json; a folder without one declares nothing (no SLO, no discard rule)."""
    text = RunFiles.of(source).read(DECLARED_FILE)
    if text is None:
        return Declarations()
    data = json.loads(text)
    spec = data.get("spec") or {}
    capacity = data.get("capacity") or {}
    return Declarations(
        slo=parse_slo(spec.get("slo") or {}),
        discard=tuple(parse_discard_rule(t) for t in spec.get("discard") or []),
        context_tokens_per_sequence=capacity.get("context_tokens_per_sequence"),
        capacity_source=capacity.get("source"),
        written_utc=data.get("written_utc"),
        context_needed_tokens=(data.get("workload") or {}).get("context_needed_tokens"),
        cost=spec.get("cost"),
        api=str((spec.get("endpoint") or {}).get("api") or "chat"),
    )
