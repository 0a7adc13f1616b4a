"""The comparison report: result, invariants side by side, per-run tables, caveats, CDFs."""

from __future__ import annotations

import numpy as np

from passport.audit import per_request_samples
from passport.judge import INVARIANTS, Comparison, MetricComparison, format_value, method_line
from passport.report._doc import Block, Bullets, Heading, Image, Para, Table, Verdict
from passport.report._plots import CDF_METRICS, latency_cdfs

__all__ = ["comparison_blocks"]


def _row(m: MetricComparison) -> list[str]:
    fmt = format_value
    return [f"`{m.metric}.{m.stat}`", fmt(m.metric, m.base), fmt(m.metric, m.other),
            fmt(m.metric, None if m.base is None or m.other is None else m.other - m.base),
            "—" if m.ci95 is None else f"[{fmt(m.metric, m.ci95[0])}, {fmt(m.metric, m.ci95[1])}]",
            "—" if m.p is None else ("<0.0001" if m.p < 1e-4 else f"{m.p:.4f}"),
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
        if name in c.differences:
            state = "allowed" if name in c.allowed else "DIFFERS"
            rows.append([name, state] + [f"`{v}`" for v in c.differences[name]])
        else:
            rows.append([name, "same"] + [""] * len(c.runs))
    blocks += [Heading("Comparability invariants"), Table(["invariant", "state"] + [r.name for r in c.runs], rows)]
    for other, metrics in zip(c.runs[1:], c.metrics):
        blocks += [Heading(f"{other.name} against {c.runs[0].name}"),
                   Para("Difference: other minus first, with its 95 % interval and two-sided p-value. "
                        + method_line(c)),
                   Table(["metric", "first", "other", "difference", "95 % interval", "p", "verdict"],
                         [_row(m) for m in metrics])]
    blocks += [Heading("Caveats"), Bullets(c.caveats, kind="caveats") if c.caveats else Para("None.")]
    series = {}
    for run in c.runs:
        samples = per_request_samples(run, CDF_METRICS)
        series[run.name] = {k: np.concatenate(v) if v else np.zeros(0) for k, v in samples.items()}
    blocks += [Heading("Latency CDFs"),
               Image("compare_cdf.png", latency_cdfs(series), "Latency CDFs of each run's successful measured "
                                                              "requests, side by side.")]
    return blocks
