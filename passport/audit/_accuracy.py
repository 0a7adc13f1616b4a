"""Accuracy alone and under load, from accuracy.parquet (one row per item answered), re-scored.

A run that declares `accuracy` sends each set's items one at a time before timing (phase
`alone`) and again beside the timed load at a declared share of its completions (phase
`under_load`). Every answer is scored again here with `_scoring.score`, never taken from the
file's `correct` column (which is kept for people and DuckDB; rows where it disagrees are
counted in `rescored_differ`, which a passport written by the run has at 0).

Per set: accuracy in each phase with its Wilson 95 % interval, over answered items (a request
that failed or was cut off by a stop has no answer to score; it is counted in `failed`, not as
wrong). The drop: over items answered in both phases (an item's first answer under load when it
was sent more than once), alone minus under load, with a Student interval on the paired
differences, and the exact one-sided sign test (McNemar's exact test) on the discordant items:
the chance of at least `worse` of `worse + better` flips going the bad way if load changed
nothing.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from passport.audit._metrics import SUCCESS_OUTCOMES
from passport.audit._scoring import DEFAULT_TOLERANCE, score
from passport.audit._student import t_critical_95
from passport.audit._types import AccuracyDropFigures, AccuracyFigures, AccuracyPhaseFigures

__all__ = ["ACCURACY_FILE", "ACCURACY_SCHEMA", "accuracy_figures", "wilson_95", "sign_test_p", "rescore",
           "first_answers"]

ACCURACY_FILE = "accuracy.parquet"
ACCURACY_SCHEMA = pa.schema([
    ("set", pa.string()), ("set_sha256", pa.string()), ("item_id", pa.string()), ("phase", pa.string()),
    ("scorer", pa.string()), ("reference", pa.string()), ("tolerance", pa.float64()), ("prompt", pa.string()),
    ("content", pa.string()), ("extracted", pa.string()), ("correct", pa.bool_()), ("outcome", pa.string()),
    ("error", pa.string()), ("http_status", pa.int32()), ("finish_reason", pa.string()),
    ("completion_tokens", pa.int64()), ("max_tokens", pa.int64()), ("in_flight", pa.int64()),
    ("sent_ns", pa.int64()), ("end_ns", pa.int64()),
])
_SHOWN_CHANGED = 20


def wilson_95(correct: int, n: int) -> tuple[float, float]:
    """Wilson's score interval (95 %) for `correct` of `n`: sensible at 0 and n, unlike Wald's."""
    if n <= 0:
        return (0.0, 1.0)
    z = 1.959963984540054
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def sign_test_p(worse: int, better: int) -> float:
    """One-sided exact sign test: P(X >= worse) for X ~ Binomial(worse + better, 1/2); 1.0 with no flips."""
    n = worse + better
    if n == 0:
        return 1.0
    return min(1.0, sum(math.comb(n, k) for k in range(worse, n + 1)) / 2.0 ** n)


def rescore(row: dict[str, Any]) -> bool | None:
    """An answered row scored again (None: no answer to score)."""
    if row["outcome"] not in SUCCESS_OUTCOMES:
        return None
    tolerance = row["tolerance"]
    return score(str(row["scorer"]), str(row["reference"]), str(row["content"] or ""),
                 DEFAULT_TOLERANCE if tolerance is None else float(tolerance)).correct


def _phase(rows: Scored) -> AccuracyPhaseFigures | None:
    if not rows:
        return None
    scored = [ok for _, ok in rows if ok is not None]
    right = sum(scored)
    low, high = wilson_95(right, len(scored))
    return {"n": len(scored), "correct": right, "failed": len(rows) - len(scored),
            "accuracy": right / len(scored) if scored else None,
            "ci_low": low if scored else None, "ci_high": high if scored else None}


def _first(rows: Scored) -> dict[str, bool]:
    """Each item's first scored answer (by send time), right or not."""
    out: dict[str, bool] = {}
    for row, ok in sorted(rows, key=lambda x: int(x[0]["sent_ns"] or 0)):
        if ok is not None:
            out.setdefault(str(row["item_id"]), ok)
    return out


Scored = list[tuple[dict[str, Any], bool | None]]  # rows with their answers re-scored (None: no answer)


def _scored_by_set(table: pa.Table) -> dict[str, Scored]:
    """Every row of accuracy.parquet, re-scored, grouped by set (sets in name order)."""
    by_set: dict[str, Scored] = {}
    for row in table.to_pylist():
        by_set.setdefault(str(row["set"]), []).append((row, rescore(row)))
    return dict(sorted(by_set.items()))


def first_answers(table: pa.Table | None) -> dict[str, dict[str, tuple[str, dict[str, bool]]]]:
    """By phase (alone, under_load), then by set: (its sha256, each item's first answer in that
    phase re-scored, right or not): what `passport compare` pairs across runs."""
    out: dict[str, dict[str, tuple[str, dict[str, bool]]]] = {"alone": {}, "under_load": {}}
    for name, rows in ({} if table is None else _scored_by_set(table)).items():
        for phase, found in out.items():
            mine = [x for x in rows if x[0]["phase"] == phase]
            if mine:
                found[name] = (str(mine[0][0]["set_sha256"]), _first(mine))
    return out


def _paired(alone: Scored, loaded: Scored) -> AccuracyDropFigures | None:
    first_alone, first_loaded = _first(alone), _first(loaded)
    items = [i for i in first_alone if i in first_loaded]
    if not items:
        return None
    diffs = [int(first_alone[i]) - int(first_loaded[i]) for i in items]
    worse = [i for i, d in zip(items, diffs) if d > 0]
    better = sum(d < 0 for d in diffs)
    n = len(diffs)
    mean = sum(diffs) / n
    if n > 1:
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = t_critical_95(n - 1) * sd / math.sqrt(n)
    else:
        half = math.inf
    return {"n_pairs": n, "worse": len(worse), "better": better, "drop": mean,
            "drop_low": max(-1.0, mean - half), "drop_high": min(1.0, mean + half),
            "p_value": sign_test_p(len(worse), better), "changed": sorted(worse)[:_SHOWN_CHANGED]}


def accuracy_figures(table: pa.Table | None) -> dict[str, AccuracyFigures] | None:
    """`results.accuracy` by set, from accuracy.parquet (None: the run declared no accuracy)."""
    if table is None:
        return None
    out: dict[str, AccuracyFigures] = {}
    for name, rows in _scored_by_set(table).items():
        alone = [x for x in rows if x[0]["phase"] == "alone"]
        loaded = [x for x in rows if x[0]["phase"] == "under_load"]
        first = rows[0][0]
        out[name] = {"scorer": ", ".join(sorted({str(r["scorer"]) for r, _ in rows})),
                     "set_sha256": str(first["set_sha256"]), "n_items": len({str(r["item_id"]) for r, _ in rows}),
                     "alone": _phase(alone), "under_load": _phase(loaded), "paired": _paired(alone, loaded),
                     "rescored_differ": sum(r["correct"] is not None and ok is not None and bool(r["correct"]) != ok
                                            for r, ok in rows)}
    return out
