"""A passport (or a campaign record) as the ledger's rows: one wide row per run, one row per
canary case, one row per campaign arm repetition.

Columns of `runs` (every value plain: strings, integers, floats, so any Parquet reader takes them):
- who: `run_id`, `name`, `created_utc` (the run's start), `added_utc`, `run_dir` (absolute: the
  raw logs stay where they are, referenced, never copied), `passport_sha256` (its content hash),
  `signer` (the fingerprint of the key that signed it; null for an unsigned passport),
  `files_json` (each raw file's sha256, as JSON), `verdict`, `canaries`, `schema_version`,
  `harness.version`, `harness.git_revision`;
- the protocol's hashes: `workload_sha256`, `schedule_sha256`, `declared_sha256`,
  `request_params_sha256`, `spec_sha256`, and `load.pattern`, `load.rate_per_s`,
  `load.concurrency`;
- identity: `identity.<field>` (the value as text: JSON for a list or a mapping) and
  `identity.<field>.source` (its provenance: probed, declared, launcher, client, unknown);
- results: `<metric id>.<stat>` for every statistic the passport has (seconds for latencies,
  per second for rates), with `<metric id>.<stat>.ci_low` and `.ci_high`: the passport's
  distribution-free 95 % interval of a percentile, or for a rate's mean over 2+ repetitions the
  Student t interval; `error_rate`, `cost.usd_for_window` and the cost rates where declared.

Pure functions of the passport; `passport.ledger._store` writes them.
"""

from __future__ import annotations

import json
from typing import Any

from passport.audit import RunFiles, canonical_json, sha256_bytes
from passport.judge._compare import invariant_values
from passport.judge._stats import t_critical
from passport.model import Passport

__all__ = ["run_row", "canary_rows", "CANARY_COLUMNS", "arm_rows", "STATS", "identity_column", "metric_column",
           "EXACT_INVARIANTS", "invariant_column"]

# The comparability invariants a baseline must match exactly (compare's, less the cache, whose
# measured share is compared within a tolerance, and validity, a column of its own): each runs
# row carries the hash of each, so a ledger baseline is picked among runs of the same load.
EXACT_INVARIANTS = ("model", "precision", "decoding", "workload", "load", "window")


def invariant_column(name: str) -> str:
    """The runs column holding the hash of comparability invariant `name`."""
    return f"invariant.{name}_sha256"

STATS = ("n", "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p99_9")


def identity_column(field: str) -> str:
    """The runs column of an identity field (`engine.build` -> `identity.engine.build`)."""
    return f"identity.{field}"


def metric_column(metric: str, stat: str) -> str:
    """The runs column of a statistic (`ttft.any`, `p99` -> `ttft.any.p99`)."""
    return f"{metric}.{stat}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _hash(value: Any) -> str:
    return sha256_bytes(canonical_json(value))


def _rate_interval(figure: dict[str, Any]) -> tuple[float, float] | None:
    n, mean, std = figure.get("n"), figure.get("mean"), figure.get("std")
    if not isinstance(n, int) or n < 2 or mean is None or std is None:
        return None
    half = t_critical(0.05, n - 1) * float(std) / n**0.5
    return float(mean) - half, float(mean) + half


def run_row(p: Passport, run_dir: str, added_utc: str) -> dict[str, Any]:
    """The `runs` row of one passport (see the module docstring)."""
    protocol = p.protocol
    load = protocol.effective.get("load") or {}
    counts = p.validity.counts
    measured, succeeded = counts.get("measured"), counts.get("succeeded")
    row: dict[str, Any] = {
        "run_id": p.run_id, "name": p.name, "created_utc": p.created_utc, "added_utc": added_utc,
        "run_dir": run_dir, "passport_sha256": p.content_sha256,
        "signer": p.signature.fingerprint if p.signature is not None else None,
        "files_json": json.dumps({k: v["sha256"] for k, v in sorted(p.files.items())}),
        "verdict": p.verdict, "canaries": p.validity.canaries["status"], "schema_version": p.schema_version,
        "harness.version": protocol.harness.version, "harness.git_revision": protocol.harness.git_revision,
        "workload_sha256": protocol.workload.sha256, "schedule_sha256": protocol.schedule.sha256,
        "declared_sha256": None if protocol.declared is None else protocol.declared.sha256,
        "request_params_sha256": _hash(protocol.request_params), "spec_sha256": _hash(protocol.effective),
        "load.pattern": protocol.schedule.pattern,
        "load.rate_per_s": None if load.get("rate_per_s") is None else float(load["rate_per_s"]),
        "load.concurrency": None if load.get("concurrency") is None else int(load["concurrency"]),
        "error_rate": (measured - succeeded) / measured if measured and succeeded is not None else None,
    }
    invariants = invariant_values(p)
    row.update({invariant_column(name): _hash(invariants[name]) for name in EXACT_INVARIANTS})
    for field, sourced in sorted(p.identity.items()):
        row[identity_column(field)] = _text(sourced.value)
        row[f"{identity_column(field)}.source"] = sourced.source
    for metric, figure in sorted(p.results["metrics"].items()):
        stats: dict[str, Any] = dict(figure)
        intervals = stats.get("ci95") or {}
        for stat in STATS:
            value = stats.get(stat)
            row[metric_column(metric, stat)] = None if value is None else float(value)
        for stat, bounds in intervals.items():
            if bounds is not None and stat in STATS:
                row[f"{metric_column(metric, stat)}.ci_low"], row[f"{metric_column(metric, stat)}.ci_high"] = \
                    float(bounds[0]), float(bounds[1])
        if metric.startswith(("throughput.", "goodput.")):
            interval = _rate_interval(stats)
            if interval is not None:
                row[f"{metric}.mean.ci_low"], row[f"{metric}.mean.ci_high"] = interval
    cost = p.results.get("cost")
    if cost is not None:
        row["cost.usd_for_window"] = float(cost["usd_for_window"])
        for key, value in (cost.get("throughput") or {}).items():
            if isinstance(value, (int, float)):
                row[f"cost.throughput.{key}"] = float(value)
    return row


_CANARY_KEPT = ("suite", "suite_sha256", "case_id", "case_version", "case_sha256", "kind", "phase", "verdict",
                "category", "reason")
# every column of `canary_cases`: a run without canaries still writes them (no rows), since a Parquet
# file with no column is one DuckDB 2 refuses to read ("Need at least one non-root column")
CANARY_COLUMNS = ("run_id", "passport_sha256", "created_utc", *_CANARY_KEPT)


def canary_rows(p: Passport, files: RunFiles) -> list[dict[str, Any]]:
    """One `canary_cases` row per case the run checked (canaries.parquet, read through `files`),
    with the run's keys."""
    table = files.table("canaries")
    if table is None:
        return []
    return [{"run_id": p.run_id, "passport_sha256": p.content_sha256, "created_utc": p.created_utc,
             **{k: r.get(k) for k in _CANARY_KEPT}} for r in table.select(list(_CANARY_KEPT)).to_pylist()]


def arm_rows(record: dict[str, Any], campaign_dir: str, added_utc: str) -> list[dict[str, Any]]:
    """One `arms` row per repetition of each arm of a campaign record."""
    rows = []
    for arm in record["arms"]:
        interval = arm.get("interval") or {}
        for rep in arm["repetitions"]:
            rows.append({
                "campaign": record["name"], "campaign_sha256": record.get("content_sha256"),
                "campaign_dir": campaign_dir, "created_utc": record.get("created_utc"), "added_utc": added_utc,
                "objective_name": record.get("objective"), "arm": arm["name"], "arm_status": arm.get("status"),
                "rank": arm.get("rank"), "interval.low": interval.get("low"), "interval.high": interval.get("high"),
                "round": rep.get("round"), "run": rep.get("run"), "verdict": rep.get("verdict"),
                "passport_sha256": rep.get("passport_sha256"), "objective": rep.get("objective"),
                "status": rep.get("status"), "reason": rep.get("reason"),
            })
    return rows
