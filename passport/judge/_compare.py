"""`passport compare A B [C ...]`: are runs comparable, and which differences are real?

First the invariants of docs/concepts/design.md ("Comparability"), each compared against the first run: model
(artifact hash when both runs have one, else model id), weight and KV precision, decoding
parameters, workload (its hash: same lengths and prompts), load (schedule hash and pattern),
window (warm-up, measurement, repetitions), cache (the declared prefix-cache policy, and the
measured share of prompt tokens served from the cache within `CACHE_TOLERANCE`: a repeated run
served from the cache the first one filled is not the same measurement) and validity (every run
VALID: an INVALID or INCOMPLETE run's figures are not a measurement of the declared protocol).
Any of them broken makes the runs "not comparable", unless the field is allowed (`--allow
FIELD`), which the output states. Beside them, every identity and protocol field whose value
differs between the runs (slots, KV tokens, launch flags, build, cache method...), so what
differs is named even where no invariant covers it.

Then, for each headline latency, the p50 and p99 of each run and their difference (other minus
the first), and the throughputs, each tested as `_stats.py` describes: percentiles only with
enough samples, each run's error from the spread of the statistic over time blocks (so the
machine's drift within a run widens it), Welch's t, Holm's correction across every statistic of
the comparison, and a minimum effect below which a difference is not called. A verdict is
"faster"/"slower" (latency) or "higher"/"lower" (rates) only when the difference survives all of
that. The p-value shown is Holm-adjusted and the interval is at the level Holm tested it at, so
a shown interval excludes zero exactly when the p is under alpha and the verdict names a
difference (the uncorrected p stays in `MetricComparison.p_raw`). A difference not called is
"no significant difference" only when that interval stays within the minimum effect of the first
run either way, else "inconclusive": a short run or a busy machine cannot tell, and a user must not
read it as "the same". Then each accuracy set both runs scored, item by item
(`_accuracy_compare.py`). Caveats: canary status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from passport._errors import PassportError
from passport.audit import OpenRun, RunData, per_request_samples, requests_meeting
from passport.judge._accuracy_compare import AccuracyComparison, compare_accuracy, render_accuracy
from passport.judge._stats import (
    BLOCKS,
    MIN_PER_BLOCK,
    Difference,
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
from passport.model import Passport, passport_of

__all__ = ["endpoint_kind", "INVARIANTS", "CACHE_TOLERANCE", "Comparison", "MetricComparison", "compare_runs",
           "invariant_values", "invariant_text", "field_values", "render_comparison", "format_value", "format_p",
           "format_interval", "method_line", "MIN_EFFECT", "StatPair", "run_samples", "quantile_pair", "rate_pair",
           "stat_name", "LATENCIES", "THROUGHPUTS", "RunSamples", "invariant_broken", "rate_estimate"]

INVARIANTS = ("endpoint", "model", "precision", "decoding", "workload", "load", "window", "cache", "validity")
# The largest difference in the share of prompt tokens served from the prefix cache that still
# counts as the same cache state (absolute; 0.94 against 0.01 is not, 0.03 against 0.01 is).
CACHE_TOLERANCE = 0.10
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
    """One metric statistic of one run against the first: values, difference, its interval at
    `level` (the level Holm's correction tested it at; None: not tested), the Holm-adjusted
    two-sided p (`p_raw`: before the correction), and the verdict after the correction."""

    metric: str
    stat: str
    base: float | None
    other: float | None
    ci: tuple[float, float] | None
    verdict: str
    p: float | None = None
    p_raw: float | None = None
    level: float | None = None


@dataclass(frozen=True)
class Comparison:
    """The comparison of every run against the first, with the settings its verdicts used."""

    runs: list[Path]
    differences: dict[str, list[Any]]  # invariant -> value per run, for those broken
    allowed: list[str]
    metrics: list[list[MetricComparison]]  # per other run
    caveats: list[str]
    alpha: float = 0.05
    min_effect: float = 0.10
    values: dict[str, list[Any]] = field(default_factory=dict)  # invariant -> value per run, every one
    fields: dict[str, list[Any]] = field(default_factory=dict)  # identity/protocol field -> value per run, differing
    accuracy: list[list[AccuracyComparison]] = field(default_factory=list)  # per other run, by set

    @property
    def comparable(self) -> bool:
        return all(name in self.allowed for name in self.differences)


def _reject_policy(load: dict[str, Any]) -> dict[str, Any]:
    """The declared rejection policy; never retrying (the default) whatever its other fields, as
    in passports from before the policy existed."""
    policy: dict[str, Any] = load.get("on_reject") or {"retry": "none"}
    return policy if policy.get("retry") != "none" else {"retry": "none"}


def cache_hit_rate(p: Passport) -> float | None:
    """The share of prompt tokens served from the prefix cache: as usage reported them, else
    the server's counters; None when neither said."""
    usage, server = p.results.get("prefix_cache_usage"), p.results.get("server")
    share = None if usage is None else usage["share_of_prompt_tokens"]
    if share is None and server is not None:
        share = server["prefix_cache_hit_rate"]
    return None if share is None else float(share)


def endpoint_kind(p: Passport) -> str:
    """The run's endpoint kind (endpoint.api; chat for passports from before the other kinds)."""
    return str((p.protocol.effective.get("endpoint") or {}).get("api") or "chat")


def invariant_values(p: Passport) -> dict[str, Any]:
    """The value of each comparability invariant for one passport."""
    ident = {k: v.value for k, v in p.identity.items()}
    effective = p.protocol.effective
    load = effective["load"]
    return {
        "endpoint": endpoint_kind(p),
        "model": ident.get("model.file_sha256") or ident.get("model.root") or ident.get("model.id"),
        "precision": {k: ident.get(k) for k in ("model.quantization", "model.dtype", "engine.kv_cache_dtype")},
        "decoding": {k: v for k, v in p.protocol.request_params.items() if k not in _CACHE_FIELDS},
        "workload": p.protocol.workload.sha256,
        "load": {"schedule": p.protocol.schedule.sha256, "pattern": p.protocol.schedule.pattern,
                 "on_reject": _reject_policy(load)},
        "window": {"warmup": {"requests": load["warmup"]["requests"], "barrier": bool(load["warmup"].get("barrier"))},
                   "measure": load["measure"], "repetitions": load["repetitions"]},
        "cache": {"policy": p.protocol.prefix_cache.get("policy") or p.protocol.prefix_cache.get("declared"),
                  "hit_rate": cache_hit_rate(p)},
        "validity": p.verdict,
    }


def invariant_broken(name: str, values: list[Any]) -> bool:
    """Whether invariant `name` breaks across the runs (each against the first)."""
    if name == "validity":
        return any(v != "VALID" for v in values)
    if name == "cache":
        first = values[0]
        return any(v["policy"] != first["policy"] or (
            v["hit_rate"] is not None and first["hit_rate"] is not None
            and abs(v["hit_rate"] - first["hit_rate"]) > CACHE_TOLERANCE) for v in values[1:])
    return any(v != values[0] for v in values[1:])


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


# Fields that differ in every run and say nothing about what was measured.
_RUN_ONLY = ("spec.name",)


def field_values(p: Passport) -> dict[str, Any]:
    """Every identity field, the effective spec, the prefix-cache record and its measured hit
    rate, the harness and worker count of one passport, flattened to dotted names."""
    out: dict[str, Any] = {}
    for key, sourced in p.identity.items():
        _flatten(f"identity.{key}", sourced.value, out)
    _flatten("spec", p.protocol.effective, out)
    _flatten("prefix_cache", p.protocol.prefix_cache, out)
    rate = cache_hit_rate(p)
    out["prefix_cache.hit_rate"] = None if rate is None else round(rate, 4)
    _flatten("request_params", p.protocol.request_params, out)
    out["harness.version"] = p.protocol.harness.version
    out["harness.git_revision"] = p.protocol.harness.git_revision
    out["workers"] = (p.protocol.workers or {}).get("count", 1)
    for key in _RUN_ONLY:
        out.pop(key, None)
    return out


def differing_fields(passports: list[Passport]) -> dict[str, list[Any]]:
    """Each field (see `field_values`) whose value is not the same in every run."""
    values = [field_values(p) for p in passports]
    names = sorted({k for v in values for k in v})
    return {name: [v.get(name) for v in values] for name in names
            if any(v.get(name) != values[0].get(name) for v in values[1:])}


@dataclass(frozen=True)
class RunSamples:
    """A run's successful measured requests in send order: one value per request per metric,
    `itl.chunk` gaps grouped by request, and throughput per time slice or per repetition."""

    values: dict[str, np.ndarray]
    gaps: list[np.ndarray]
    rates: dict[str, np.ndarray]
    by_repetition: bool


def run_samples(data: RunData, passport: Passport) -> RunSamples:
    """What the statistics of a run read (see `RunSamples`), from its raw tables and passport."""
    samples = per_request_samples(data, LATENCIES)
    values = {m: np.concatenate(v) if v else np.zeros(0) for m, v in samples.items() if m != "itl.chunk"}
    gaps = [g for g in samples["itl.chunk"] if len(g)]
    metrics = passport.results["metrics"]
    reps = {m: metrics[m] for m in THROUGHPUTS if m in metrics}
    if all(s["n"] >= 2 for s in reps.values()) and reps:
        return RunSamples(values, gaps, {}, True)
    meets = None
    if data.declared.slo:
        meets = requests_meeting(data.declared.slo, data.latencies, data.success, data.gaps_by_request,
                                 data.request_ids) & data.measured
    enough = data.ok_measured.sum() >= _SLICES
    rates = slice_rates(data.requests, data.measured, data.ok_measured, meets, _SLICES) if enough else {}
    return RunSamples(values, gaps, rates, False)


_SLICES = 10


@dataclass(frozen=True)
class StatPair:
    """One statistic of two runs: each value, and each run's estimate with its error where the
    statistic can be tested (`untestable`: why not, in words, when it cannot)."""

    base: float | None
    other: float | None
    estimates: tuple[Estimate, Estimate] | None
    untestable: str | None = None


def quantile_pair(metric: str, q: float, base: RunSamples, other: RunSamples) -> StatPair:
    """Quantile `q` of a latency metric in both runs, estimated where both have enough samples."""
    if metric == "itl.chunk":
        b_all, o_all = np.concatenate(base.gaps or [np.zeros(0)]), np.concatenate(other.gaps or [np.zeros(0)])
        have_requests = min(len(base.gaps), len(other.gaps))
    else:
        b_all, o_all = base.values[metric], other.values[metric]
        have_requests = min(len(b_all), len(o_all))
    have = min(len(b_all), len(o_all))
    b_val = float(np.quantile(b_all, q)) if len(b_all) else None
    o_val = float(np.quantile(o_all, q)) if len(o_all) else None
    stat = stat_name(q)
    if b_val is None or o_val is None or have < min_samples(q):
        return StatPair(b_val, o_val, None, f"too few samples for {stat} (need {min_samples(q)}, have {have})")
    if have_requests < 2 * MIN_PER_BLOCK:
        return StatPair(b_val, o_val, None,
                        f"too few requests for time blocks (need {2 * MIN_PER_BLOCK}, have {have_requests})")
    if metric == "itl.chunk":
        b_est, o_est = pooled_quantile_estimate(base.gaps, q), pooled_quantile_estimate(other.gaps, q)
    else:
        b_est, o_est = quantile_estimate(b_all, q), quantile_estimate(o_all, q)
    assert b_est is not None and o_est is not None
    return StatPair(b_est.value, o_est.value, (b_est, o_est))


def stat_name(q: float) -> str:
    """p50, p99, p99_9 for 0.50, 0.99, 0.999."""
    return "p" + f"{q * 100:g}".replace(".", "_")


def rate_estimate(metric: str, p: Passport, samples: RunSamples, by_repetition: bool) -> Estimate | None:
    """The mean of a rate in one run with its error: over the run's repetitions (`by_repetition`,
    2+ of them), else over its equal time slices; None when the run has neither."""
    figures = p.results["metrics"].get(metric)
    mean = figures["mean"] if figures else None
    if figures is None or mean is None:
        return None
    if by_repetition:
        return mean_estimate(mean, figures["std"] or 0.0, figures["n"])
    if metric not in samples.rates:
        return None
    slices = samples.rates[metric]
    return mean_estimate(mean, float(np.std(slices, ddof=1)), len(slices))


def rate_pair(metric: str, base_p: Passport, other_p: Passport, base: RunSamples, other: RunSamples) -> StatPair:
    """The mean of a rate in both runs: tested over repetitions where each run has 2+, else over
    equal time slices of the window."""
    b, o = base_p.results["metrics"].get(metric), other_p.results["metrics"].get(metric)
    b_mean, o_mean = (b["mean"] if b else None), (o["mean"] if o else None)
    both = base.by_repetition and other.by_repetition
    b_est, o_est = rate_estimate(metric, base_p, base, both), rate_estimate(metric, other_p, other, both)
    if b_est is None or o_est is None:
        return StatPair(b_mean, o_mean, None, f"not testable (needs {_SLICES}+ completed requests per run)")
    return StatPair(b_mean, o_mean, (b_est, o_est))


def _row(metric: str, stat: str, pair: StatPair) -> tuple[MetricComparison, Test | None]:
    if pair.estimates is None:
        return MetricComparison(metric, stat, pair.base, pair.other, None, str(pair.untestable)), None
    return _tested(metric, stat, *pair.estimates)


def _latency(metric: str, base: RunSamples, other: RunSamples) -> list[tuple[MetricComparison, Test | None]]:
    """p50 and p99 of one latency metric: each tested where both runs have enough samples."""
    return [_row(metric, stat, quantile_pair(metric, q, base, other)) for stat, q in _QUANTILES]


@dataclass
class _Tested(Test):
    """A test that keeps its difference, for the interval at the level the correction sets."""

    diff: Difference | None = None


def _tested(metric: str, stat: str, base: Estimate, other: Estimate) -> tuple[MetricComparison, Test]:
    diff = difference(base, other)
    return MetricComparison(metric, stat, base.value, other.value, None, "", None, diff.p), _Tested(diff.p, diff=diff)


def difference_verdict(m: MetricComparison, test: Test, min_effect: float) -> str:
    """The word for one tested statistic. Not significant is "no significant difference" only
    where the difference's interval `m.ci` (at the level Holm tested it) stays within `min_effect`
    of the first run's value either way; an interval reaching past it is "inconclusive": the data
    neither show a difference nor rule out one the user asked to be called (a short run, a busy
    machine). Without an interval, not significant is said as such."""
    if not test.significant:
        if m.ci is not None and m.base:
            reach = max(m.ci, key=abs) / abs(m.base)
            if abs(reach) > min_effect:
                return f"inconclusive (interval reaches {reach:+.1%}, beyond --min-effect {min_effect:.0%})"
        return "no significant difference"
    assert m.base is not None and m.other is not None
    rate = m.metric.startswith(("throughput", "goodput"))
    direction = ("higher" if rate else "slower") if m.other > m.base else ("lower" if rate else "faster")
    if m.base and abs(m.other - m.base) < min_effect * abs(m.base):
        # a real difference, said as one, but smaller than the user asked to be called
        return f"under --min-effect {min_effect:.0%} ({direction} by {abs(m.other - m.base) / abs(m.base):.1%}, " \
               "significant)"
    return direction


def _compare_pair(base_run: RunData, other_run: RunData, base_p: Passport, other_p: Passport,
                  alpha: float, min_effect: float) -> list[MetricComparison]:
    base, other = run_samples(base_run, base_p), run_samples(other_run, other_p)
    rows = [row for metric in LATENCIES for row in _latency(metric, base, other)]
    rates = list(THROUGHPUTS)
    if "goodput.requests_per_s" in base_p.results["metrics"] and "goodput.requests_per_s" in other_p.results["metrics"]:
        rates.append("goodput.requests_per_s")
    rows += [_row(metric, "mean", rate_pair(metric, base_p, other_p, base, other)) for metric in rates]
    holm([t for _, t in rows if t is not None], alpha)
    for m, t in rows:
        if isinstance(t, _Tested) and t.diff is not None and t.level is not None:
            m.p, m.level, m.ci = t.p_adjusted, t.level, t.diff.interval(t.level)
            m.verdict = difference_verdict(m, t, min_effect)
    return [m for m, _ in rows]


def compare_runs(opened: list[OpenRun], allowed: list[str] | None = None, alpha: float = 0.05,
                 min_effect: float = MIN_EFFECT) -> Comparison:
    """Compare every run (each opened through the door, `passport.audit.open_run`) against the
    first; see the module docstring. `alpha`: the family-wise error rate of each comparison;
    `min_effect`: the smallest relative difference called."""
    allowed = list(allowed or [])
    unknown = [a for a in allowed if a not in INVARIANTS]
    if unknown:
        raise PassportError(f"--allow {unknown[0]!r}: not a comparability field; use one of {', '.join(INVARIANTS)}")
    passports = [passport_of(run) for run in opened]
    runs = [run.folder for run in opened]
    per_run = [invariant_values(p) for p in passports]
    values = {name: [v[name] for v in per_run] for name in INVARIANTS}
    differences = {name: seen for name, seen in values.items() if invariant_broken(name, seen)}
    caveats = []
    canaries = [p.validity.canaries["status"] for p in passports]
    if len(set(canaries)) > 1:
        caveats.append("canaries differ: " + ", ".join(f"{r.name}={s}" for r, s in zip(runs, canaries)))
    comparison = Comparison(runs, differences, allowed, [], caveats, alpha, min_effect, values,
                            differing_fields(passports))
    if comparison.comparable:
        for i in range(1, len(runs)):
            comparison.metrics.append(_compare_pair(opened[0].derived.run, opened[i].derived.run, passports[0],
                                                    passports[i], alpha, min_effect))
            comparison.accuracy.append(compare_accuracy(opened[0].derived.run.accuracy,
                                                        opened[i].derived.run.accuracy, alpha))
    return comparison


def method_line(c: Comparison) -> str:
    """How the verdicts were reached, in one line under each table."""
    return (f"Verdicts: Holm-corrected across the {len(c.metrics[0]) if c.metrics else 0} statistics at a "
            f"family-wise error rate of {c.alpha:.0%}: p is Holm-adjusted and each interval is at the level Holm "
            "tested its statistic at, so it excludes zero exactly when p is under the rate; each run's error from "
            f"up to {BLOCKS} time blocks of its window (the machine's drift widens it), Welch's t, two-sided; "
            f"differences under {c.min_effect:.0%} of the first run are not called (a level shift between two runs "
            "is not measured by either).")


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if metric.startswith(("throughput", "goodput")) else f"{value * 1000:.2f} ms"


def format_p(p: float | None) -> str:
    return "—" if p is None else ("<0.0001" if p < 1e-4 else f"{p:.4f}")


def format_interval(m: MetricComparison) -> str:
    if m.ci is None or m.level is None:
        return "—"
    return f"[{format_value(m.metric, m.ci[0])}, {format_value(m.metric, m.ci[1])}] {m.level:.1%}"


def _short(value: Any, width: int = 48) -> str:
    text = "—" if value is None else str(value)
    if len(text) == 64 and all(ch in "0123456789abcdef" for ch in text):
        text = text[:12]  # a sha256
    return text if len(text) <= width else text[:width - 1] + "…"


def invariant_text(name: str, value: Any) -> str:
    """One invariant's value for one run, as the tables show it."""
    if name == "cache":
        rate = value["hit_rate"]
        return f"{value['policy']}, " + ("hit rate not reported" if rate is None else f"{rate:.1%} of prompt tokens "
                                                                                       "cached")
    if name in ("precision", "decoding") and isinstance(value, dict):
        shown = ", ".join(f"{k}={v}" for k, v in value.items() if v is not None)
        return shown or "not reported"
    if name == "window" and isinstance(value, dict):
        measure = {k: v for k, v in value["measure"].items() if v is not None}
        return (f"warm-up {value['warmup']['requests']}{' (barrier)' if value['warmup']['barrier'] else ''}, "
                f"measure {', '.join(f'{k} {v}' for k, v in measure.items())}, repetitions {value['repetitions']}")
    if name == "load" and isinstance(value, dict):
        return f"{value['pattern']}, schedule {_short(value['schedule'])}, retry {value['on_reject'].get('retry')}"
    return _short(value, 120)


def render_comparison(c: Comparison) -> list[str]:
    """The comparison as text lines: invariants, fields that differ, then one table per other
    run, then caveats."""
    fmt = format_value
    lines = [f"Calls a difference only when it is significant at --alpha {c.alpha:.0%} (Holm-corrected) and at "
             f"least --min-effect {c.min_effect:.0%} of the first run; a p99 is compared only with "
             f"{min_samples(0.99)} successful requests or more in each run (a p50 with {min_samples(0.5)}).", ""]
    for name in INVARIANTS:
        seen = c.values.get(name) or []
        if name in c.differences:
            state = "ALLOWED" if name in c.allowed else "DIFFERS"
            shown = " | ".join(f"{r.name}: {invariant_text(name, v)}" for r, v in zip(c.runs, c.differences[name]))
            if name == "cache":
                shown += f" (tolerance {CACHE_TOLERANCE:.0%} of prompt tokens)"
            lines.append(f"{state:<8} {name}: {shown}")
        else:
            lines.append(f"{'same':<8} {name}" + (f": {invariant_text(name, seen[0])}" if seen else ""))
    if c.fields:
        width = max(len(k) for k in c.fields) + 2
        lines += ["", f"Fields that differ ({len(c.fields)}):",
                  (f"{'field':<{width}}" + "".join(f"{_short(r.name, 30):<32}" for r in c.runs)).rstrip()]
        lines += [f"{name:<{width}}" + "".join(f"{_short(v, 30):<32}" for v in seen).rstrip()
                  for name, seen in c.fields.items()]
    if not c.comparable:
        lines.append("Result: NOT COMPARABLE (pass --allow FIELD to compare anyway)")
        return lines
    if c.differences:
        lines.append("compared anyway, allowing: " + ", ".join(n for n in c.differences))
    for k, (other, rows) in enumerate(zip(c.runs[1:], c.metrics)):
        lines.append("")
        lines.append(f"{other.name} against {c.runs[0].name}")
        lines.append(f"{'metric':<36} {'first':>11} {'other':>11} {'difference':>11}  {'interval (Holm level)':<32} "
                     f"{'Holm p':>7}  verdict")
        for m in rows:
            diff = None if m.base is None or m.other is None else m.other - m.base
            lines.append(f"{m.metric + '.' + m.stat:<36} {fmt(m.metric, m.base):>11} {fmt(m.metric, m.other):>11} "
                         f"{fmt(m.metric, diff):>11}  {format_interval(m):<32} {format_p(m.p):>7}  {m.verdict}")
        lines.append(method_line(c))
        if k < len(c.accuracy):
            lines += render_accuracy(c.accuracy[k], c.alpha)
    lines.extend(["", "Caveats:"] + [f"- {c_}" for c_ in c.caveats] if c.caveats else ["", "Caveats: none"])
    lines.append("Result: COMPARABLE")
    return lines
