"""The comparison report: result, invariants side by side, per-run tables, caveats, CDFs."""

from __future__ import annotations

import numpy as np

from passport.audit import per_request_samples
from passport.judge import (
    INVARIANTS,
    Comparison,
    MetricComparison,
    format_interval,
    format_p,
    format_value,
    invariant_text,
    method_line,
)
from passport.report._doc import Block, Bullets, Heading, Image, Para, Table, Verdict
from passport.report._plots import CDF_METRICS, latency_cdfs
from passport.report._run_report import num

__all__ = ["comparison_blocks"]


def _row(m: MetricComparison) -> list[str]:
    fmt = format_value
    return [f"`{m.metric}.{m.stat}`", fmt(m.metric, m.base), fmt(m.metric, m.other),
            fmt(m.metric, None if m.base is None or m.other is None else m.other - m.base),
            format_interval(m), format_p(m.p),
            f"**{m.verdict}**" if m.verdict in ("faster", "slower", "higher", "lower") else m.verdict]


def comparison_blocks(c: Comparison) -> list[Block]:
    """The comparison report: result, invariants side by side, per-run tables, caveats, CDFs."""
    blocks: list[Block] = [Verdict("COMPARABLE" if c.comparable else "NOT COMPARABLE",
                                   f"First run (the base): `{c.runs[0].name}`; others: "
                                   + ", ".join(f"`{r.name}`" for r in c.runs[1:]) + "."
                                   + (f" Compared anyway, allowing: {', '.join(c.allowed)}." if c.differences
                                      and c.comparable else ""))]
    rows = []
    for name in INVARIANTS:
        state = ("allowed" if name in c.allowed else "DIFFERS") if name in c.differences else "same"
        rows.append([name, state] + [f"`{invariant_text(name, v)}`" for v in c.values.get(name, [])])
    blocks += [Heading("Comparability invariants"), Table(["invariant", "state"] + [r.name for r in c.runs], rows)]
    if c.fields:
        blocks += [Heading("Fields that differ"),
                   Table(["field"] + [r.name for r in c.runs],
                         [[f"`{name}`"] + [f"`{v}`" for v in seen] for name, seen in c.fields.items()])]
    for k, (other, metrics) in enumerate(zip(c.runs[1:], c.metrics)):
        blocks += [Heading(f"{other.name} against {c.runs[0].name}"),
                   Para("Difference: other minus first, with its interval and two-sided p-value. "
                        + method_line(c)),
                   Table(["metric", "first", "other", "difference", "interval (Holm level)", "Holm p", "verdict"],
                         [_row(m) for m in metrics])]
        accuracy = c.accuracy[k] if k < len(c.accuracy) else []
        if accuracy:
            blocks += [Para(f"Accuracy, item by item: each item's first answer (under load where both runs have "
                            f"one) paired across the runs; exact two-sided sign test, Bonferroni over "
                            f"{len(accuracy)} sets at {c.alpha:g}."),
                       Table(["set", "phase", "items", "first", "other", "worse", "better", "p", "verdict"],
                             [[f"`{a.set}`", a.phase or "—", str(a.n_pairs), num(a.base, 3), num(a.other, 3),
                               str(a.worse), str(a.better), "—" if a.p is None else f"{a.p:.3g}",
                               f"**{a.verdict}**" if a.verdict in ("higher", "lower") else a.verdict]
                              for a in accuracy])]
    blocks += [Heading("Caveats"), Bullets(c.caveats, kind="caveats") if c.caveats else Para("None.")]
    series = {}
    for run in c.runs:
        samples = per_request_samples(run, CDF_METRICS)
        series[run.name] = {k: np.concatenate(v) if v else np.zeros(0) for k, v in samples.items()}
    blocks += [Heading("Latency CDFs"),
               Image("compare_cdf.png", latency_cdfs(series), "Latency CDFs of each run's successful measured "
                                                              "requests, side by side.")]
    return blocks
