"""`passport compare A B [C ...]`: are runs comparable, and which differences are real?

First the six invariants of DESIGN.md ("Comparability"), each compared against the first run:
model (artifact hash when both runs have one, else model id), weight and KV precision, decoding
parameters, workload (its hash: same lengths and prompts), load (schedule hash and pattern), and
window (warm-up, measurement, repetitions). Any difference makes the runs "not comparable",
unless the field is allowed (`--allow FIELD`), which the output states.

Then, for each headline latency, the p50 and p99 of each run and their difference (other minus
the first), and the throughputs, each tested as `_stats.py` describes: percentiles only with
enough samples, each run's error from the spread of the statistic over time blocks (so the
machine's drift within a run widens it), Welch's t, Holm's correction across every statistic of
the comparison, and a minimum effect below which a difference is not called. A verdict is
"faster"/"slower" (latency) or "higher"/"lower" (rates) only when the difference survives all of
that. Caveats: a different prefix-cache policy, canary status or verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from passport._errors import PassportError
from passport.audit import per_request_samples, read_run, requests_meeting
from passport.judge._stats import (
    BLOCKS,
    MIN_PER_BLOCK,
    Estimate,
    Test,
    difference,
    holm,
    mean_estimate,
    min_samples,
    pooled_quantile_estimate,
    quantile_estimate,
    slice_rates,
)
from passport.model import Passport, read_passport

__all__ = ["INVARIANTS", "Comparison", "MetricComparison", "compare_runs", "invariant_values", "render_comparison",
           "format_value", "method_line", "MIN_EFFECT"]

INVARIANTS = ("model", "precision", "decoding", "workload", "load", "window")
_CACHE_FIELDS = ("cache_salt", "cache_prompt")  # prefix-cache control, compared as a caveat instead
LATENCIES = ("ttft.any", "ttft.content", "itl.chunk", "tpot", "e2e")
# A level shift between two runs that neither run's blocks show cannot be measured from two runs
# (benchmarks/compare_aa.py prints the largest relative A/A differences seen): smaller differences
# than this share of the first run's value are not called by default.
MIN_EFFECT = 0.10
THROUGHPUTS = ("throughput.output_tokens_per_s", "throughput.requests_per_s")
_QUANTILES = (("p50", 0.50), ("p99", 0.99))

@dataclass
class MetricComparison:
    """One metric statistic of one run against the first: values, difference, its 95 %
    interval, the two-sided p-value, and the verdict after the family-wise correction."""

    metric: str
    stat: str
    base: float | None
    other: float | None
    ci95: tuple[float, float] | None
    verdict: str
    p: float | None = None


@dataclass(frozen=True)
class Comparison:
    """The comparison of every run against the first, with the settings its verdicts used."""

    runs: list[Path]
    differences: dict[str, list[Any]]  # invariant -> value per run, for those that differ
    allowed: list[str]
    metrics: list[list[MetricComparison]]  # per other run
    caveats: list[str]
    alpha: float = 0.05
    min_effect: float = 0.10

    @property
    def comparable(self) -> bool:
        return all(name in self.allowed for name in self.differences)


def _reject_policy(load: dict[str, Any]) -> dict[str, Any]:
    """The declared rejection policy; never retrying (the default) whatever its other fields, as
    in passports from before the policy existed."""
    policy: dict[str, Any] = load.get("on_reject") or {"retry": "none"}
    return policy if policy.get("retry") != "none" else {"retry": "none"}


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
        "load": {"schedule": p.protocol.schedule.sha256, "pattern": p.protocol.schedule.pattern,
                 "on_reject": _reject_policy(load)},
        "window": {"warmup": {"requests": load["warmup"]["requests"], "barrier": bool(load["warmup"].get("barrier"))},
                   "measure": load["measure"], "repetitions": load["repetitions"]},
    }


@dataclass(frozen=True)
class _Samples:
    """A run's successful measured requests in send order: one value per request per metric,
    `itl.chunk` gaps grouped by request, and throughput per time slice or per repetition."""

    values: dict[str, np.ndarray]
    gaps: list[np.ndarray]
    rates: dict[str, np.ndarray]
    by_repetition: bool


def _samples(run: Path, passport: Passport) -> _Samples:
    data = read_run(run)
    samples = per_request_samples(data, LATENCIES)
    values = {m: np.concatenate(v) if v else np.zeros(0) for m, v in samples.items() if m != "itl.chunk"}
    gaps = [g for g in samples["itl.chunk"] if len(g)]
    metrics = passport.results.metrics
    reps = {m: metrics[m] for m in THROUGHPUTS if m in metrics}
    if all(s.n >= 2 for s in reps.values()) and reps:
        return _Samples(values, gaps, {}, True)
    meets = None
    if data.declared.slo:
        meets = requests_meeting(data.declared.slo, data.latencies, data.success, data.gaps_by_request,
                                 data.request_ids) & data.measured
    enough = data.ok_measured.sum() >= _SLICES
    rates = slice_rates(data.requests, data.measured, data.ok_measured, meets, _SLICES) if enough else {}
    return _Samples(values, gaps, rates, False)


_SLICES = 10


def _latency(metric: str, base: _Samples, other: _Samples) -> list[tuple[MetricComparison, Test | None]]:
    """p50 and p99 of one latency metric: each tested where both runs have enough samples."""
    if metric == "itl.chunk":
        b_all, o_all = np.concatenate(base.gaps or [np.zeros(0)]), np.concatenate(other.gaps or [np.zeros(0)])
        have_requests = min(len(base.gaps), len(other.gaps))
    else:
        b_all, o_all = base.values[metric], other.values[metric]
        have_requests = min(len(b_all), len(o_all))
    have = min(len(b_all), len(o_all))
    rows: list[tuple[MetricComparison, Test | None]] = []
    for stat, q in _QUANTILES:
        b_val = float(np.quantile(b_all, q)) if len(b_all) else None
        o_val = float(np.quantile(o_all, q)) if len(o_all) else None
        if b_val is None or o_val is None or have < min_samples(q):
            verdict = f"too few samples for {stat} (need {min_samples(q)}, have {have})"
        elif have_requests < 2 * MIN_PER_BLOCK:
            verdict = f"too few requests for time blocks (need {2 * MIN_PER_BLOCK}, have {have_requests})"
        else:
            if metric == "itl.chunk":
                b_est, o_est = pooled_quantile_estimate(base.gaps, q), pooled_quantile_estimate(other.gaps, q)
            else:
                b_est, o_est = quantile_estimate(b_all, q), quantile_estimate(o_all, q)
            assert b_est is not None and o_est is not None
            rows.append(_tested(metric, stat, b_est, o_est))
            continue
        rows.append((MetricComparison(metric, stat, b_val, o_val, None, verdict), None))
    return rows


def _tested(metric: str, stat: str, base: Estimate, other: Estimate) -> tuple[MetricComparison, Test]:
    diff = difference(base, other)
    return MetricComparison(metric, stat, base.value, other.value, diff.interval(), "", diff.p), Test(diff.p)


def _rate(metric: str, base_p: Passport, other_p: Passport, base: _Samples,
          other: _Samples) -> tuple[MetricComparison, Test | None]:
    b, o = base_p.results.metrics.get(metric), other_p.results.metrics.get(metric)
    b_mean, o_mean = (b.mean if b else None), (o.mean if o else None)
    if base.by_repetition and other.by_repetition and b is not None and o is not None \
            and b_mean is not None and o_mean is not None:
        return _tested(metric, "mean", mean_estimate(b_mean, b.std or 0.0, b.n),
                       mean_estimate(o_mean, o.std or 0.0, o.n))
    if metric not in base.rates or metric not in other.rates or b_mean is None or o_mean is None:
        return MetricComparison(metric, "mean", b_mean, o_mean, None,
                                f"not testable (needs {_SLICES}+ completed requests per run)"), None
    b_slices, o_slices = base.rates[metric], other.rates[metric]
    return _tested(metric, "mean", mean_estimate(b_mean, float(np.std(b_slices, ddof=1)), len(b_slices)),
                   mean_estimate(o_mean, float(np.std(o_slices, ddof=1)), len(o_slices)))


def _verdict(m: MetricComparison, test: Test, min_effect: float) -> str:
    if not test.significant:
        return "no significant difference"
    assert m.base is not None and m.other is not None
    if m.base and abs(m.other - m.base) < min_effect * abs(m.base):
        return f"no meaningful difference (< {min_effect:.0%})"
    rate = m.metric.startswith(("throughput", "goodput"))
    if m.other > m.base:
        return "higher" if rate else "slower"
    return "lower" if rate else "faster"


def _compare_pair(base_run: Path, other_run: Path, base_p: Passport, other_p: Passport,
                  alpha: float, min_effect: float) -> list[MetricComparison]:
    base, other = _samples(base_run, base_p), _samples(other_run, other_p)
    rows = [row for metric in LATENCIES for row in _latency(metric, base, other)]
    rates = list(THROUGHPUTS)
    if "goodput.requests_per_s" in base_p.results.metrics and "goodput.requests_per_s" in other_p.results.metrics:
        rates.append("goodput.requests_per_s")
    rows += [_rate(metric, base_p, other_p, base, other) for metric in rates]
    holm([t for _, t in rows if t is not None], alpha)
    for m, t in rows:
        if t is not None:
            m.verdict = _verdict(m, t, min_effect)
    return [m for m, _ in rows]


def compare_runs(runs: list[Path], allowed: list[str] | None = None, alpha: float = 0.05,
                 min_effect: float = MIN_EFFECT) -> Comparison:
    """Compare every run against the first; see the module docstring. `alpha`: the family-wise
    error rate of each comparison; `min_effect`: the smallest relative difference called."""
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
    comparison = Comparison(runs, differences, allowed, [], caveats, alpha, min_effect)
    if comparison.comparable:
        for i in range(1, len(runs)):
            comparison.metrics.append(_compare_pair(runs[0], runs[i], passports[0], passports[i], alpha, min_effect))
    return comparison


def method_line(c: Comparison) -> str:
    """How the verdicts were reached, in one line under each table."""
    return (f"Verdicts: Holm-corrected across the {len(c.metrics[0]) if c.metrics else 0} statistics at a "
            f"family-wise error rate of {c.alpha:.0%}; each run's error from up to {BLOCKS} time blocks of its "
            f"window (the machine's drift widens it), Welch's t, two-sided p; differences under {c.min_effect:.0%} "
            "of the first run are not called (a level shift between two runs is not measured by either).")


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
        lines.append(f"{other.name} against {c.runs[0].name}")
        lines.append(f"{'metric':<36} {'first':>11} {'other':>11} {'difference':>11}  {'95% interval':<25} "
                     f"{'p':>7}  verdict")
        for m in rows:
            diff = None if m.base is None or m.other is None else m.other - m.base
            interval = "—" if m.ci95 is None else f"[{fmt(m.metric, m.ci95[0])}, {fmt(m.metric, m.ci95[1])}]"
            p = "—" if m.p is None else ("<0.0001" if m.p < 1e-4 else f"{m.p:.4f}")
            lines.append(f"{m.metric + '.' + m.stat:<36} {fmt(m.metric, m.base):>11} {fmt(m.metric, m.other):>11} "
                         f"{fmt(m.metric, diff):>11}  {interval:<25} {p:>7}  {m.verdict}")
        lines.append(method_line(c))
    lines.extend(["", "Caveats:"] + [f"- {c_}" for c_ in c.caveats] if c.caveats else ["", "Caveats: none"])
    lines.append("Result: COMPARABLE")
    return lines
