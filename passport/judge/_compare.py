"""`passport compare A B [C ...]`: are runs comparable, and which differences are real?

First the six invariants of DESIGN.md ("Comparability"), each compared against the first run:
model (artifact hash when both runs have one, else model id), weight and KV precision, decoding
parameters, workload (its hash: same lengths and prompts), load (schedule hash and pattern), and
window (warm-up, measurement, repetitions). Any difference makes the runs "not comparable",
unless the field is allowed (`--allow FIELD`), which the output states.

Then, for each headline latency, the difference of p50 and p99 (other run minus the first) with a
95 % bootstrap interval: requests are resampled with replacement (`itl.chunk` resamples whole
requests and pools their gaps, so correlated gaps stay together). The verdict is "faster" or
"slower" only when the interval excludes zero, else "no significant difference". Throughputs
are compared across repetitions when each run has at least two; otherwise "not testable".
Caveats: a different prefix-cache policy, canary status or verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from passport._errors import PassportError
from passport.audit import per_request_samples
from passport.model import Passport, read_passport

__all__ = ["INVARIANTS", "Comparison", "MetricComparison", "compare_runs", "invariant_values", "render_comparison",
           "format_value"]

INVARIANTS = ("model", "precision", "decoding", "workload", "load", "window")
_CACHE_FIELDS = ("cache_salt", "cache_prompt")  # prefix-cache control, compared as a caveat instead
LATENCIES = ("ttft.any", "ttft.content", "itl.chunk", "tpot", "e2e")
_RESAMPLES = 2000


@dataclass(frozen=True)
class MetricComparison:
    """One metric statistic of one run against the first: values, difference and its interval."""

    metric: str
    stat: str
    base: float | None
    other: float | None
    ci95: tuple[float, float] | None
    verdict: str


@dataclass(frozen=True)
class Comparison:
    runs: list[Path]
    differences: dict[str, list[Any]]  # invariant -> value per run, for those that differ
    allowed: list[str]
    metrics: list[list[MetricComparison]]  # per other run
    caveats: list[str]

    @property
    def comparable(self) -> bool:
        return all(name in self.allowed for name in self.differences)


def invariant_values(p: Passport) -> dict[str, Any]:
    """The value of each comparability invariant for one passport."""
    ident = {k: v.value for k, v in p.identity.items()}
    effective = p.protocol.effective
    load = effective["load"]
    return {
        "model": ident.get("model.file_sha256") or ident.get("model.root") or ident.get("model.id"),
        "precision": {k: ident.get(k) for k in ("model.quantization", "model.dtype", "engine.kv_cache_dtype")},
        "decoding": {k: v for k, v in p.protocol.request_params.items() if k not in _CACHE_FIELDS},
        "workload": p.protocol.workload.sha256,
        "load": {"schedule": p.protocol.schedule.sha256, "pattern": p.protocol.schedule.pattern},
        "window": {"warmup": load["warmup"], "measure": load["measure"], "repetitions": load["repetitions"]},
    }


def _bootstrap_diff(base: list[np.ndarray], other: list[np.ndarray], q: float,
                    rng: np.random.Generator) -> tuple[float, float, float, float] | None:
    """(base stat, other stat, ci low, ci high) of other - base for percentile q; samples are
    per-request arrays, resampled whole."""
    base = [b for b in base if len(b)]
    other = [o for o in other if len(o)]
    if len(base) < 2 or len(other) < 2:
        return None
    b_stat = float(np.percentile(np.concatenate(base), q))
    o_stat = float(np.percentile(np.concatenate(other), q))
    diffs = np.empty(_RESAMPLES)
    for i in range(_RESAMPLES):
        bs = np.concatenate([base[j] for j in rng.integers(0, len(base), len(base))])
        os_ = np.concatenate([other[j] for j in rng.integers(0, len(other), len(other))])
        diffs[i] = np.percentile(os_, q) - np.percentile(bs, q)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return b_stat, o_stat, float(low), float(high)


def _verdict(ci: tuple[float, float] | None, lower_is_better: bool = True) -> str:
    if ci is None:
        return "not testable"
    if ci[0] > 0:
        return "slower" if lower_is_better else "higher"
    if ci[1] < 0:
        return "faster" if lower_is_better else "lower"
    return "no significant difference"


def _compare_pair(base_run: Path, other_run: Path, base_p: Passport, other_p: Passport,
                  seed: int) -> list[MetricComparison]:
    rng = np.random.default_rng(seed)
    base = per_request_samples(base_run, base_p.discarded_repetitions(), LATENCIES)
    other = per_request_samples(other_run, other_p.discarded_repetitions(), LATENCIES)
    out: list[MetricComparison] = []
    for metric in LATENCIES:
        base_samples, other_samples = base[metric], other[metric]
        for stat, q in (("p50", 50.0), ("p99", 99.0)):
            r = _bootstrap_diff(base_samples, other_samples, q, rng)
            if r is None:
                out.append(MetricComparison(metric, stat, None, None, None, "not testable"))
            else:
                out.append(MetricComparison(metric, stat, r[0], r[1], (r[2], r[3]), _verdict((r[2], r[3]))))
    for metric in ("throughput.output_tokens_per_s", "throughput.requests_per_s", "goodput.requests_per_s"):
        b, o = base_p.results.metrics.get(metric), other_p.results.metrics.get(metric)
        if metric.startswith("goodput") and (b is None or o is None):
            continue  # goodput exists only where both runs declared an SLO
        if b is None or o is None or b.n < 2 or o.n < 2 or b.mean is None or o.mean is None:
            out.append(MetricComparison(metric, "mean", b.mean if b else None, o.mean if o else None, None,
                                        "not testable (needs 2+ repetitions in each run)"))
            continue
        # across repetitions: a normal interval for the difference of means (Welch)
        se = float(np.sqrt((b.std or 0.0) ** 2 / b.n + (o.std or 0.0) ** 2 / o.n))
        d = o.mean - b.mean
        ci = (d - 1.96 * se, d + 1.96 * se)
        out.append(MetricComparison(metric, "mean", b.mean, o.mean, ci, _verdict(ci, lower_is_better=False)))
    return out


def compare_runs(runs: list[Path], allowed: list[str] | None = None, seed: int = 0) -> Comparison:
    """Compare every run against the first; see the module docstring."""
    allowed = list(allowed or [])
    unknown = [a for a in allowed if a not in INVARIANTS]
    if unknown:
        raise PassportError(f"--allow {unknown[0]!r}: not a comparability field; use one of {', '.join(INVARIANTS)}")
    passports = [read_passport(run) for run in runs]
    values = [invariant_values(p) for p in passports]
    differences = {name: [v[name] for v in values] for name in INVARIANTS
                   if any(v[name] != values[0][name] for v in values[1:])}
    caveats = []
    facts: dict[str, list[str]] = {
        "prefix cache": [str(p.protocol.prefix_cache.get("declared")) for p in passports],
        "canaries": [p.validity.canaries.status for p in passports],
        "verdict": [p.verdict for p in passports],
    }
    for label, seen in facts.items():
        if len(set(seen)) > 1:
            caveats.append(f"{label} differs: " + ", ".join(f"{r.name}={s}" for r, s in zip(runs, seen)))
    invalid = [r.name for r, p in zip(runs, passports) if p.verdict != "VALID"]
    if invalid:
        caveats.append("not VALID: " + ", ".join(invalid))
    comparison = Comparison(runs, differences, allowed, [], caveats)
    if comparison.comparable:
        for i in range(1, len(runs)):
            comparison.metrics.append(_compare_pair(runs[0], runs[i], passports[0], passports[i], seed + i))
    return comparison


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if metric.startswith(("throughput", "goodput")) else f"{value * 1000:.2f} ms"


def render_comparison(c: Comparison) -> list[str]:
    """The comparison as text lines: invariants, then one table per other run, then caveats."""
    fmt = format_value
    lines = []
    for name in INVARIANTS:
        if name in c.differences:
            state = "ALLOWED" if name in c.allowed else "DIFFERS"
            shown = " | ".join(f"{r.name}: {v}" for r, v in zip(c.runs, c.differences[name]))
            lines.append(f"{state:<8} {name}: {shown}")
        else:
            lines.append(f"{'same':<8} {name}")
    if not c.comparable:
        lines.append("Result: NOT COMPARABLE (pass --allow FIELD to compare anyway)")
        return lines
    if c.differences:
        lines.append("compared anyway, allowing: " + ", ".join(n for n in c.differences))
    for other, rows in zip(c.runs[1:], c.metrics):
        lines.append("")
        lines.append(f"{other.name} against {c.runs[0].name} (difference: other - first, 95 % bootstrap interval)")
        lines.append(f"{'metric':<36} {'first':>11} {'other':>11} {'difference':>11}  {'95% interval':<25} verdict")
        for m in rows:
            diff = None if m.base is None or m.other is None else m.other - m.base
            interval = "—" if m.ci95 is None else f"[{fmt(m.metric, m.ci95[0])}, {fmt(m.metric, m.ci95[1])}]"
            lines.append(f"{m.metric + '.' + m.stat:<36} {fmt(m.metric, m.base):>11} {fmt(m.metric, m.other):>11} "
                         f"{fmt(m.metric, diff):>11}  {interval:<25} {m.verdict}")
    lines.extend(["", "Caveats:"] + [f"- {c_}" for c_ in c.caveats] if c.caveats else ["", "Caveats: none"])
    lines.append("Result: COMPARABLE")
    return lines
