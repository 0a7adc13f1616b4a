"""`passport history --metric M --by FIELD`: one metric over the ledger's runs, in time order, with
each run's interval, and the run where it moved.

A history is read per series: runs of the same workload and schedule hashes (a different
workload is a different measurement, never a point on the same line). `--by` names the field
shown beside each point (e.g. `engine.build`); a point whose identity differs from the one before
it in the series (the `--by` field, engine, model, precision, host, harness revision) is annotated
with what changed.

The change detector. A point is flagged when its own interval lies wholly outside the envelope of
the intervals of the last `WINDOW` VALID points of its series (the lowest of their low ends to
the highest of their high ends): the new run's figure, with its own uncertainty, is outside
everything the recent runs, each with theirs, allowed. Why this one: it uses what every passport
already states (a distribution-free interval per percentile, or a t interval per rate over
repetitions), so it needs no model of the noise and no tuning, it works from a history of
`WINDOW` points where an E-divisive or a Bayesian change-point method wants dozens, and it
answers the release manager's question online, for the newest point, without re-deciding old ones.
Its envelope spans run-to-run drift as well as within-run sampling (five runs' intervals together),
so an unchanged build is rarely flagged (the A/A benchmark counts how rarely); a shift smaller
than the runs' own spread is not flagged, by design. A point without an interval (too few samples
for it) counts as its value alone. INVALID runs are shown, marked, and neither flagged nor part of
an envelope.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from passport.ledger._ledger import column_of, connect, quote_name, runs_columns, where_clause

__all__ = ["Point", "History", "history", "history_json", "WINDOW", "ANNOTATED"]

WINDOW = 5
ANNOTATED = ("engine.name", "engine.version", "engine.build", "model.id", "model.file_sha256", "model.quantization",
             "engine.kv_cache_dtype", "host.cpu", "host.gpu")


@dataclass
class Point:
    """One run's figure in a history."""

    run_id: str
    created_utc: str
    verdict: str
    value: float | None
    low: float | None
    high: float | None
    by: str | None
    series: str
    run_dir: str
    identity: dict[str, str | None]
    flagged: bool = False
    changes: list[str] = field(default_factory=list)
    unjudged: str | None = None  # why the change detector could not judge this point, if it could not

    @property
    def bounds(self) -> tuple[float, float] | None:
        if self.value is None:
            return None
        return (self.low if self.low is not None else self.value, self.high if self.high is not None else self.value)


@dataclass
class History:
    metric: str
    by: str | None
    points: list[Point]
    skipped: list[tuple[Path, str]]
    window: int = WINDOW


def _detect(points: list[Point], window: int) -> None:
    """Flag, per series, each VALID point outside its last `window` VALID points' envelope, and
    note what changed in its identity since the point before it."""
    by_series: dict[str, list[Point]] = {}
    for point in points:
        earlier = by_series.setdefault(point.series, [])
        if earlier:
            last = earlier[-1]
            point.changes = [f"{k}: {last.identity.get(k)} -> {point.identity.get(k)}"
                             for k in point.identity if point.identity.get(k) != last.identity.get(k)]
        valid = [p for p in earlier if p.verdict == "VALID" and p.bounds is not None][-window:]
        bounds = point.bounds
        if point.verdict != "VALID":
            point.unjudged = f"{point.verdict}: its figures measure nothing the series compares"
        elif bounds is None:
            point.unjudged = "the run has no value for this metric"
        elif len(valid) < window:
            point.unjudged = (f"the series has {len(valid)} earlier VALID run{'s' if len(valid) != 1 else ''}; the "
                              f"change detector needs {window}")
        else:
            low = min(b[0] for p in valid if (b := p.bounds) is not None)
            high = max(b[1] for p in valid if (b := p.bounds) is not None)
            point.flagged = bounds[0] > high or bounds[1] < low
        earlier.append(point)


def history(ledger: Path, metric: str, by: str | None, filters: list[str], window: int = WINDOW) -> History:
    """The history of `metric` (a runs column: `ttft.any.p99`) over the ledger (see the module
    docstring); passport.ledger.LedgerError naming an unknown metric or field."""
    con, skipped = connect(ledger)
    columns = runs_columns(con)
    if "run_id" not in columns or "workload_sha256" not in columns:
        return History(metric, by, [], skipped, window)
    value = column_of(metric, columns)
    by_column = column_of(by, columns) if by else None
    wanted = ([by_column] if by_column else []) + [f"identity.{k}" for k in ANNOTATED] + ["harness.git_revision"]
    shown = [c for c in dict.fromkeys(wanted) if c in columns]
    low, high = f"{value}.ci_low", f"{value}.ci_high"
    select = [quote_name(value), *(quote_name(c) if c in columns else "NULL" for c in (low, high))]
    condition, params = where_clause(filters, columns)
    rows = con.execute(
        f"SELECT run_id, created_utc, verdict, workload_sha256 || '/' || schedule_sha256, run_dir, {', '.join(select)}"
        + "".join(f", CAST({quote_name(c)} AS VARCHAR)" for c in shown)
        + f" FROM runs WHERE {condition} ORDER BY created_utc, added_utc", params).fetchall()
    points = []
    for row in rows:
        run_id, created, verdict, series, run_dir, v, lo, hi = row[:8]
        identity = dict(zip((c.removeprefix("identity.") for c in shown), row[8:]))
        points.append(Point(str(run_id), str(created), str(verdict), None if v is None else float(v),
                            None if lo is None else float(lo), None if hi is None else float(hi),
                            None if by_column is None else identity.get(by_column.removeprefix("identity.")),
                            str(series), str(run_dir), identity))
    _detect(points, window)
    return History(metric, by, points, skipped, window)


def history_json(h: History) -> list[dict[str, Any]]:
    """The points as JSON rows (what `--json` prints)."""
    return [{"run_id": p.run_id, "created_utc": p.created_utc, "verdict": p.verdict, "value": p.value,
             "ci_low": p.low, "ci_high": p.high, "by": p.by, "series": p.series, "flagged": p.flagged,
             "judged": p.unjudged is None, "unjudged": p.unjudged, "changes": p.changes, "run_dir": p.run_dir}
            for p in h.points]

