"""Accuracy of one run against another's, item by item: for each set both runs scored (the same
items: equal set hashes), each item's first answer under load (alone when either run has none
under load) in both runs, paired. The difference is other minus first over the paired items;
the test is the exact two-sided sign test on the items that changed (McNemar's exact test),
Bonferroni-corrected over the sets compared, apart from the latency family (accuracy and speed
answer different questions). A verdict names a difference only when it is significant.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from passport.audit import first_answers, sign_test_p

__all__ = ["AccuracyComparison", "compare_accuracy", "render_accuracy"]


@dataclass(frozen=True)
class AccuracyComparison:
    """One set of one run against the first: the phase paired, items paired, the accuracy of each
    run over them, items right in the first and wrong in the other (`worse`) and the reverse, the
    corrected p and the verdict (`higher`, `lower`, `no difference`, or why it was not compared)."""

    set: str
    phase: str | None
    n_pairs: int
    base: float | None
    other: float | None
    worse: int
    better: int
    p: float | None
    verdict: str


def _two_sided(worse: int, better: int) -> float:
    return min(1.0, 2.0 * min(sign_test_p(worse, better), sign_test_p(better, worse)))


def compare_accuracy(base: pa.Table | None, other: pa.Table | None, alpha: float) -> list[AccuracyComparison]:
    """Every set of `base` (the first run's accuracy.parquet) against `other`'s."""
    runs = (first_answers(base), first_answers(other))
    loaded = (runs[0]["under_load"], runs[1]["under_load"])
    alone = (runs[0]["alone"], runs[1]["alone"])
    names = sorted({*loaded[0], *alone[0]})
    out: list[AccuracyComparison] = []
    for name in names:
        phase = "under_load" if name in loaded[0] and name in loaded[1] else "alone"
        first, second = loaded if phase == "under_load" else alone
        a, b = first.get(name), second.get(name)
        if a is None or b is None:
            out.append(AccuracyComparison(name, None, 0, None, None, 0, 0, None, "not in both runs"))
            continue
        if a[0] != b[0]:
            out.append(AccuracyComparison(name, phase, 0, None, None, 0, 0, None, "different items (set sha256)"))
            continue
        items = [i for i in a[1] if i in b[1]]
        n = len(items)
        worse = sum(a[1][i] and not b[1][i] for i in items)
        better = sum(b[1][i] and not a[1][i] for i in items)
        out.append(AccuracyComparison(
            name, phase, n, sum(a[1][i] for i in items) / n if n else None,
            sum(b[1][i] for i in items) / n if n else None, worse, better, _two_sided(worse, better) if n else None,
            "no items answered in both"))
    tested = [c for c in out if c.p is not None]
    for i, c in enumerate(out):
        if c.p is not None:
            p = min(1.0, c.p * len(tested))
            verdict = ("no difference" if p >= alpha else "higher" if c.better > c.worse else "lower")
            out[i] = replace(c, p=p, verdict=verdict)
    return out


def render_accuracy(rows: list[AccuracyComparison], alpha: float) -> list[str]:
    """Text lines of the accuracy comparison (empty when neither run scored accuracy)."""
    if not rows:
        return []

    def share(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    lines = [f"accuracy, item by item (exact sign test, Bonferroni over {len(rows)} sets, alpha {alpha:g})",
             f"{'set':<24} {'phase':<11} {'items':>6} {'first':>7} {'other':>7} {'worse':>6} {'better':>6} "
             f"{'p':>7}  verdict"]
    lines += [f"{r.set:<24} {r.phase or '—':<11} {r.n_pairs:>6} {share(r.base):>7} {share(r.other):>7} {r.worse:>6} "
              f"{r.better:>6} {'—' if r.p is None else format(r.p, '.3g'):>7}  {r.verdict}" for r in rows]
    return lines
